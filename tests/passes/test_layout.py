"""The layout pass (passes/layout.py): conv chains in the blocked channel
layout (NCHWc), with layout transforms only at their ends.

The IR tests run the pass and braze's reference interpreter against
onnxruntime; the compiled ones build for the host, or for the target that
``BRAZE_TEST_TARGET`` names (docs/testing.md: the block is that target's
float32 lanes), and run where this host can."""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pytest
from onnx import helper

from braze.compiler import compile as braze_compile
from braze.pipeline import layout_block, pipeline
from braze.errors import PassError
from braze.frontend import import_onnx
from braze.ir.interpret import interpret
from braze.passes import PassManager
from braze.passes.layout_blocks import layout_summary, summary_line
from braze.targets import get_target
from onnx_check import float_model as _model
from onnx_check import run_ort

RNG = np.random.default_rng(11)
TARGET = os.environ.get("BRAZE_TEST_TARGET", "cpu")


def _w(*shape):
    return (RNG.standard_normal(shape) * 0.2).astype(np.float32)


def _conv(x, w, y, k=1, stride=1, group=1, bias=None):
    pads = [k // 2] * 4
    return helper.make_node("Conv", [x, w] + ([bias] if bias else []), [y], kernel_shape=[k, k],
                            strides=[stride, stride], pads=pads, group=group)


def _feeds(model):
    return {i.name: RNG.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
            for i in model.graph.input}


def _laid_out(model, block: int = 8):
    """The model imported, canonicalized and through ``layout{block=...}``;
    the interpreter's outputs checked against onnxruntime's."""
    module = import_onnx(model)
    PassManager.parse(f"canonicalize,cse,dce,layout{{block={block}}}").run(module)
    feeds = _feeds(model)
    got = interpret(module, feeds)
    for name, expected in run_ort(model, feeds).items():
        np.testing.assert_allclose(got[name], expected, rtol=1e-4, atol=1e-4, err_msg=name)
    return module


def _ops(module) -> Counter:
    return Counter(op.name for op in module.main.body.ops)


# -- the pass, on the IR -------------------------------------------------------------------------

def _residual_block():
    """conv 3x3 -> relu -> conv 1x1 -> + input -> relu -> per-channel scale -> global mean."""
    return _model([_conv("x", "w1", "a", k=3, bias="b1"), helper.make_node("Relu", ["a"], ["r"]),
                   _conv("r", "w2", "c"), helper.make_node("Add", ["c", "x"], ["y"]),
                   helper.make_node("Relu", ["y"], ["m"]), helper.make_node("Mul", ["m", "s"], ["z"]),
                   helper.make_node("GlobalAveragePool", ["z"], ["out"])],
                  [("x", [1, 16, 6, 6])], ["out"],
                  {"w1": _w(16, 16, 3, 3), "b1": _w(16), "w2": _w(16, 16, 1, 1), "s": _w(1, 16, 1, 1)})


def test_a_conv_chain_runs_blocked_between_one_pair_of_transforms():
    ops = _ops(_laid_out(_residual_block()))
    assert ops["nn.conv_blocked"] == 2 and ops["nn.conv"] == 0
    # in once (the input, read by the first conv and the residual add), out once (the pooled result)
    assert ops["layout.to_blocked"] == 1 and ops["layout.from_blocked"] == 1


def test_per_channel_constants_are_laid_out_at_compile_time():
    module = _laid_out(_residual_block(), block=8)
    (mul,) = [op for op in module.main.body.ops if op.name == "math.mul"]
    scale = [v for v in mul.operands if v.owner.name == "const"][0]
    assert scale.type.shape == (1, 2, 1, 1, 8)  # 16 channels: two blocks of 8, innermost


def _squeeze_excitation():
    """conv -> SiLU -> squeeze-and-excitation (global mean, conv to 2 channels, relu, conv back,
    sigmoid, scale) -> conv: EfficientNet's block."""
    return _model([_conv("x", "w1", "a", k=3), helper.make_node("Sigmoid", ["a"], ["g"]),
                   helper.make_node("Mul", ["a", "g"], ["h"]),
                   helper.make_node("GlobalAveragePool", ["h"], ["p"]), _conv("p", "f1", "q", bias="c1"),
                   helper.make_node("Relu", ["q"], ["r"]), _conv("r", "f2", "t", bias="c2"),
                   helper.make_node("Sigmoid", ["t"], ["s"]), helper.make_node("Mul", ["h", "s"], ["e"]),
                   _conv("e", "w2", "out")],
                  [("x", [1, 16, 6, 6])], ["out"],
                  {"w1": _w(16, 16, 3, 3), "f1": _w(2, 16, 1, 1), "c1": _w(2), "f2": _w(16, 2, 1, 1), "c2": _w(16),
                   "w2": _w(16, 16, 1, 1)})


def test_a_squeeze_and_excitation_scale_stays_blocked():
    module = _laid_out(_squeeze_excitation())
    ops = _ops(module)
    # the 2-channel squeeze conv stays plain (its pooled input converted back: 16 values), the
    # expand conv reads it plain and writes blocks, and the scale multiplies the blocked map
    assert ops["nn.conv_blocked"] == 3 and ops["nn.conv"] == 1
    assert ops["layout.from_blocked"] == 2 and ops["layout.to_blocked"] == 1
    (scale,) = [op for op in module.main.body.ops if op.name == "math.mul" and op.operands[1].type.size == 16]
    assert [v.type.shape for v in scale.operands] == [(1, 2, 6, 6, 8), (1, 2, 1, 1, 8)]


def test_a_blocked_global_mean_is_vectorized_along_the_block():
    """The squeeze's global mean of a blocked map: the spatial loops outside,
    one vector of a block's channels inside, so each step is one contiguous
    load (along the row, each vector was a gather a block apart: EfficientNet's
    means ran at 3-4x onnxruntime's time)."""
    import re

    from braze.codegen.kernel import partition
    from braze.codegen.schedules import schedule_kernel

    target = get_target(TARGET)
    block = layout_block(target)
    model = _model([_conv("x", "w1", "a", k=3), helper.make_node("Relu", ["a"], ["h"]),
                    helper.make_node("GlobalAveragePool", ["h"], ["p"]), _conv("h", "w2", "c"),
                    _conv("p", "w3", "q")],
                   [("x", [1, 2 * block, 12, 12])], ["c", "q"],
                   {"w1": _w(2 * block, 2 * block, 3, 3), "w2": _w(2 * block, 2 * block, 1, 1),
                    "w3": _w(2 * block, 2 * block, 1, 1)})
    module = import_onnx(model)
    pipeline(2, target=target).run(module)
    (mean,) = [k for k in partition(module.main) if k.op_types == ["reduce.mean"]]
    script = schedule_kernel(mean, target).script()
    assert re.search(rf"for r2, r3 in T.grid\(12, 12\):\s+for \w+ in T.vectorized\({block}\):", script), script
    _compiled(model)


def test_a_lone_conv_stays_plain():
    model = _model([_conv("x", "w", "y", k=3), helper.make_node("Relu", ["y"], ["out"])],
                   [("x", [1, 16, 6, 6])], ["out"], {"w": _w(16, 16, 3, 3)})
    ops = _ops(_laid_out(model))
    assert ops["nn.conv"] == 1 and not ops["nn.conv_blocked"] and not ops["layout.to_blocked"]


def test_channels_that_fill_no_block_stay_plain():
    model = _model([_conv("x", "w1", "a", k=3), _conv("a", "w2", "out")],
                   [("x", [1, 5, 6, 6])], ["out"], {"w1": _w(5, 5, 3, 3), "w2": _w(5, 5, 1, 1)})
    # 5 channels: no block of 8 or 4, and padding them to 8 would add more than a third
    assert _ops(_laid_out(model, block=8))["nn.conv"] == 2


def test_a_first_conv_reads_its_few_channels_plain():
    model = _model([_conv("x", "w1", "a", k=3, stride=2), helper.make_node("Relu", ["a"], ["r"]),
                    _conv("r", "w2", "out")],
                   [("x", [1, 3, 8, 8])], ["out"], {"w1": _w(16, 3, 3, 3), "w2": _w(16, 16, 1, 1)})
    module = _laid_out(model)
    first = next(op for op in module.main.body.ops if op.name == "nn.conv_blocked")
    assert first.operands[0].type.rank == 4 and not _ops(module)["layout.to_blocked"]


def _chain(*channels, act="Relu"):
    """1x1 convs from ``channels[0]`` to each next count, each followed by ``act``."""
    nodes, weights, x = [], {}, "x"
    for i, (c, m) in enumerate(zip(channels, channels[1:])):
        nodes += [_conv(x, f"w{i}", f"c{i}"), helper.make_node(act, [f"c{i}"], [f"r{i}"])]
        weights[f"w{i}"], x = _w(m, c, 1, 1), f"r{i}"
    return _model(nodes, [("x", [1, channels[0], 6, 6])], [x], weights)


def _blocks(module):
    return [op.results[0].type.shape[-1] if op.name == "nn.conv_blocked" else None
            for op in module.main.body.ops if op.name in ("nn.conv", "nn.conv_blocked")]


def test_a_last_conv_in_half_blocks_stays_plain():
    """A conv whose channels take half blocks (4 with blocks of 8, where
    padding would double them) runs on half-width vectors blocked; when it
    feeds no other conv (a classifier), it stays plain. In the middle of a
    chain it joins."""
    assert _blocks(_laid_out(_chain(8, 16, 16, 4))) == [8, 8, None]
    assert _blocks(_laid_out(_chain(8, 16, 4, 16))) == [8, 4, 8]


def test_channels_are_padded_to_whole_blocks():
    """12 channels with blocks of 8 take two whole blocks, the second padded
    (a third more channels, where half blocks would halve every vector):
    the conv's weights get zero rows and the next conv's zero columns at
    compile time; the padding leaves through from_blocked{channels=12}."""
    module = _laid_out(_chain(8, 16, 12, 16, 12))
    assert _blocks(module) == [8, 8, 8, 8]
    weights = [op.operands[1].type.shape for op in module.main.body.ops if op.name == "nn.conv_blocked"]
    assert weights == [(16, 8, 1, 1), (16, 16, 1, 1), (16, 16, 1, 1), (16, 16, 1, 1)]
    (back,) = [op for op in module.main.body.ops if op.name == "layout.from_blocked"]
    assert back.attributes["channels"] == 12 and back.result.type.shape == (1, 12, 6, 6)
    # the IR says which convs are padded, and so does explain's summary
    convs = [op for op in module.main.body.ops if op.name == "nn.conv_blocked"]
    assert [op.attributes.get("braze.channels") for op in convs] == [None, 12, None, 12]
    assert layout_summary(module)["padded_convs"] == 2 and "2 with padded channels" in summary_line(
        layout_summary(module))


def _padded_block():
    """MobileNetV3-like, 12 channels (padded with blocks of 8): conv ->
    hard-swish -> depthwise 3x3 -> squeeze-and-excitation (global mean,
    two 1x1 convs, hard-sigmoid: 0.5 in the padding) -> scale -> conv ->
    + input -> per-channel divide -> conv."""
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"]), helper.make_node("HardSwish", ["a"], ["h"]),
             _conv("h", "wd", "d", k=3, group=12, bias="bd"),
             helper.make_node("GlobalAveragePool", ["d"], ["g"]), _conv("g", "ws1", "s1", bias="bs1"),
             helper.make_node("Relu", ["s1"], ["s1r"]), _conv("s1r", "ws2", "s2", bias="bs2"),
             helper.make_node("HardSigmoid", ["s2"], ["s"]), helper.make_node("Mul", ["d", "s"], ["e"]),
             _conv("e", "w1", "f"), helper.make_node("Add", ["f", "x"], ["r"]),
             helper.make_node("Div", ["r", "k"], ["q"]), _conv("q", "w2", "out")]
    return _model(nodes, [("x", [1, 12, 9, 9])], ["out"],
                  {"w0": _w(12, 12, 1, 1), "wd": _w(12, 1, 3, 3), "bd": _w(12), "ws1": _w(8, 12, 1, 1),
                   "bs1": _w(8), "ws2": _w(12, 8, 1, 1), "bs2": _w(12), "w1": _w(12, 12, 1, 1),
                   "k": (1.5 + RNG.random((1, 12, 1, 1))).astype(np.float32), "w2": _w(16, 12, 1, 1)})


