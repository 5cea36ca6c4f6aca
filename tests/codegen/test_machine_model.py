"""The CPU machine model behind the schedule rules: register tiles fit the
target's register file (16 vector registers with AVX2, 32 with AVX-512),
whatever the host is (docs/schedules.md, "The machine model")."""

import dataclasses

import numpy as np
import pytest
from onnx import helper

from braze.codegen.schedules import blocked, conv, gemm, pointwise, winograd
from braze.codegen.schedules.machine import accumulators, lanes, min_accumulators, pick_tile, registers
from braze.compiler import compile as braze_compile
from braze.ir import Module
from braze.targets import detect, get_target
from onnx_check import float_model as _model
from schedule_check import weight

AVX2 = ("haswell", 256, 16)
AVX512 = ("skylake-avx512", 512, 32)


def _target(mcpu, bits, regs):
    """The host's target made into ``mcpu``'s: its vector file and FMA pipes
    (the host's own may differ: Zen 4 starts one 512-bit FMA per cycle)."""
    return dataclasses.replace(get_target("cpu"), mcpu=mcpu, mattr=(), vector_bits=bits, vector_registers=regs,
                               fma_units=detect.fma_units(mcpu, bits))


def _anchor(model, name):
    """The first op called ``name`` of an imported, canonicalized model."""
    from braze.frontend import import_onnx
    from braze.passes import PassManager

    module: Module = import_onnx(model)
    PassManager.parse("canonicalize").run(module)
    return next(op for op in module.main.body.ops if op.name == name)


def test_detected_registers():
    assert detect.vector_registers({"sse2", "avx", "avx2", "avx512f"}) == 32
    assert detect.vector_registers({"sse2", "avx", "avx2", "fma"}) == 16
    assert detect.vector_registers({"fp", "asimd"}) == 32
    assert get_target("cpu").vector_registers in (16, 32)
    assert registers(get_target("cpu")) == get_target("cpu").vector_registers


def test_host_features_beyond_llvms_cpu_name(monkeypatch):
    """LLVM names a CPU by its model; the features the OS lists and the name
    lacks are added (a VM's Sapphire Rapids seen as ``rocketlake``), those it
    implies and the OS hides are removed, and the artifact requires exactly
    what the target then enables."""
    from braze.targets import isa

    monkeypatch.setattr(detect, "arch", lambda triple=None: "x86_64")
    sapphire = {"sse4_2", "popcnt", "avx", "avx2", "fma", "f16c", "bmi1", "bmi2", "abm", "movbe", "avx512f",
                "avx512bw", "avx512cd", "avx512dq", "avx512vl", "avx512_vnni", "avx512vbmi", "avx512_bf16",
                "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8"}
    monkeypatch.setattr(detect, "cpu_flags", lambda cpuinfo=None: sapphire)
    assert isa.host_mattr("rocketlake") == ("+avx512bf16", "+avx512fp16", "+avxvnni", "+amx-tile", "+amx-bf16",
                                            "+amx-int8")
    assert isa.host_mattr("sapphirerapids") == ()
    target = dataclasses.replace(get_target("cpu"), mcpu="rocketlake", mattr=isa.host_mattr("rocketlake"))
    assert {"avx512bf16", "avx512fp16"} <= set(isa.requirements(target)["features"])
    no_fma = sapphire - {"fma", "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl", "avx512_vnni",
                         "avx512vbmi", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16",
                         "amx_int8"}
    monkeypatch.setattr(detect, "cpu_flags", lambda cpuinfo=None: no_fma)
    assert isa.host_mattr("haswell") == ("-fma",)
    monkeypatch.setattr(detect, "cpu_flags", lambda cpuinfo=None: set())
    assert isa.host_mattr("rocketlake") == ()


