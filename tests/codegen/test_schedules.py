"""The CPU schedule rules keep numerics: each rule on shapes that exercise
its edges (a partial last tile, a tile of pixels crossing a row, strides,
channel counts that are not a multiple of the vector width, reductions
along inner and outer axes), fused with epilogues, against onnxruntime.
Also: which rule each kernel gets, pinning a rule, and the fallback.

They build for the host (``cpu``), or for the target that
``BRAZE_TEST_TARGET`` names (``cpu-avx2``, ``cpu-avx512``; docs/testing.md):
every register tile and layout they expect comes from that target's machine
model, and numerics are checked wherever this host can run its code (an
AVX-512 build on an AVX2-only host is built, not run)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from braze.compiler import compile as braze_compile
from onnx_check import float_model as _model
from onnx_check import run_ort
from schedule_check import RNG, TARGET, build_target, check_numerics, runs_here, weight

@pytest.mark.parametrize("shape_a,shape_b", [([197, 64], [64, 96]), ([2, 13, 16], [2, 16, 40])])
def test_gemm_rows_past_the_last_tile_read_a_clamped_row(shape_a, shape_b):
    """ViT's 197 tokens fill no whole tile of rows: the last tile's extra
    rows read A's last row again (an index clamped per tile row) and are
    not written back, with no copy of A padded with zero rows."""
    from braze.codegen.kernel import partition
    from braze.codegen.schedules import schedule_kernel
    from braze.pipeline import pipeline
    from braze.frontend import import_onnx
    from braze.targets import get_target

    weights = {"w": weight(*shape_b)} if len(shape_b) == 2 else {}
    inputs = [("x", shape_a)] + ([] if weights else [("w", shape_b)])
    model = _model([helper.make_node("MatMul", ["x", "w"], ["out"])], inputs, ["out"], weights)
    art = check_numerics(model)
    assert art.kernels[0]["schedule"] == "gemm"
    module = import_onnx(model)
    pipeline(2).run(module)
    (kernel,) = partition(module.main)
    script = schedule_kernel(kernel, get_target(TARGET)).script()
    assert "T.min(" in script and 'sblock("p0_pad")' not in script, script


@pytest.mark.parametrize("m,k,n", [(13, 40, 64), (8, 16, 32), (1, 24, 48), (20, 32, 24), (19, 24, 37)])
def test_gemm_edges_with_epilogue(m, k, n):
    """Rows not a multiple of the tile (padded), one row, N not a multiple
    of two vectors, N a prime (columns padded)."""
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", ["y", "b"], ["z"]),
                    helper.make_node("Relu", ["z"], ["out"])],
                   [("x", [1, m, k])], ["out"], {"w": weight(k, n), "b": weight(n)})
    art = check_numerics(model)
    assert art.kernels[0]["schedule"] == "gemm"


@pytest.mark.parametrize("k,steps", [(64, 4), (18, 2), (7, 1)])
def test_gemm_unrolls_k_steps_that_divide_it(k, steps):
    """The micro-kernel's loop body holds ``unroll_k`` k steps: 4 where they
    divide k, else 2, else 1; numerics, and a pinned 1."""
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["out"])],
                   [("x", [1, 12, k])], ["out"], {"w": weight(k, 32)})
    art = check_numerics(model)
    assert art.kernels[0]["schedule"] == "gemm"
    assert art.kernels[0]["schedule_params"]["nn.matmul#0"]["unroll_k"] == steps
    one = check_numerics(model, schedules={"k0": {"rule": "gemm", "params": {"unroll_k": 1}}})
    assert one.kernels[0]["schedule_params"]["nn.matmul#0"]["unroll_k"] == 1


@pytest.mark.parametrize("shape,n,order", [([1, 7, 7, 48], 64, 1), ([3, 5, 40], 96, 1), ([2, 9, 40], 24, 2)])
def test_batched_gemm_by_a_shared_weight(shape, n, order):
    """A weight times a batch (ConvNeXt's [1, 7, 7, C]): with column tiles
    outside, the batches run inside each column panel; with rows outside,
    as they are. Numerics with an epilogue, both orders pinned."""
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["out"])],
                   [("x", shape)], ["out"], {"w": weight(shape[-1], n)})
    art = check_numerics(model, schedules={"k0": {"rule": "gemm", "params": {"order": order}}})
    assert art.kernels[0]["schedule_params"]["nn.matmul#0"]["order"] == order


@pytest.mark.parametrize("n", [32, 19])
def test_batched_gemm_of_two_activations(n):
    model = _model([helper.make_node("MatMul", ["a", "b"], ["y"]), helper.make_node("Softmax", ["y"], ["out"],
                                                                                     axis=-1)],
                   [("a", [2, 3, 17, 16]), ("b", [2, 3, 16, n])], ["out"], {})
    check_numerics(model)


@pytest.mark.parametrize("c,k,hw,kernel,stride,pad,rule", [
    (8, 32, 12, 3, 1, 1, "conv2d"),     # 3x3: a tile of columns inside a row
    (5, 16, 9, 3, 2, 1, "conv2d"),      # stride 2, odd width
    (16, 24, 12, 1, 1, 0, "pointwise"),  # 1x1: 24 channels, tiles of 16 pixels crossing rows of 12
    (32, 16, 7, 1, 1, 0, "pointwise"),  # 1x1 on 7x7: 49 pixels, padded to whole tiles
    (12, 32, 8, 1, 2, 0, "pointwise"),  # strided 1x1: its pixels gathered into a panel first
    (16, 20, 14, 1, 1, 0, "pointwise"),  # 20 output channels: the last row tile padded with zero weights
    (24, 50, 9, 1, 2, 0, "pointwise"),  # strided, odd map (25 pixels), rows and pixels padded
])
def test_conv_edges_with_residual(c, k, hw, kernel, stride, pad, rule):
    out = (hw + 2 * pad - kernel) // stride + 1
    model = _model([helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[kernel, kernel],
                                     strides=[stride, stride], pads=[pad] * 4),
                    helper.make_node("Add", ["y", "r"], ["z"]), helper.make_node("Relu", ["z"], ["out"])],
                   [("x", [1, c, hw, hw]), ("r", [1, k, out, out])], ["out"],
                   {"w": weight(k, c, kernel, kernel), "b": weight(k)})
    art = check_numerics(model)
    # whether conv2d has a channel block for K depends on the vector width: ask the rule for this host's
    # (a rule that takes the conv and then fails, falling back to generic, must fail here)
    if rule == "conv2d" and _conv_defaults(model) is None:
        rule = "generic"
    assert art.kernels[0]["schedule"] == rule


@pytest.mark.parametrize("stride,pads,hw", [(1, [1, 1, 1, 1], 20), (2, [1, 1, 1, 1], 37), (2, [0, 1, 2, 0], 36)])
def test_conv2d_rows_outside_pad_their_own_rows(stride, pads, hw):
    """With ``order`` 2 (output rows outside) each task pads the input rows
    its row reads, inside the task, instead of a stage that pads the whole
    input first: strided, odd and uneven pads against onnxruntime; two
    images, so that there are rows enough for 8 cores (4 a core)."""
    model = _model([helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3], strides=[stride, stride],
                                     pads=pads), helper.make_node("Relu", ["y"], ["out"])],
                   [("x", [2, 8, hw, hw])], ["out"], {"w": weight(32, 8, 3, 3), "b": weight(32)})
    name = check_numerics(model, schedules=None).kernels[0]["name"]
    art = check_numerics(model, schedules={name: {"rule": "conv2d", "params": {"order": 2}}})
    assert art.kernels[0]["schedule"] == "conv2d"
    assert art.kernels[0]["schedule_params"]["nn.conv#0"]["order"] == 2


@pytest.mark.parametrize("c,k,hw,kernel", [(96, 64, 7, 3), (128, 32, 14, 3), (80, 96, 7, 1)])
def test_conv2d_k_blocks_on_small_maps(c, k, hw, kernel):
    """On a map whose output channel block fits in L1, an order-1 conv2d
    takes its input channels in K blocks (``block_c``, at most BLOCK_C): a
    task is a channel block, each K block passing over all its rows;
    numerics against onnxruntime with a residual, and pinned blocks of 16."""
    from braze.codegen.schedules.conv import BLOCK_C
    from braze.codegen.schedules.machine import divisor_at_most

    model = _model([helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[kernel, kernel],
                                     pads=[kernel // 2] * 4),
                    helper.make_node("Add", ["y", "r"], ["z"]), helper.make_node("Relu", ["z"], ["out"])],
                   [("x", [1, c, hw, hw]), ("r", [1, k, hw, hw])], ["out"],
                   {"w": weight(k, c, kernel, kernel), "b": weight(k)})
    art = check_numerics(model, schedules={"k0": {"rule": "conv2d"}})  # weights larger than the input: order 1
    params = art.kernels[0]["schedule_params"]["nn.conv#0"]
    assert params["order"] == 1
    fits = params["tile_k"] * hw * hw * 4 <= build_target().l1d_bytes
    assert params["block_c"] == (divisor_at_most(c, BLOCK_C) if fits else c)
    pinned = check_numerics(model, schedules={"k0": {"rule": "conv2d", "params": {"order": 1, "block_c": 16}}})
    assert pinned.kernels[0]["schedule_params"]["nn.conv#0"]["block_c"] == 16


def _pointwise(c, k, hw, stride=1):
    return _model([helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[1, 1], strides=[stride, stride]),
                   helper.make_node("Add", ["y", "r"], ["z"]), helper.make_node("Relu", ["z"], ["out"])],
                  [("x", [1, c, hw, hw]), ("r", [1, k, hw // stride, hw // stride])], ["out"],
                  {"w": weight(k, c, 1, 1), "b": weight(k)})


@pytest.mark.parametrize("c,hw,stride,packs", [
    (96, 40, 1, True),    # enough pixel tiles for every core, a long reduction: each task packs its panel
    (24, 40, 1, False),   # 24 channels: bound by its output writes, the input read where it lies
    (96, 80, 2, False),   # strided: its gathered input stage, not per-task panels
])
def test_pointwise_tasks_pack_their_input_panels(c, hw, stride, packs):
    """A 1x1 conv whose pixel tiles are at least 4 a core (the target's
    machine model) and whose reduction is longer than PANEL_MIN_CHANNELS
    copies each tile's strided input into a contiguous panel at the start
    of its task (``panel`` 2); 40 output channels: padded row tiles."""
    from braze.codegen.schedules.pointwise import PANEL_MIN_CHANNELS
    from braze.codegen.schedules.machine import lanes

    target = build_target()
    tiles = (hw // stride) ** 2 // (2 * lanes(target))
    expected = packs and tiles >= 4 * target.num_cores and c > PANEL_MIN_CHANNELS
    art = check_numerics(_pointwise(c, 40, hw, stride))
    assert art.kernels[0]["schedule"] == "pointwise"
    assert art.kernels[0]["schedule_params"]["nn.conv#0"]["panel"] == (2 if expected else 1)


def test_pointwise_panels_pinned_on_padded_tiles():
    """``panel`` 2 pinned where the last pixel tile is partial (30x30) and
    in blocks of tiles. ``panel`` 2 with order 1 is a typed error before
    anything is built (the rule's ``check``)."""
    from braze.errors import ScheduleError

    model = _pointwise(72, 24, 30)
    name = check_numerics(model).kernels[0]["name"]
    for block_n in (1, 2):
        params = {"order": 2, "panel": 2, "block_n": block_n}
        art = check_numerics(model, schedules={name: {"rule": "pointwise", "params": params}})
        assert art.kernels[0]["schedule_params"]["nn.conv#0"]["panel"] == 2
    with pytest.raises(ScheduleError, match="panel 2 .* goes with order 2"):
        braze_compile(model, target=TARGET, schedules={name: {"rule": "pointwise",
                                                              "params": {"order": 1, "panel": 2}}})


def test_small_map_1x1_convs_go_where_the_registers_are():
    """A 1x1 conv on a 14x14 map: 196 pixels in 32-pixel tiles are 14%
    padding; with 32 registers conv2d's channel-vectorized tile (2 vectors x
    14 columns, no padding) takes it, with 16 (AVX2: 16-pixel tiles, 6%)
    pointwise keeps it."""
    from braze.codegen.schedules.machine import lanes, registers

    art = check_numerics(_pointwise(128, 64, 14))
    target = build_target()
    wide = registers(target) >= 32 and lanes(target) == 16
    assert art.kernels[0]["schedule"] == ("conv2d" if wide else "pointwise")


def _conv_defaults(model):
    from braze.codegen.schedules import conv
    from braze.frontend import import_onnx
    from braze.passes import PassManager

    module = import_onnx(model)
    PassManager.parse("canonicalize").run(module)
    op = next(op for op in module.main.body.ops if op.name == "nn.conv")
    return conv.conv_defaults(op, None, build_target())


@pytest.mark.parametrize("n,c,k,hw,pads,bias,epilogue,tile", [
    (1, 32, 32, 28, [1, 1, 1, 1], True, "residual", 4),  # whole tiles, two channel blocks of 16
    (1, 32, 48, 30, [1, 1, 1, 1], False, "relu", 4),     # a partial last tile; 48 channels: blocks of 16
    (2, 40, 32, 29, [0, 2, 1, 1], True, "none", 4),      # two images, uneven pads: a 28x30 output
    (1, 32, 32, 15, [1, 1, 1, 1], True, "relu", 2),      # 15x15: too few 4x4 tiles, 8x8 of 2x2 (a partial one)
])
def test_winograd_edges(n, c, k, hw, pads, bias, epilogue, tile):
    """3x3 stride-1 convs with at least 7x7 output tiles take the Winograd
    rule (4x4 tiles where there are enough, else 2x2); its rounding stays
    inside braze's model tolerance."""
    oh, ow = hw + pads[0] + pads[2] - 2, hw + pads[1] + pads[3] - 2
    nodes = [helper.make_node("Conv", ["x", "w", "b"] if bias else ["x", "w"], ["y"], kernel_shape=[3, 3],
                              pads=pads)]
    inputs = [("x", [n, c, hw, hw])]
    if epilogue == "residual":
        nodes += [helper.make_node("Add", ["y", "r"], ["z"]), helper.make_node("Relu", ["z"], ["out"])]
        inputs.append(("r", [n, k, oh, ow]))
    else:
        nodes.append(helper.make_node("Relu" if epilogue == "relu" else "Identity", ["y"], ["out"]))
    weights = {"w": weight(k, c, 3, 3), **({"b": weight(k)} if bias else {})}
    art = check_numerics(_model(nodes, inputs, ["out"], weights))
    assert art.kernels[0]["schedule"] == "winograd"
    (params,) = art.kernels[0]["schedule_params"].values()
    assert params["tile"] == tile


@pytest.mark.parametrize("c,k,hw", [(64, 64, 12), (16, 16, 56), (32, 32, 6)])
def test_winograd_leaves_small_maps_and_thin_convs_to_conv2d(c, k, hw):
    """Few tiles (the transformed weights cost more than the multiplications
    saved) or few channels (the transforms cost more than the GEMM): direct."""
    model = _model([helper.make_node("Conv", ["x", "w"], ["out"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
                   [("x", [1, c, hw, hw])], ["out"], {"w": weight(k, c, 3, 3)})
    art = check_numerics(model)
    assert art.kernels[0]["schedule"] == "conv2d"


def test_winograd_transforms_compute_a_correlation():
    """A^T [(G g G^T) . (B^T d B)] A is the m x m correlation of an (m+2) x (m+2) patch with a 3x3 kernel."""
    from braze.codegen.schedules.winograd import MATRICES, transform_weights

    for m, (bt, _, at) in MATRICES.items():
        d, g = RNG.standard_normal((m + 2, m + 2)), RNG.standard_normal((3, 3))
        u = transform_weights(g.reshape(1, 1, 3, 3), m).reshape(m + 2, m + 2)
        got = at @ (u * (bt @ d @ bt.T)) @ at.T
        direct = np.array([[np.sum(d[i:i + 3, j:j + 3] * g) for j in range(m)] for i in range(m)])
        np.testing.assert_allclose(got, direct, rtol=1e-12, atol=1e-12)


def test_pinning_conv2d_over_winograd():
    model = _model([helper.make_node("Conv", ["x", "w"], ["out"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
                   [("x", [1, 32, 28, 28])], ["out"], {"w": weight(32, 32, 3, 3)})
    default = check_numerics(model)
    name = default.kernels[0]["name"]
    assert default.kernels[0]["schedule"] == "winograd"
    # the register tile comes from the host's machine model: whole vectors of
    # output channels, accumulators that fit the registers
    from braze.codegen.schedules.machine import accumulators, lanes

    params = default.kernels[0]["schedule_params"]["nn.conv#0"]
    v, nv = lanes(build_target()), params["tile_k"] // lanes(build_target())
    assert params["tile_k"] % v == 0 and params["tile_t"] * nv <= accumulators(build_target(), nv)
    assert default.kernels[0]["packed"] == [f"winograd-f4x3-{params['tile_k']}"]
    direct = check_numerics(model, schedules={name: {"rule": "conv2d"}})
    assert direct.kernels[0]["schedule"] == "conv2d"
    narrow = check_numerics(model, schedules={name: {"rule": "winograd", "params": {"tile_k": 16, "tile_t": 1}}})
    assert narrow.kernels[0]["schedule_params"] != default.kernels[0]["schedule_params"]


@pytest.mark.parametrize("c,k,group,hw,kernel,rule", [
    (64, 64, 2, 13, 3, "conv2d"),      # AlexNet-like: 32 output channels a group, blocks of 32
    (24, 48, 4, 10, 3, "conv2d"),      # 12 a group: quarter-vector blocks of 4
    (68, 68, 4, 9, 3, "depthwise"),    # 17 a group, no block fits: one channel a task
    (68, 68, 4, 9, 1, "pointwise"),    # ShuffleNet-like 1x1, 17 a group: a GEMM whose rows read their group
    (32, 48, 4, 8, 1, "pointwise"),    # grouped 1x1 on 64 pixels: rows of a tile straddle groups
    (32, 64, 4, 7, 1, "pointwise"),    # grouped 1x1 on 49 pixels: padded rows and pixels
])
def test_grouped_conv_edges(c, k, group, hw, kernel, rule):
    model = _model([helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[kernel, kernel],
                                     pads=[kernel // 2] * 4, group=group),
                    helper.make_node("Relu", ["y"], ["out"])],
                   [("x", [1, c, hw, hw])], ["out"], {"w": weight(k, c // group, kernel, kernel), "b": weight(k)})
    art = check_numerics(model)
    assert art.kernels[0]["schedule"] == rule


@pytest.mark.parametrize("op", ["Conv", "MatMul"])
def test_splat_weights_are_packed_like_any_weight(op):
    """A weight made by ConstantOfShape (the onnx wheel's light models) is
    one value: it stays a dense argument of its anchor, which the rule
    packs, rather than a number compiled into a generic loop nest."""
    shape = [32, 32, 3, 3] if op == "Conv" else [48, 32]
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["w"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.01]))]
    if op == "Conv":
        nodes.append(helper.make_node("Conv", ["x", "w"], ["out"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
        inputs = [("x", [1, 32, 28, 28])]
    else:
        nodes.append(helper.make_node("MatMul", ["x", "w"], ["out"]))
        inputs = [("x", [8, 48])]
    art = check_numerics(_model(nodes, inputs, ["out"], {"shape": np.array(shape, dtype=np.int64)}))
    assert art.kernels[0]["schedule"] == ("winograd" if op == "Conv" else "gemm")
    assert art.kernels[0]["packed"]


def _depthwise(c, hw, stride):
    return _model([helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], strides=[stride, stride],
                                    pads=[1, 1, 1, 1], group=c),
                   helper.make_node("Clip", ["y", "lo", "hi"], ["out"])],
                  [("x", [1, c, hw, hw])], ["out"], {"w": weight(c, 1, 3, 3), "lo": np.float32(0),
                                                   "hi": np.float32(6)})


# stride 2 on even widths: rows split into phases by the deinterleave intrinsic, in one run (12) or in runs of 10 (40);
# rows of 32 outputs: vector ops one register wide (test below)
@pytest.mark.parametrize("c,hw,stride", [(8, 12, 1), (6, 11, 2), (4, 70, 1), (8, 12, 2), (4, 40, 2), (8, 32, 1),
                                         (4, 64, 2)])
def test_depthwise_edges(c, hw, stride):
    art = check_numerics(_depthwise(c, hw, stride))
    assert art.kernels[0]["schedule"] == "depthwise"


@pytest.mark.parametrize("hw,shuffles", [(40, True), (11, False), (28, True), (14, False)])
def test_depthwise_stride_two_rows_are_shuffled(hw, shuffles):
    """A stride-2 depthwise conv splits its input rows into phases with
    vector loads and shuffles (no per-lane gather), where the width is even
    and each phase an even number of columns (14 wide: two phases of 7,
    which LLVM shuffles lane by lane, 7-9x slower than the gather)."""
    from braze.tools.experiment import find_kernel
    from braze.tools.isolate import build_alone
    from braze.codegen.kernel import partition
    from braze.tools.listing import fused

    kernel = find_kernel(partition(fused(_depthwise(4, hw, 2)).main), "k0")
    func, fallback = build_alone(kernel, build_target(), {})
    assert not fallback
    assert ("T.Shuffle" in func.script()) == shuffles


@pytest.mark.parametrize("c,hw,kernel,pads,mult", [(6, 14, 3, [1, 1, 1, 1], 1), (4, 7, 3, [1, 1, 1, 1], 1),
                                                  (3, 11, 5, [2, 1, 0, 2], 1), (4, 14, 3, [1, 1, 1, 1], 2)])
def test_depthwise_rows_short_of_whole_vectors_run_flat(c, hw, kernel, pads, mult):
    """Stride 1, output rows not a whole number of vectors: the plane is
    computed flat over the padded width (the columns past each row's end
    computed and dropped), with a bias and an epilogue; asymmetric pads and
    a 5x5 kernel; a channel multiplier of 2 keeps the row-by-row form."""
    model = _model([helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[kernel, kernel],
                                     pads=pads, group=c),
                    helper.make_node("Clip", ["y", "lo", "hi"], ["out"])],
                   [("x", [1, c, hw, hw])], ["out"],
                   {"w": weight(c * mult, 1, kernel, kernel), "b": weight(c * mult), "lo": np.float32(0),
                    "hi": np.float32(6)})
    art = check_numerics(model)
    params = art.kernels[0]["schedule_params"]["nn.conv#0"]
    assert art.kernels[0]["schedule"] == "depthwise"
    assert params.get("form") == (2 if mult == 1 else None), params


@pytest.mark.parametrize("hw,stride", [(32, 1), (64, 2)])
def test_depthwise_rows_are_vectorized_one_register_at_a_time(hw, stride):
    """A row segment of several vectors is unrolled over vector-wide ops: a
    segment-wide vector would broadcast each tap's weight to several
    registers, which LLVM hoists out of the row loop and spills."""
    from braze.codegen.kernel import partition
    from braze.codegen.schedules.machine import lanes
    from braze.tools.experiment import find_kernel
    from braze.tools.isolate import build_alone
    from braze.tools.listing import fused

    target = build_target()
    kernel = find_kernel(partition(fused(_depthwise(4, hw, stride)).main), "k0")
    func, fallback = build_alone(kernel, target, {})
    script = func.script()
    assert not fallback and f"T.vectorized({lanes(target)})" in script
    assert "T.vectorized(32)" not in script or lanes(target) == 32


def _lowered(model, kernel_name="k0", pins=None) -> str:
    """The kernel's TIR as TVM hands it to LLVM (after its vectorize pass):
    a loop TVM could not vectorize is left with a ``_s`` (scalarized) var."""
    import tvm

    from braze.codegen.kernel import partition
    from braze.codegen.tvm_target import tvm_target
    from braze.tools.experiment import find_kernel
    from braze.tools.isolate import build_alone
    from braze.tools.listing import fused

    target = build_target()
    kernel = find_kernel(partition(fused(model).main), kernel_name)
    func, fallback = build_alone(kernel, target, pins or {})
    assert not fallback, fallback
    seen = []

    @tvm.instrument.pass_instrument
    class AfterVectorize:
        def run_after_pass(self, mod, info):
            if info.name.endswith("RemoveNoOp") and not seen:
                seen.append(mod.script())

    with tvm.transform.PassContext(opt_level=3, instruments=[AfterVectorize()]):
        tvm.compile(tvm.IRModule({kernel.name: func}), target=tvm_target(target))
    return seen[0]


@pytest.mark.parametrize("c,k,stride", [(16, 32, 2), (8, 32, 1)])
def test_conv_rows_are_padded_in_vectors(c, k, stride):
    """conv2d with rows outside (order 2) pads each task's input rows as a
    fill and a copy, each vectorized: one guarded copy
    (``if_then_else(inside, x[...], 0)``) would leave TVM's vectorizer a
    scalar loop (a ``_s`` loop var). Rows enough for 4 tasks a core."""
    import re

    hw = stride * 4 * max(2, build_target().num_cores or 1)

    model = _model([helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], strides=[stride, stride],
                                     pads=[1, 1, 1, 1]), helper.make_node("Relu", ["y"], ["out"])],
                   [("x", [1, c, hw, hw])], ["out"], {"w": weight(k, c, 3, 3)})
    art = check_numerics(model, schedules={"k0": {"rule": "conv2d", "params": {"order": 2}}})
    assert art.kernels[0]["schedule"] == "conv2d"
    script = _lowered(model, pins={"rule": "conv2d", "params": {"order": 2}})
    assert "conv_pad" in script and "T.Broadcast(T.float32(0.0)" in script  # the fill, in vectors
    assert not re.search(r"for [\w, ]*_s\b", script), script


@pytest.mark.parametrize("axis", [1, 2, -1])
def test_softmax_and_reductions_along_each_axis(axis):
    model = _model([helper.make_node("Softmax", ["x"], ["s"], axis=axis),
                    helper.make_node("ReduceMean", ["x"], ["m"], axes=[axis], keepdims=1),
                    helper.make_node("ReduceMax", ["x"], ["mx"], axes=[axis], keepdims=0)],
                   [("x", [2, 16, 5, 48])], ["s", "m", "mx"], {})
    check_numerics(model, level=0)


def test_elementwise_fast_math_matches():
    """sigmoid/tanh/erf/GELU in their fast forms, over a wide range."""
    model = _model([helper.make_node("Sigmoid", ["x"], ["a"]), helper.make_node("Tanh", ["x"], ["t"]),
                    helper.make_node("Erf", ["x"], ["e"]), helper.make_node("Mul", ["a", "t"], ["p"]),
                    helper.make_node("Add", ["p", "e"], ["out"])],
                   [("x", [3, 67])], ["out"], {})
    art = braze_compile(model, target=TARGET, level=2)
    if not runs_here():
        return
    x = np.concatenate([np.linspace(-40, 40, 197, dtype=np.float32), [np.nan, np.inf, -np.inf, 0.0]]).astype(np.float32).reshape(3, 67)
    got = art.run({"x": x})["out"]
    expected = run_ort(model, {"x": x})["out"]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_pinning_a_rule_and_its_parameters():
    model = _model([helper.make_node("MatMul", ["x", "w"], ["out"])], [("x", [16, 32])], ["out"], {"w": weight(32, 64)})
    default = check_numerics(model)
    name = default.kernels[0]["name"]
    pinned = check_numerics(model, schedules={name: {"rule": "gemm", "params": {"tile_m": 4, "tile_n": 16}}})
    assert pinned.kernels[0]["schedule_params"] != default.kernels[0]["schedule_params"]
    generic = check_numerics(model, schedules={name: {"rule": "generic"}})
    assert generic.kernels[0]["schedule"] == "generic"


@pytest.mark.parametrize("mcpu,bits", [("haswell", 256), ("x86-64", 128)])
def test_rules_follow_the_vector_width_of_the_target(mcpu, bits):
    """An AVX2 host and an SSE-only (NEON-width) host get their own tiles, and correct code."""
    import dataclasses

    from braze.targets import get_target

    target = dataclasses.replace(get_target("cpu"), mcpu=mcpu, mattr=(), vector_bits=bits)
    model = _model([helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                    helper.make_node("Relu", ["y"], ["z"]),
                    helper.make_node("Reshape", ["z", "shape"], ["r"]),
                    helper.make_node("MatMul", ["r", "m"], ["out"])],
                   [("x", [1, 4, 6, 6])], ["out"],
                   {"w": weight(16, 4, 3, 3), "b": weight(16), "shape": np.array([16, 36], dtype=np.int64),
                    "m": weight(36, 24)})
    feeds = {"x": RNG.standard_normal((1, 4, 6, 6)).astype(np.float32)}
    art = braze_compile(model, level=2, target=target)
    lanes = bits // 32
    params = [k["schedule_params"] for k in art.kernels if k["schedule"] == "gemm"]
    assert params and all(p["tile_n"] % lanes == 0 for pin in params for p in pin.values())
    np.testing.assert_allclose(art.run(feeds)["out"], run_ort(model, feeds)["out"], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mcpu,bits", [("haswell", 256), ("x86-64", 128)])
def test_winograd_follows_the_vector_width_of_the_target(mcpu, bits):
    import dataclasses

    from braze.targets import get_target

    target = dataclasses.replace(get_target("cpu"), mcpu=mcpu, mattr=(), vector_bits=bits)
    model = _model([helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                    helper.make_node("Relu", ["y"], ["out"])], [("x", [1, 32, 28, 28])], ["out"],
                   {"w": weight(40, 32, 3, 3)})
    feeds = {"x": RNG.standard_normal((1, 32, 28, 28)).astype(np.float32)}
    art = braze_compile(model, level=2, target=target)
    (params,) = art.kernels[0]["schedule_params"].values()
    assert art.kernels[0]["schedule"] == "winograd" and params["tile_k"] % (bits // 32) == 0
    np.testing.assert_allclose(art.run(feeds)["out"], run_ort(model, feeds)["out"], rtol=1e-4, atol=1e-4)


def test_softmax_edge_rows_match_onnxruntime():
    """A row with NaN, a row of -inf, a row with +inf, huge negatives."""
    model = _model([helper.make_node("Softmax", ["x"], ["out"], axis=-1)], [("x", [5, 32])], ["out"], {})
    x = RNG.standard_normal((5, 32)).astype(np.float32)
    x[0, 3] = np.nan
    x[1, :] = -np.inf
    x[2, 7] = np.inf
    x[3, :16] = -1e30
    art = braze_compile(model, target=TARGET, level=0)
    if not runs_here():
        return
    np.testing.assert_allclose(art.run({"x": x})["out"], run_ort(model, {"x": x})["out"], rtol=1e-5, atol=1e-6)


def test_rules_are_tried_in_their_explicit_order():
    """PRIORITY, not the import order, decides which rule takes an op; it
    names every rule, and the rules' modules register nothing else."""
    from braze.codegen.schedules import RULES
    from braze.codegen.schedules.rule import PRIORITY

    assert tuple(RULES) == tuple(name for name, _ in PRIORITY)


# --- AMX: bfloat16 matmuls on tiles -------------------------------------------------------------------
def _amx_target():
    """An AVX-512 target with AMX (a Sapphire Rapids-class Xeon): built on any x86 host."""
    import dataclasses

    from braze.targets import get_target

    return dataclasses.replace(get_target("cpu-avx512"), mattr=("+avx512bf16", "+amx-tile", "+amx-bf16"))


def _amx_runs_here() -> bool:
    from braze.targets.isa import missing, requirements

    return missing(requirements(_amx_target())) is None


@pytest.mark.parametrize("a_shape,k,n", [((64, 96), 96, 64), ((1, 40, 64), 64, 96), ((3, 32), 32, 32),
                                         ((1, 2, 32, 32), 32, 32)])
def test_bf16_matmul_by_a_weight_multiplies_on_amx_tiles(a_shape, k, n):
    """A bfloat16 matmul by a constant weight takes the amx rule on a target
    with AMX: the weight packed in pair-interleaved panels, 32 x 32 blocks
    (rows padded: 40 -> 64), the bias and ReLU on the block; numerics against
    float32 onnxruntime within the bfloat16 tolerance wherever this CPU has
    AMX. Too few rows (3) leave it to gemm."""
    from braze.passes.precision import TOLERANCES

    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", ["y", "b"], ["z"]),
                    helper.make_node("Relu", ["z"], ["out"])],
                   [("x", list(a_shape))], ["out"], {"w": weight(k, n), "b": RNG.standard_normal(n).astype(np.float32)})
    art = braze_compile(model, target=_amx_target(), precision_mode="allow_mix_precision_bf16")
    [kernel] = [kr for kr in art.kernels if "MatMul" in kr["name"]]
    if a_shape[-2] < 8:
        assert kernel["schedule"] == "gemm"
        return
    assert kernel["schedule"] == "amx" and kernel["packed"] == ["amx-bf16-pairs"]
    if not _amx_runs_here():
        return
    x = RNG.standard_normal(a_shape).astype(np.float32)
    got, want = art.run({"x": x})["out"], run_ort(model, {"x": x})["out"]
    assert np.abs(got - want).max() <= TOLERANCES["bf16"] * np.abs(want).max()


def test_amx_only_where_the_target_has_it_and_the_shapes_fit():
    """No AMX in the target (AVX-512 alone), a float32 build, or a reduction
    that is not a whole number of tiles (k % 32): the gemm rule."""
    cases = [("cpu-avx512", 64, "allow_mix_precision_bf16"), (_amx_target(), 64, None),
             (_amx_target(), 48, "allow_mix_precision_bf16")]
    for target, k, mode in cases:
        model = _model([helper.make_node("MatMul", ["x", "w"], ["out"])], [("x", [32, k])], ["out"], {"w": weight(k, 64)})
        art = braze_compile(model, target=target, precision_mode=mode)
        assert [kr["schedule"] for kr in art.kernels if "MatMul" in kr["name"]] == ["gemm"], (target, k, mode)


# --- AVX512-BF16: bfloat16 matmuls with dot products --------------------------------------------------
def _dpbf16_target():
    """An AVX-512 target with AVX512-BF16 and no AMX (AMD Zen 4, Intel Cooper Lake): built on any x86 host."""
    import dataclasses

    from braze.targets import get_target

    return dataclasses.replace(get_target("cpu-avx512"), mattr=("+avx512bf16",))


def _kernel_asm(artifact) -> str:
    return "".join(m.inspect_source("asm") for m in artifact._executable.mod.imports if m.kind == "llvm")


def _bf16(v: np.ndarray) -> np.ndarray:
    """float32 rounded to the nearest bfloat16 (ties to even), as float32."""
    u = v.astype(np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("a_shape,k,n,block", [((64, 96), 96, 96, (8, 3)), ((1, 37, 64), 64, 32, (8, 2)),
                                               ((5, 34), 34, 16, (5, 1)), ((1, 3, 8, 32), 32, 48, (8, 3))])
def test_bf16_matmul_by_a_weight_multiplies_with_dot_products(a_shape, k, n, block):
    """A bfloat16 matmul by a constant weight takes the dpbf16 rule on a
    target with AVX512-BF16 and no AMX: the weight in the pair-interleaved
    panels, register blocks from the machine model (8 rows x 3 panel
    vectors with 32 registers, fewer vectors where they do not divide the
    columns, the rows where there are fewer; 37 rows padded to 40; two
    batch dims, as ConvNeXt's channels-last ``[1, H, W, C]``), and the
    loop made of VDPBF16PS. Where this CPU has AVX512-BF16, the result is
    the float32 product of the bfloat16-rounded operands (to float32
    accumulation error), and with a bias and ReLU on the block it matches
    float32 onnxruntime within the bfloat16 tolerance."""
    from braze.passes.precision import TOLERANCES
    from braze.targets.isa import missing, requirements

    w, b = weight(k, n), RNG.standard_normal(n).astype(np.float32)
    bare = _model([helper.make_node("MatMul", ["x", "w"], ["out"])], [("x", list(a_shape))], ["out"], {"w": w})
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", ["y", "b"], ["z"]),
                    helper.make_node("Relu", ["z"], ["out"])], [("x", list(a_shape))], ["out"], {"w": w, "b": b})
    arts = [braze_compile(m, target=_dpbf16_target(), precision_mode="allow_mix_precision_bf16") for m in (bare, model)]
    for art in arts:
        [kernel] = [kr for kr in art.kernels if "MatMul" in kr["name"]]
        assert kernel["schedule"] == "dpbf16" and kernel["packed"] == ["amx-bf16-pairs"], kernel
        [params] = kernel["schedule_params"].values()
        assert (params["rows"], params["vectors"]) == block
        assert "vdpbf16ps" in _kernel_asm(art) and "VDPBF16PS" in art.manifest["precision"]["math"]
    if missing(requirements(_dpbf16_target())) is not None:
        return
    x = RNG.standard_normal(a_shape).astype(np.float32)
    exact = _bf16(x).astype(np.float64) @ _bf16(w).astype(np.float64)
    np.testing.assert_allclose(arts[0].run({"x": x})["out"], exact, rtol=0, atol=1e-6 * k * np.abs(exact).max())
    got, want = arts[1].run({"x": x})["out"], run_ort(model, {"x": x})["out"]
    assert np.abs(got - want).max() <= TOLERANCES["bf16"] * np.abs(want).max()


def test_dpbf16_only_where_the_target_has_it_and_the_shapes_fit():
    """AVX-512 without AVX512-BF16, a float32 build, an odd reduction, columns
    not a whole number of vectors, or a single row: the gemm rule; with AMX
    as well, the amx rule."""
    cases = [("cpu-avx512", 64, 64, 32, "allow_mix_precision_bf16", "gemm"),
             (_dpbf16_target(), 64, 64, 32, None, "gemm"),
             (_dpbf16_target(), 63, 64, 32, "allow_mix_precision_bf16", "gemm"),
             (_dpbf16_target(), 64, 40, 32, "allow_mix_precision_bf16", "gemm"),
             (_dpbf16_target(), 64, 64, 1, "allow_mix_precision_bf16", "gemm"),
             (_amx_target(), 64, 64, 32, "allow_mix_precision_bf16", "amx")]
    for target, k, n, m, mode, rule in cases:
        model = _model([helper.make_node("MatMul", ["x", "w"], ["out"])], [("x", [m, k])], ["out"], {"w": weight(k, n)})
        art = braze_compile(model, target=target, precision_mode=mode)
        assert [kr["schedule"] for kr in art.kernels if "MatMul" in kr["name"]] == [rule], (target, k, n, m, mode)


@pytest.mark.parametrize("c,k,hw,kernel,stride,group", [(32, 48, 14, 3, 1, 1), (64, 32, 15, 3, 2, 1),
                                                        (24, 64, 10, 1, 1, 1), (64, 64, 9, 3, 1, 2)])
def test_bf16_blocked_conv_multiplies_with_dot_products(c, k, hw, kernel, stride, group):
    """A bfloat16 conv in the blocked layout takes dpbf16 on a target with
    AVX512-BF16: the weight packed with the input channels in pairs under
    each vector of output channels (8 channels: a half block; 24 padded to
    32), the blocked rule's register tile, VDPBF16PS in the loop. Where
    the CPU has it, the result matches the same build with the blocked rule
    (float32 arithmetic on the same bfloat16 values) to bfloat16 roundings,
    and float32 onnxruntime within the bfloat16 tolerance. A grouped conv
    (2 groups of 2 blocks) too."""
    from braze.passes.precision import TOLERANCES
    from braze.targets.isa import missing, requirements

    pads = [kernel // 2] * 4
    model = _model([helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1] * 4),
                    helper.make_node("Relu", ["c0"], ["r0"]),
                    helper.make_node("Conv", ["r0", "w", "b"], ["c1"], pads=pads, strides=[stride] * 2, group=group),
                    helper.make_node("Relu", ["c1"], ["out"])],
                   [("x", [1, 8, hw, hw])], ["out"], {"w0": weight(c, 8, 3, 3), "w": weight(k, c // group, kernel, kernel),
                                                      "b": RNG.standard_normal(k).astype(np.float32)})
    art = braze_compile(model, target=_dpbf16_target(), precision_mode="allow_mix_precision_bf16")
    convs = [kr for kr in art.kernels if "nn.conv_blocked" in kr["ops"]]
    assert len(convs) == 2 and all(kr["schedule"] == "dpbf16" for kr in convs), convs
    # the first conv's 8 input channels are one half block (pairs: 4 a block), the second's whole ones
    assert [kr["packed"] for kr in convs] == [["conv-dpbf16-8x16"], ["conv-dpbf16-16x16"]]
    assert "vdpbf16ps" in _kernel_asm(art)
    if missing(requirements(_dpbf16_target())) is not None:
        return
    pinned = braze_compile(model, target=_dpbf16_target(), precision_mode="allow_mix_precision_bf16",
                           schedules={kr["name"]: {"rule": "blocked"} for kr in convs})
    assert {kr["schedule"] for kr in pinned.kernels if "nn.conv_blocked" in kr["ops"]} == {"blocked"}
    x = RNG.standard_normal((1, 8, hw, hw)).astype(np.float32)
    got, same = art.run({"x": x})["out"], pinned.run({"x": x})["out"]
    # (the first conv's bfloat16 outputs may differ by an ulp between the two, the second sums them)
    np.testing.assert_allclose(got, same, rtol=2 ** -7, atol=2 ** -7 * np.abs(same).max())
    want = run_ort(model, {"x": x})["out"]
    assert np.abs(got - want).max() <= TOLERANCES["bf16"] * np.abs(want).max()



# --- 16-bit convs with float32 arithmetic -------------------------------------------------------------
def _conv_pads(model, mode, pin) -> dict[str, str]:
    """Each conv kernel's ``conv_pad`` buffer declaration (TIR), with ``pin``."""
    from braze.codegen.kernel import partition
    from braze.pipeline import precision_options
    from braze.tools.isolate import build_alone
    from braze.tools.listing import fused

    pads = {}
    for kernel in partition(fused(model, precision=precision_options(mode), target=TARGET).main):
        if "nn.conv_blocked" in kernel.op_types:
            func, fallback = build_alone(kernel, build_target(), pin)
            assert not fallback, fallback
            pads[kernel.name] = "".join(ln for ln in func.script().splitlines() if "conv_pad = T.sblock_alloc" in ln)
    return pads


@pytest.mark.parametrize("mode,low", [("allow_mix_precision", "f16"), ("allow_mix_precision_bf16", "bf16")])
def test_16bit_dense_convs_broadcast_a_float32_copy_of_their_input(mode, low):
    """A 16-bit dense conv of the blocked rule (3x3 padded, 1x1 unpadded,
    strided) reads its input from a float32 copy made in the padding's pass
    (``conv_pad``): its micro-kernel broadcasts float32 values instead of
    converting each one. A depthwise conv (vector loads, its padding read
    in place) makes none. The result is the one of the same 16-bit values
    read in place (``pad=2``) to a rounding, and float32 onnxruntime's
    within the mode's tolerance. (The convs are pinned to ``blocked``: with
    AVX512-BF16, bfloat16 ones take ``dpbf16``, which reads 16-bit pairs.)"""
    from braze.passes.precision import TOLERANCES

    c = 32
    # (the depthwise conv before the 1x1 one: after it, they would be one conv_depthwise kernel)
    model = _model([helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1] * 4),
                    helper.make_node("Relu", ["c0"], ["r0"]),
                    helper.make_node("Conv", ["r0", "w2"], ["c2"], pads=[1] * 4, group=c),
                    helper.make_node("Relu", ["c2"], ["r2"]),
                    helper.make_node("Conv", ["r2", "w1"], ["c1"]),
                    helper.make_node("Relu", ["c1"], ["r1"]),
                    helper.make_node("Conv", ["r1", "w3"], ["out"], pads=[1] * 4, strides=[2, 2])],
                   [("x", [1, 8, 12, 12])], ["out"],
                   {"w0": weight(c, 8, 3, 3), "w1": weight(c, c, 1, 1), "w2": weight(c, 1, 3, 3), "w3": weight(c, c, 3, 3)})
    pads = _conv_pads(model, mode, {"rule": "blocked"})
    assert len(pads) == 4, pads
    # (TVMScript names no dtype for float32; "bfloat16" contains "float16")
    assert [bool(p) and "float16" not in p for p in pads.values()] == [True, False, True, True], pads
    assert all(p == "" or "float16" in p for p in _conv_pads(model, mode, {"rule": "blocked",
                                                                          "params": {"pad": 2}}).values())
    if not runs_here():
        return
    art = braze_compile(model, target=TARGET, precision_mode=mode, schedules={n: {"rule": "blocked"} for n in pads})
    assert {kr["schedule"] for kr in art.kernels if "nn.conv_blocked" in kr["ops"]} == {"blocked"}
    in_place = braze_compile(model, target=TARGET, precision_mode=mode,
                             schedules={n: {"rule": "blocked", "params": {"pad": 2}} for n in pads})
    x = RNG.standard_normal((1, 8, 12, 12)).astype(np.float32)
    got = art.run({"x": x})["out"]
    eps = 2.0 ** (-10 if low == "f16" else -7)
    np.testing.assert_allclose(got, in_place.run({"x": x})["out"], rtol=eps, atol=eps * np.abs(got).max())
    want = run_ort(model, {"x": x})["out"]
    assert np.abs(got - want).max() <= TOLERANCES[low] * np.abs(want).max()


@pytest.mark.parametrize("hw,tile", [(56, 4), (28, 2)])
def test_16bit_winograd_takes_4x4_tiles_on_large_maps_only(hw, tile):
    """A 16-bit 3x3 conv takes Winograd F(4x4, 3x3) from 56x56 outputs up,
    its transformed weights stored in float32 (a 16-bit U's rounding,
    amplified by the output transform, doubled resnet50's float16 error);
    on smaller maps F(2x2, 3x3) with 16-bit ones (the bytes added would
    outweigh the multiplications saved). Both within float16's tolerance of
    float32 onnxruntime."""
    from braze.passes.precision import TOLERANCES

    model = _model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1] * 4),
                    helper.make_node("Relu", ["c"], ["out"])],
                   [("x", [1, 32, hw, hw])], ["out"], {"w": weight(32, 32, 3, 3)})
    art = braze_compile(model, target=TARGET, precision_mode="allow_mix_precision")
    (kernel,) = [kr for kr in art.kernels if kr["schedule"] == "winograd"]
    (params,) = kernel["schedule_params"].values()
    assert params["tile"] == tile and kernel["packed"][0].startswith(f"winograd-f{tile}x3-")
    from braze.codegen.kernel import partition
    from braze.pipeline import precision_options
    from braze.tools.isolate import build_alone
    from braze.tools.listing import fused

    (conv,) = partition(fused(model, precision=precision_options("allow_mix_precision"), target=TARGET).main)
    build_alone(conv, build_target(), {})
    (packing,) = conv.packings.values()
    assert packing.dtype == {4: "f32", 2: None}[tile]  # None: the conv's own dtype, float16
    if runs_here():
        x = RNG.standard_normal((1, 32, hw, hw)).astype(np.float32)
        want = run_ort(model, {"x": x})["out"]
        assert np.abs(art.run({"x": x})["out"] - want).max() <= TOLERANCES["f16"] * np.abs(want).max()