def test_padding_runs_through_depthwise_convs_pools_and_squeeze_excitation():
    module = _laid_out(_padded_block())
    ops = _ops(module)
    assert ops["nn.conv_blocked"] == 6 and not ops["nn.conv"]
    assert ops["layout.to_blocked"] == 1 and ops["layout.from_blocked"] == 1
    (dw,) = [op for op in module.main.body.ops if op.name == "nn.conv_blocked" and op.attributes["group"] > 1]
    assert dw.attributes["group"] == 16 and dw.operands[1].type.shape == (16, 1, 3, 3)


def test_an_op_that_makes_the_padding_infinite_stays_plain():
    """1 / x of a conv's zero padding is infinite, which the next conv's zero
    weights would make NaN: the reciprocal reads the channels without the
    padding; after it the padding is zeros again."""
    model = _model([_conv("x", "w1", "a"), helper.make_node("Reciprocal", ["a"], ["r"]),
                    _conv("r", "w2", "out")],
                   [("x", [1, 8, 6, 6])], ["out"], {"w1": _w(12, 8, 1, 1), "w2": _w(8, 12, 1, 1)})
    module = _laid_out(model)
    (rec,) = [op for op in module.main.body.ops if op.name == "math.reciprocal"]
    assert rec.result.type.shape == (1, 12, 6, 6)
    # the same op on whole blocks stays blocked
    model = _model([_conv("x", "w1", "a"), helper.make_node("Reciprocal", ["a"], ["r"]),
                    _conv("r", "w2", "out")],
                   [("x", [1, 8, 6, 6])], ["out"], {"w1": _w(16, 8, 1, 1), "w2": _w(8, 16, 1, 1)})
    (rec,) = [op for op in _laid_out(model).main.body.ops if op.name == "math.reciprocal"]
    assert rec.result.type.rank == 5