def test_fma_units():
    """2 full-width FMA pipes unless the CPU is known to have fewer or more;
    the accumulators a tile needs follow (latency 4 x units)."""
    assert detect.fma_units("znver3") == 2 and detect.fma_units("skylake-avx512") == 2
    assert detect.fma_units("znver4", 512) == 1 and detect.fma_units("znver4", 256) == 2
    assert detect.fma_units("znver1") == 1 and detect.fma_units("neoverse-v2") == 4
    assert get_target("cpu").fma_units == detect.fma_units()
    assert get_target("cpu-avx2").fma_units == get_target("cpu-avx512").fma_units == 2
    one = dataclasses.replace(_target(*AVX512), fma_units=1)
    assert min_accumulators(one) == 4 and min_accumulators(_target(*AVX2)) == 8
    assert pick_tile([(4, "a"), (8, "b")], one) == "a"  # one unit: 4 in flight are enough
    assert pick_tile([(4, "a"), (8, "b")], _target(*AVX2)) == "b"


def test_accumulator_budget():
    avx2, avx512 = _target(*AVX2), _target(*AVX512)
    assert accumulators(avx2, 2) == 12 and accumulators(avx2, 1) == 13
    assert accumulators(avx512, 2) == 16  # capped: more did not pay
    assert pick_tile([(4, "a"), (7, "b"), (7, "c")]) == "b"  # none reaches MIN_ACCUMULATORS: the most
    assert pick_tile([(8, "a"), (12, "b")]) == "a"  # the first that hides the FMA latency (4 x 2 units)


@pytest.mark.parametrize("isa,n,expected", [(AVX2, 3072, {"tile_m": 4, "tile_n": 24, "unroll_k": 4, "order": 1}),
                                            (AVX2, 1024, {"tile_m": 6, "tile_n": 16, "unroll_k": 4, "order": 1}),
                                            (AVX512, 3072, {"tile_m": 8, "tile_n": 48, "unroll_k": 4, "order": 1}),
                                            (AVX512, 1024, {"tile_m": 8, "tile_n": 32, "unroll_k": 4, "order": 1})])
def test_gemm_tile_fits_the_registers(isa, n, expected):
    """bert-base's FFN matmul: 3 vectors wide where they divide the columns,
    4 rows on AVX2 (12 accumulators, 3 B vectors and a broadcast: all 16
    registers), 8 on AVX-512 (24 of 32); else 2 vectors wide (6 x 16 on
    AVX2, 8 x 32 on AVX-512); 4 k steps a loop body."""
    target = _target(*isa)
    model = _model([helper.make_node("MatMul", ["x", "w"], ["out"])], [("x", [128, 768])], ["out"],
                   {"w": weight(768, n)})
    op = _anchor(model, "nn.matmul")
    params = gemm.defaults(op, None, target)
    assert params == expected
    nv = params["tile_n"] // lanes(target)
    assert params["tile_m"] * nv + nv + 1 <= registers(target)


@pytest.mark.parametrize("isa,m,rows", [(AVX512, 197, 9), (AVX512, 128, 8), (AVX512, 50, 9), (AVX512, 384, 8),
                                         (AVX2, 197, 4), (AVX2, 50, 4)])
def test_gemm_rows_pad_the_least(isa, m, rows):
    """3-vector tiles take, from 8 rows up to what the registers hold (9
    with AVX-512's 32: 27 accumulators, 3 B vectors, the broadcast), the
    count that computes the fewest padded rows, 8 on a tie: ViT's 197
    tokens in tiles of 9 (198 rows) rather than 8 (200). AVX2 holds 4."""
    target = _target(*isa)
    model = _model([helper.make_node("MatMul", ["x", "w"], ["out"])], [("x", [m, 768])], ["out"],
                   {"w": weight(768, 3072)})
    params = gemm.defaults(_anchor(model, "nn.matmul"), None, target)
    assert params["tile_m"] == rows
    nv = params["tile_n"] // lanes(target)
    assert nv == 3 and rows * nv + nv + 1 <= registers(target)