@pytest.mark.parametrize("mode,low", [("allow_mix_precision", "f16"), ("allow_mix_precision_bf16", "bf16")])
def test_16bit_gemm_widens_a_transposed_a_and_bfloat16_weight_panels(mode, low):
    """The gemm rule's 16-bit kernels: A, broadcast one element at a time,
    is widened to float32 in a stage of its own even when the kernel
    computes it (attention heads transposed back: ``wide_operand``, where
    it had been converted at every broadcast); a constant bfloat16 B is
    widened one packed panel at a time inside each task (a ``widen`` block
    under the parallel loop), a float16 one converted as it is loaded.
    Within the mode's tolerance of float32 onnxruntime. (Pinned to
    ``gemm``: with AVX512-BF16 or AMX, bfloat16 matmuls by a weight take
    ``dpbf16``/``amx``.)"""
    from braze.passes.precision import TOLERANCES

    # enough column panels (of up to 48 columns) for two tasks a core
    heads, seq, dim, n = 4, 32, 16, 48 * 2 * max(1, build_target().num_cores or 1)
    model = _model([helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1, 3]),
                    helper.make_node("Reshape", ["t", "shape"], ["a"]),
                    helper.make_node("MatMul", ["a", "w"], ["out"])],
                   [("x", [1, heads, seq, dim])], ["out"],
                   {"w": weight(heads * dim, n), "shape": np.array([seq, heads * dim], dtype=np.int64)})
    from braze.codegen.kernel import partition
    from braze.pipeline import precision_options
    from braze.tools.isolate import build_alone
    from braze.tools.listing import fused

    (kernel,) = [k for k in partition(fused(model, precision=precision_options(mode), target=TARGET).main)
                 if "nn.matmul" in k.op_types]
    func, fallback = build_alone(kernel, build_target(), {"rule": "gemm"})
    assert not fallback, fallback
    lines = func.script().splitlines()
    assert any('T.sblock("wide_operand' in ln for ln in lines)
    depth = {name: next((len(ln) - len(ln.lstrip()) for ln in lines if marker in ln), None)
             for name, marker in (("parallel", "T.parallel("), ("widen", 'T.sblock("widen'))}
    if low == "bf16":  # the panel's widening runs inside the parallel loop, once per task
        assert depth["widen"] is not None and depth["widen"] > depth["parallel"], depth
    else:
        assert depth["widen"] is None, depth
    if not runs_here():
        return
    art = braze_compile(model, target=TARGET, precision_mode=mode, schedules={kernel.name: {"rule": "gemm"}})
    x = RNG.standard_normal((1, heads, seq, dim)).astype(np.float32)
    want = run_ort(model, {"x": x})["out"]
    assert np.abs(art.run({"x": x})["out"] - want).max() <= TOLERANCES[low] * np.abs(want).max()