def test_padded_channels_are_not_concatenated():
    model = _model([_conv("x", "w1", "a"), _conv("x", "w2", "b"),
                    helper.make_node("Concat", ["a", "b"], ["c"], axis=1), _conv("c", "w3", "out")],
                   [("x", [1, 8, 6, 6])], ["out"],
                   {"w1": _w(12, 8, 1, 1), "w2": _w(12, 8, 1, 1), "w3": _w(8, 24, 1, 1)})
    (cat,) = [op for op in _laid_out(model).main.body.ops if op.name == "tensor.concat"]
    assert cat.result.type.rank == 4


def _c2f_like():
    """YOLO-style: conv+SiLU, split in two, a depthwise conv and a max pool
    on one half, concat, conv+SiLU; a half block (8 channels) on the way."""
    def silu(x, y):
        return [helper.make_node("Sigmoid", [x], [y + "_s"]), helper.make_node("Mul", [x, y + "_s"], [y])]

    nodes = [_conv("x", "w1", "a", k=3, bias="b1"), *silu("a", "sa"),
             helper.make_node("Split", ["sa", "sizes"], ["p", "q"], axis=1),
             _conv("q", "wd", "d", k=3, group=16), *silu("d", "sd"),
             helper.make_node("MaxPool", ["sd"], ["mp"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             _conv("mp", "w8", "e"),
             helper.make_node("Concat", ["p", "mp"], ["cat"], axis=1),
             _conv("cat", "w2", "b"), *silu("b", "out1"),
             helper.make_node("Add", ["e", "e"], ["out2"])]
    return _model(nodes, [("x", [1, 8, 10, 10])], ["out1", "out2"],
                  {"w1": _w(32, 8, 3, 3), "b1": _w(32), "sizes": np.array([16, 16], dtype=np.int64),
                   "wd": _w(16, 1, 3, 3), "w8": _w(8, 16, 1, 1), "w2": _w(32, 32, 1, 1)})


def test_split_concat_pools_and_depthwise_convs_stay_blocked():
    ops = _ops(_laid_out(_c2f_like()))
    assert ops["nn.conv_blocked"] == 4 and not ops["nn.conv"]
    assert ops["tensor.split"] == 1 and ops["tensor.concat"] == 1 and ops["nn.max_pool"] == 1
    # in once; out once per output (the 8-channel conv's output is one block of half the lanes)
    assert ops["layout.to_blocked"] == 1 and ops["layout.from_blocked"] == 2


def _grouped(channels: int, group: int, stride: int = 1):
    """conv 1x1 -> grouped conv 3x3 (RegNet's, ResNeXt's) -> relu -> conv 1x1."""
    return _model([_conv("x", "w1", "a"), _conv("a", "wg", "g", k=3, stride=stride, group=group, bias="bg"),
                   helper.make_node("Relu", ["g"], ["r"]), _conv("r", "w2", "out")],
                  [("x", [1, 16, 10, 10])], ["out"],
                  {"w1": _w(channels, 16, 1, 1), "wg": _w(channels, channels // group, 3, 3), "bg": _w(channels),
                   "w2": _w(16, channels, 1, 1)})


@pytest.mark.parametrize("channels,group,blocked", [(32, 2, True), (32, 4, True), (32, 8, False)])
def test_grouped_convs_of_whole_blocks_stay_blocked(channels, group, blocked):
    # groups of 16 or 8 channels: whole blocks of 8; of 4: no block, the grouped conv stays plain
    module = _laid_out(_grouped(channels, group))
    grouped = [op for op in module.main.body.ops if op.name.startswith("nn.conv") and op.attributes.get("group", 1) > 1]
    assert [op.name for op in grouped] == ["nn.conv_blocked" if blocked else "nn.conv"]


def test_the_pass_runs_on_cpu_targets_at_levels_1_to_3():
    assert "layout" not in str(pipeline(0, target=get_target("cpu-avx2")))
    assert "layout{block=8}" in str(pipeline(2, target=get_target("cpu-avx2")))
    assert "layout{block=8}" in str(pipeline(3, target=get_target("cpu-avx2")))
    assert "layout" not in str(pipeline(2, target=get_target("cpu-avx2"), layout="plain"))
    assert layout_block(get_target("cpu-avx512")) == 16
    assert layout_block(get_target("ascend910b-like")) is None
    with pytest.raises(PassError, match="layout must be one of blocked, plain"):
        pipeline(2, layout="nchw16c")


# -- compiled --------------------------------------------------------------------------------------

def _runs_here() -> bool:
    from braze.targets.isa import missing, requirements

    return missing(requirements(get_target(TARGET))) is None


def _compiled(model, **options):
    art = braze_compile(model, target=TARGET, level=2, **options)
    if _runs_here():
        feeds = _feeds(model)
        got = art.run(feeds)
        for name, expected in run_ort(model, feeds).items():
            np.testing.assert_allclose(got[name], expected, rtol=1e-4, atol=1e-4, err_msg=name)
    return art


def _schedules(art) -> Counter:
    return Counter(k["schedule"] for k in art.kernels)


def test_blocked_kernels_match_onnxruntime():
    from braze.codegen.schedules.machine import lanes

    art = _compiled(_c2f_like())
    assert art.manifest["layout"] == "blocked"
    # the 8-channel conv feeds no conv: blocked where 8 channels fill a
    # vector (AVX2), plain where they would fill half of one (AVX-512)
    assert _schedules(art)["blocked"] == (4 if lanes(get_target(TARGET)) <= 8 else 3)
    plain = _compiled(_c2f_like(), layout="plain")
    assert plain.manifest["layout"] == "plain" and not _schedules(plain)["blocked"]
    # the depthwise conv with its SiLU and the max pool after it: one kernel
    # that the depthwise rule takes (the pool a stage of its own in it)
    (pooled,) = [k for k in plain.kernels if k["name"].endswith("conv_pool")]
    assert pooled["schedule"] == "depthwise"


def test_padded_kernels_match_onnxruntime():
    """The padded block compiled for the target's own lanes (12 channels
    are padded with AVX2's 8 and AVX-512's 16) against onnxruntime."""
    art = _compiled(_padded_block())
    # six blocked convs in five kernels: the first 1x1 conv (with its hard-swish) is computed inside the
    # depthwise conv after it (the conv_depthwise rule), its padded channels included
    assert _schedules(art)["blocked"] == 5
    assert sum(k["ops"].count("nn.conv_blocked") for k in art.kernels if k["schedule"] == "blocked") == 6
    (chained,) = [k for k in art.kernels if k["name"].endswith("conv_depthwise")]
    assert all(p["chain"] > 0 for p in chained["schedule_params"].values())


@pytest.mark.parametrize("group,stride", [(2, 1), (4, 2), (4, 1)])
def test_grouped_blocked_kernels_match_onnxruntime(group, stride):
    # one or several output blocks a group (a tile never spans two groups), strided or not
    art = _compiled(_grouped(64, group, stride))
    assert _schedules(art)["blocked"] == 3


def test_blocked_tiles_fit_the_register_file():
    from braze.codegen.schedules.machine import lanes, registers

    target = get_target(TARGET)
    art = _compiled(_residual_block())
    tiles = [p for k in art.kernels if k["schedule"] == "blocked" for p in k["schedule_params"].values()]
    assert tiles
    for p in tiles:
        # the tile, a step's weight vectors, the broadcast and one for LLVM
        assert p["tile_k"] * p["tile_w"] + p["tile_k"] + 2 <= registers(target)
    assert layout_block(target) == lanes(target)


def test_winograd_takes_blocked_3x3_convs():
    """A 3x3 stride-1 conv in a blocked chain runs as Winograd, reading and
    writing blocked tensors (its transforms vectorize over contiguous channels)."""
    model = _model([_conv("x", "w1", "a", k=3), helper.make_node("Relu", ["a"], ["r"]),
                    _conv("r", "w2", "out", k=3)],
                   [("x", [1, 32, 24, 24])], ["out"], {"w1": _w(32, 32, 3, 3), "w2": _w(32, 32, 3, 3)})
    art = _compiled(model)
    assert _schedules(art)["winograd"] == 2
    assert all("nn.conv_blocked" in k["ops"] for k in art.kernels if k["schedule"] == "winograd")


# -- from the command line ---------------------------------------------------------------------------

def test_explain_reports_the_layout_and_plain_turns_it_off():
    import json
    import subprocess
    import sys

    from models import tiny

    def explain(*extra):
        r = subprocess.run([sys.executable, "-m", "braze.cli", "explain", str(tiny("mobilenetv2-tiny")), "--json",
                            "--target", "cpu-avx2", *extra], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["layout"]

    blocked, plain = explain(), explain("--layout", "plain")
    assert blocked["blocked_convs"] > 0 and blocked["plain_convs"] == 0 and 8 in blocked["blocks"]
    assert plain == {"blocked_convs": 0, "padded_convs": 0, "plain_convs": blocked["blocked_convs"],
                     "to_blocked": 0, "from_blocked": 0, "blocks": []}