@pytest.mark.parametrize("isa,tile", [(AVX2, (6, 16)), (AVX512, (6, 64))])
def test_gemm_attention_tiles(isa, tile):
    """Attention: the scores (B = K transposed, 64 KB) written row band by
    row band (order 2); times V, a 64-column output in one 6 x 64 tile
    where 32 registers hold it (AVX-512), so the weights are read once."""
    target = _target(*isa)
    scores = _model([helper.make_node("MatMul", ["q", "k"], ["s"])], [("q", [8, 256, 64]), ("k", [8, 64, 256])],
                    ["s"], {})
    params = gemm.defaults(_anchor(scores, "nn.matmul"), None, target)
    assert params["order"] == 2
    mixed = _model([helper.make_node("MatMul", ["p", "v"], ["o"])], [("p", [8, 256, 256]), ("v", [8, 256, 64])],
                   ["o"], {})
    params = gemm.defaults(_anchor(mixed, "nn.matmul"), None, target)
    assert (params["tile_m"], params["tile_n"]) == tile and params["order"] == 1
    nv = params["tile_n"] // lanes(target)
    assert params["tile_m"] * nv + nv + 2 <= registers(target)


@pytest.mark.parametrize("isa", [AVX2, AVX512])
@pytest.mark.parametrize("hw", [56, 28, 14, 7])
def test_conv_tiles_fit_the_registers(isa, hw):
    target = _target(*isa)
    model = _model([helper.make_node("Conv", ["x", "w"], ["out"], kernel_shape=[3, 3], strides=[2, 2],
                                     pads=[1, 1, 1, 1])],
                   [("x", [1, 64, 2 * hw, 2 * hw])], ["out"], {"w": weight(128, 64, 3, 3)})
    op = _anchor(model, "nn.conv")
    p = conv.conv_defaults(op, None, target)
    v = lanes(target)
    nv = max(1, p["tile_k"] // v)
    assert p["tile_k"] % v == 0 and hw % p["tile_w"] == 0
    assert nv * p["tile_w"] <= accumulators(target, nv, 24)
    if isa == AVX512:  # as tuned on AVX-512: two vectors of channels
        assert p["tile_k"] == 2 * v
    if isa == AVX2 and hw in (14, 7):  # 2 vectors would leave 1-2 columns: one vector, 7 columns
        assert (p["tile_k"], p["tile_w"]) == (v, 7)


@pytest.mark.parametrize("isa", [AVX2, AVX512])
@pytest.mark.parametrize("hw,k,stride", [(56, 64, 1), (14, 256, 1), (7, 512, 1), (14, 1024, 2)])
def test_pointwise_tiles_fit_the_registers(isa, hw, k, stride):
    """1x1 convs: two vectors of pixels (padded to whole tiles) by as many
    rows of output channels as the registers hold: 6x16 with AVX2, 8x32
    with AVX-512 for channel counts that 8 divide (the rows that pad the
    channels least, from 8 to 14)."""
    target = _target(*isa)
    model = _model([helper.make_node("Conv", ["x", "w"], ["out"], kernel_shape=[1, 1], strides=[stride, stride])],
                   [("x", [1, 64, stride * hw, stride * hw])], ["out"], {"w": weight(k, 64, 1, 1)})
    op = _anchor(model, "nn.conv")
    assert pointwise.pw_applies(op, None, target)
    p = pointwise.pw_defaults(op, None, target)
    v = lanes(target)
    assert p["tile_n"] == 2 * v
    assert p["tile_m"] * 2 + 2 + 2 <= registers(target)
    assert (p["tile_m"], p["tile_n"]) == ((6, 16) if isa == AVX2 else (8, 32))


@pytest.mark.parametrize("isa", [AVX2, AVX512])
@pytest.mark.parametrize("k,rows", [(116, 13), (58, 12), (232, 8)])
def test_pointwise_rows_pad_the_channels_least(isa, k, rows):
    """With AVX-512 the row tile takes 8 to 14 rows (one broadcast live:
    up to 28 accumulators), the count whose padded rows are fewest, the
    larger on a tie: ShuffleNet's 116 channels in 9 tiles of 13 (117 rows),
    58 in 5 of 12; AVX2 keeps 6."""
    target = _target(*isa)
    model = _model([helper.make_node("Conv", ["x", "w"], ["out"], kernel_shape=[1, 1])],
                   [("x", [1, 64, 28, 28])], ["out"], {"w": weight(k, 64, 1, 1)})
    p = pointwise.pw_defaults(_anchor(model, "nn.conv"), None, target)
    assert p["tile_m"] == (6 if isa == AVX2 else rows)
    assert p["tile_m"] * 2 + 2 + 2 <= registers(target)


@pytest.mark.parametrize("isa", [AVX2, AVX512])
def test_winograd_tile_fits_the_registers(isa):
    target = _target(*isa)
    model = _model([helper.make_node("Conv", ["x", "w"], ["out"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
                   [("x", [1, 64, 28, 28])], ["out"], {"w": weight(64, 64, 3, 3)})
    op = _anchor(model, "nn.conv")
    p = winograd.defaults(op, None, target)
    nv = p["tile_k"] // lanes(target)
    assert p["tile_t"] * nv <= accumulators(target, nv)
    assert p["tile_t"] * nv >= 7  # 7 tiles a row: never a 1-tile sliver


def _blocked_conv(target, hw, k, stride, c=64, m=128):
    """The second conv of a 1x1 conv -> relu -> conv chain, made blocked by
    the layout pass for ``target``."""
    from braze.frontend import import_onnx
    from braze.passes import PassManager

    model = _model([helper.make_node("Conv", ["x", "w1"], ["a"], kernel_shape=[1, 1]),
                    helper.make_node("Relu", ["a"], ["r"]),
                    helper.make_node("Conv", ["r", "w2"], ["out"], kernel_shape=[k, k], strides=[stride] * 2,
                                     pads=[k // 2] * 4)],
                   [("x", [1, c, hw * stride, hw * stride])], ["out"], {"w1": weight(c, c, 1, 1), "w2": weight(m, c, k, k)})
    module = import_onnx(model)
    PassManager.parse(f"canonicalize,cse,dce,layout{{block={lanes(target)}}}").run(module)
    ops = [op for op in module.main.body.ops if op.name == "nn.conv_blocked"]
    assert len(ops) == 2
    return ops[1]


@pytest.mark.parametrize("isa", [AVX2, AVX512])
@pytest.mark.parametrize("hw,k,stride,m", [(56, 1, 1, 128), (28, 3, 1, 128), (14, 1, 2, 128), (7, 3, 1, 128),
                                           (112, 1, 1, 48)])
def test_blocked_tiles_fit_the_registers(isa, hw, k, stride, m):
    """Blocked convs: the micro-kernel broadcasts one column at a time into
    its tile_k weight vectors, so the tile may take the register file less
    those vectors, the broadcast and one for LLVM: 2 blocks x 14 columns on
    AVX-512's 32 registers where 14 divide the row, 7 on a 7-wide map, 3
    blocks x 8 columns where the channels are 3 blocks; AVX2's 16
    registers keep 8 or 7 accumulators."""
    target = _target(*isa)
    p = blocked.blocked_defaults(_blocked_conv(target, hw, k, stride, m=m), None, target)
    assert hw % p["tile_w"] == 0 and (m // lanes(target)) % p["tile_k"] == 0
    assert p["tile_k"] * p["tile_w"] + p["tile_k"] + 2 <= registers(target)
    if isa == AVX512:
        assert (p["tile_k"], p["tile_w"]) == ((3, 8) if m == 48 else (2, 7) if hw == 7 else (2, 14))
    else:
        assert p["tile_k"] * p["tile_w"] in (7, 8)


@pytest.mark.parametrize("c,block_c", [(1024, 64), (80, 80), (784, 112)])
def test_blocked_k_blocks(c, block_c):
    """Channel blocks outside (order 1) on a small map: the reduction in K
    blocks of up to 64 input channels, so that cold weights stream; where
    no divisor from 32 to 64 exists, the smallest up to 128 (784: 49 blocks
    of 16, 7 a K block), else none (80 channels: 5 blocks of 16)."""
    target = _target(*AVX512)
    p = blocked.blocked_defaults(_blocked_conv(target, 14, 1, 1, c=c, m=256), None, target)
    assert (p["order"], p["block_c"]) == (1, block_c)


@pytest.mark.parametrize("hw,units,tile_w", [(56, 2, 8), (56, 1, 4), (112, 1, 4), (14, 1, 7), (7, 1, 7), (14, 2, 7)])
def test_depthwise_columns_follow_the_fma_units(hw, units, tile_w):
    """A depthwise tile holds as many columns as keep the FMA units busy
    (4 x units, at most 8): 4 with Zen 4's one 512-bit unit, 8 with two;
    where that count divides no width (7, 14), the largest divisor up to 8."""
    from braze.frontend import import_onnx
    from braze.passes import PassManager

    target = dataclasses.replace(_target(*AVX512), fma_units=units)
    c = 2 * lanes(target)
    model = _model([helper.make_node("Conv", ["x", "w1"], ["a"], kernel_shape=[1, 1]),
                    helper.make_node("Relu", ["a"], ["r"]),
                    helper.make_node("Conv", ["r", "w2"], ["out"], kernel_shape=[3, 3], pads=[1] * 4, group=c)],
                   [("x", [1, c, hw, hw])], ["out"], {"w1": weight(c, c, 1, 1), "w2": weight(c, 1, 3, 3)})
    module = import_onnx(model)
    PassManager.parse(f"canonicalize,cse,dce,layout{{block={lanes(target)}}}").run(module)
    depthwise = [op for op in module.main.body.ops if op.name == "nn.conv_blocked"][1]
    p = blocked.blocked_defaults(depthwise, None, target)
    assert (p["tile_k"], p["tile_w"], p["pad"]) == (1, tile_w, 2)


def test_avx512_kernels_build_on_any_host():
    """Code for the other ISA compiles here (it is run only where the host has it)."""
    target = _target(*AVX512)
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["out"])],
                   [("x", [32, 64])], ["out"], {"w": weight(64, 96)})
    art = braze_compile(model, level=2, target=target)
    (params,) = art.kernels[0]["schedule_params"].values()
    assert art.kernels[0]["schedule"] == "gemm" and params["tile_n"] % 16 == 0
    if "avx512f" in detect.cpu_flags():
        from onnx_check import run_ort
        from schedule_check import RNG

        feeds = {"x": RNG.standard_normal((32, 64)).astype(np.float32)}
        np.testing.assert_allclose(art.run(feeds)["out"], run_ort(model, feeds)["out"], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("isa", [AVX2, AVX512])
def test_depthwise_row_segments_are_whole_registers(isa):
    """A depthwise row segment divides the row and is either at most one
    vector or a whole number of vectors (never one wider, partial vector,
    whose weight broadcasts spill): MobileNetV2's rows of 112, 56 and 28."""
    from braze.codegen.schedules.depthwise import _row_tile

    v = lanes(_target(*isa))
    for ow in (112, 56, 28, 14, 7, 80, 40, 20, 12, 320):
        tile = _row_tile(ow, v)
        assert ow % tile == 0 and (tile <= v or tile % v == 0) or tile == min(ow, 64), (ow, tile)
    expected = {8: {112: 56, 56: 56, 28: 4, 14: 14}, 16: {112: 16, 56: 8, 28: 4, 14: 14}}[v]
    assert {ow: _row_tile(ow, v) for ow in expected} == expected