def _inverted_residual(c, e, hw, kernel, stride, act):
    """stem conv -> 1x1 expansion (c -> e) + ``act`` -> depthwise kernel x
    kernel, stride ``stride`` + ReLU6: the expansion and the depthwise conv
    make one ``conv_depthwise`` kernel in the blocked layout."""
    lo_hi = {"lo": np.float32(0), "hi": np.float32(6)}
    acts = {"relu6": [helper.make_node("Clip", ["p", "lo", "hi"], ["a"])],
            "silu": [helper.make_node("Sigmoid", ["p"], ["s"]), helper.make_node("Mul", ["p", "s"], ["a"])],
            "none": [helper.make_node("Identity", ["p"], ["a"])]}[act]
    return _model([helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1] * 4),
                   helper.make_node("Relu", ["c0"], ["r0"]),
                   helper.make_node("Conv", ["r0", "w1", "b1"], ["p"]),
                   *acts,
                   helper.make_node("Conv", ["a", "w2", "b2"], ["d"], kernel_shape=[kernel] * 2,
                                    strides=[stride] * 2, pads=[kernel // 2] * 4, group=e),
                   helper.make_node("Clip", ["d", "lo", "hi"], ["out"])],
                  [("x", [1, 3, hw, hw])], ["out"],
                  {"w0": weight(c, 3, 3, 3), "w1": weight(e, c, 1, 1), "b1": weight(e), "w2": weight(e, 1, kernel, kernel),
                   "b2": weight(e), **lo_hi})


def _chained(art) -> dict:
    (kernel,) = [kr for kr in art.kernels if kr["name"].endswith("conv_depthwise")]
    return kernel


@pytest.mark.parametrize("c,e,hw,kernel,stride,act", [(16, 48, 24, 3, 2, "relu6"), (8, 40, 14, 3, 1, "silu"),
                                                      (16, 32, 20, 5, 2, "none"), (8, 24, 13, 5, 1, "relu6")])
def test_a_pointwise_conv_is_computed_inside_its_depthwise_conv(c, e, hw, kernel, stride, act):
    """An inverted residual block's 1x1 expansion and depthwise conv are one
    kernel (fusion rule ``conv_depthwise``) in which each task of the
    depthwise conv computes the expansion's rows it reads (``chain``: its
    output rows) into a buffer of its own, allocated inside the parallel
    loop, the expansion's epilogue applied as it is written. Same result as
    the two convs scheduled one after the other (``chain=0``) and as
    onnxruntime, for 3x3 and 5x5 kernels, strides 1 and 2, odd maps, ReLU6,
    SiLU or no activation between them."""
    model = _inverted_residual(c, e, hw, kernel, stride, act)
    art = check_numerics(model)
    found = _chained(art)
    assert found["schedule"] == "blocked" and found["ops"].count("nn.conv_blocked") == 2
    (chain,) = {p["chain"] for p in found["schedule_params"].values()}
    assert chain > 0, found["schedule_params"]
    name = found["name"].split("_")[0]
    unchained = check_numerics(model, schedules={name: {"rule": "blocked", "params": {"chain": 0}}})
    assert {p["chain"] for p in _chained(unchained)["schedule_params"].values()} == {0}
    if runs_here():
        x = RNG.standard_normal((1, 3, hw, hw)).astype(np.float32)
        np.testing.assert_allclose(art.run({"x": x})["out"], unchained.run({"x": x})["out"], rtol=1e-5, atol=1e-5)
    # the task's buffer, inside the parallel loop: at least the rows its output rows read, of one channel
    # block, a vector a pixel (TVM may allocate up to the map's rows where it cannot bound the clamped start)
    import re

    lowered = _lowered(model, name)
    in_rows = min(chain * stride + kernel - stride, hw)
    sizes = [int(n) for n in re.findall(r"T\.alloc_buffer\(\((\d+),\), \"float32x", lowered[lowered.index("T.parallel("):])]
    assert any(in_rows * hw <= n <= hw * hw for n in sizes), (in_rows, sizes)


def test_chained_rows_follow_the_cores_and_the_l2():
    """The rows of a chained task (``chain_rows``): the least estimated time
    (recomputed expansion rows x load imbalance over the cores) among the
    divisors of the output rows whose buffer fits in half of L2."""
    from types import SimpleNamespace

    from braze.codegen.schedules.chain import chain_rows

    def rows(cores, l2, oh, stride, width, blocks):
        return chain_rows(oh, stride, 3, width, blocks, 16, 2.0 * 96 * width * 16, 18.0 * width * 16,
                          SimpleNamespace(num_cores=cores, l2_bytes=l2))

    # MobileNetV2's 112x112 -> 56x56 stride-2 pair, 6 channel blocks: all 56 rows' buffer (113 rows) is past
    # half of a 1 MB L2, 28 (57 rows) fits; with 256 KB, 8 (17 rows of 112 x 16 floats = 119 KB)
    assert rows(2, 1 << 20, 56, 2, 112, 6) == 28
    assert rows(2, 256 << 10, 56, 2, 112, 6) == 8
    # 56x56 stride 1, 9 blocks: 2 cores share 18 tasks of 28 rows evenly; 4 cores take 36 tasks of 14 rows
    # (9 tasks of all 56 rows recompute nothing but leave cores idle)
    assert rows(2, 1 << 20, 56, 1, 56, 9) == 28
    assert rows(4, 1 << 20, 56, 1, 56, 9) == 14
    assert rows(2, 1 << 10, 56, 1, 56, 9) == 0  # no buffer fits: unchained


def test_chain_pins_take_zero_and_refuse_negatives():
    from braze.errors import ScheduleError

    model = _inverted_residual(8, 24, 12, 3, 2, "relu6")
    name = _chained(braze_compile(model, target=TARGET))["name"].split("_")[0]
    braze_compile(model, target=TARGET, schedules={name: {"rule": "blocked", "params": {"chain": 0}}})
    with pytest.raises(ScheduleError, match=r"blocked's chain takes an integer >= 1 \(0: off\), got -1"):
        braze_compile(model, target=TARGET, schedules={name: {"rule": "blocked", "params": {"chain": -1}}})


def test_conv_depthwise_takes_a_pointwise_expansion_only():
    """The fusion rule joins a depthwise conv to the 1x1 conv before it,
    never to the 3x3 stem before that one (whose group keeps its own
    kernel), at level 2 and not at level 1; switched off, two kernels."""
    from braze.compiler import fuse_only

    model = _inverted_residual(8, 24, 12, 3, 2, "relu6")

    def rules(level=2, **fusion):
        _, report = fuse_only(model, level, fusion or None)
        return [g.rule for g in report.groups if g.rule.startswith("conv_")]

    assert rules() == ["conv_epilogue", "conv_depthwise"]
    assert rules(level=1) == ["conv_epilogue", "conv_epilogue", "conv_epilogue"]
    assert rules(switch=("conv_depthwise=off",)) == ["conv_epilogue", "conv_epilogue", "conv_epilogue"]
    # a stem (3x3 dense) straight into a depthwise conv: no chain to make
    stem = _model([helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1] * 4),
                   helper.make_node("Relu", ["c0"], ["r0"]),
                   helper.make_node("Conv", ["r0", "w1"], ["out"], pads=[1] * 4, group=16)],
                  [("x", [1, 3, 12, 12])], ["out"], {"w0": weight(16, 3, 3, 3), "w1": weight(16, 1, 3, 3)})
    _, report = fuse_only(stem, 2)
    assert "conv_depthwise" not in [g.rule for g in report.groups]


@pytest.mark.parametrize("mode,low", [("allow_mix_precision", "f16"), ("allow_mix_precision_bf16", "bf16")])
def test_16bit_pointwise_convs_are_chained_where_blocked_takes_them(mode, low):
    """A 16-bit pair is chained like a float32 one where ``blocked`` takes
    both convs (its expansion reads the float32 copy of its input made in a
    stage before the tasks); where the CPU has AVX512-BF16, ``dpbf16``
    takes a bfloat16 pair and neither is chained. Within the mode's
    tolerance of float32 onnxruntime and, to a rounding, of the unchained
    build."""
    from braze.passes.precision import TOLERANCES
    from braze.targets.isa import requirements

    model = _inverted_residual(16, 48, 16, 3, 2, "relu6")
    art = braze_compile(model, target=TARGET, precision_mode=mode)
    found = _chained(art)
    dot_products = low == "bf16" and "avx512bf16" in requirements(build_target())["features"]
    chains = {p.get("chain", 0) for p in found["schedule_params"].values()}
    assert (chains == {0}) if dot_products else (len(chains) == 1 and chains.pop() > 0), found
    if not runs_here():
        return
    name = found["name"].split("_")[0]
    unchained = braze_compile(model, target=TARGET, precision_mode=mode,
                              schedules={name: {"params": {"chain": 0}}} if not dot_products else None)
    x = RNG.standard_normal((1, 3, 16, 16)).astype(np.float32)
    got, want = art.run({"x": x})["out"], run_ort(model, {"x": x})["out"]
    assert np.abs(got - want).max() <= TOLERANCES[low] * np.abs(want).max()
    eps = 2.0 ** (-10 if low == "f16" else -7)
    np.testing.assert_allclose(got, unchained.run({"x": x})["out"], rtol=2 * eps, atol=2 * eps * np.abs(got).max())


def test_a_chain_that_fails_leaves_the_convs_one_after_the_other(monkeypatch):
    """Where chaining fails on a kernel, its convs are scheduled one after
    the other (``chain=0``), with a ScheduleWarning, not by the generic
    schedule; the result still matches onnxruntime."""
    from braze.codegen.schedules import ScheduleWarning, chain

    def broken(*args, **kwargs):
        raise RuntimeError("no chain today")

    monkeypatch.setattr(chain, "chain_apply", broken)
    with pytest.warns(ScheduleWarning, match="could not chain its convs .*no chain today"):
        art = check_numerics(_inverted_residual(8, 24, 12, 3, 2, "relu6"))
    found = _chained(art)
    assert found["schedule"] == "blocked"
    assert {p["chain"] for p in found["schedule_params"].values()} == {0}
