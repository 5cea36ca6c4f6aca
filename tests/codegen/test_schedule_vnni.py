"""The 8-bit integer matmul rules (``vnni``, ``pmaddwd``; schedules/vnni.py):
uint8 activations times a constant int8 weight, an exact int32 sum, with
the epilogue fused into the block.

The kernels are built from IR text (``nn.matmul`` of ``ui8`` by ``i8``),
as the MatMulInteger converter emits them; each target's rule and
instruction form is checked in its build, and the numbers, exact, where
this host runs the target's code."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from braze.targets import get_target
from int8_matmul import RNG, assembly, build_int8_matmul, target_runs_here, target_with

def _host():
    """The host's target less AMX-INT8, whose matmuls the amx_int8 rule
    takes (test_schedule_amx_int8.py): these tests are of the vnni rules."""
    host = get_target("cpu")
    return dataclasses.replace(host, mattr=(*(f for f in host.mattr if f != "+amx-int8"), "-amx-int8"))


def _host_rule() -> tuple[str, int] | tuple[None, None]:
    from braze.codegen.schedules.machine import lanes
    from braze.codegen.schedules.vnni import has_pmaddwd, has_vnni

    host = _host()
    rule = "vnni" if has_vnni(host) else "pmaddwd" if has_pmaddwd(host) else None
    return (rule, lanes(host)) if rule else (None, None)


@pytest.mark.parametrize("target,rule,lanes", [
    (_host(), *_host_rule()),
    (target_with("cpu-avx512", "avx512vnni"), "vnni", 16),  # Cascade Lake and later Xeons, Zen 4
    (target_with("cpu-avx2", "avxvnni"), "vnni", 8),  # Alder Lake: VEX-encoded VPDPBUSD on ymm
    ("cpu-avx512", "pmaddwd", 16),  # Skylake-SP: AVX-512BW, no VNNI
    ("cpu-avx2", "pmaddwd", 8),
], ids=["host", "avx512vnni", "avxvnni", "avx512bw", "avx2"])
def test_int8_matmul_by_a_weight_takes_the_targets_instruction(target, rule, lanes):
    """A uint8 [1, 64, 256] by int8 [256, 192] matmul, cast to float32 and
    scaled per column, is one kernel: the weight packed in the form's
    panels, register blocks of VPDPBUSD (VNNI, either width) or of
    VPMADDWD on int16 (no VNNI; never VPMADDUBSW, whose int16 sums
    saturate), the epilogue on the block; exact wherever this host runs the
    target's code, a column of -128s and one of 127s against a row of 255s
    included."""
    if rule is None:
        pytest.skip("this host has neither VNNI nor AVX2")
    art, run = build_int8_matmul((1, 64, 256), 256, 192, target)
    [kernel] = art.kernels
    assert kernel["ops"] == ["nn.matmul", "math.cast", "math.mul"], kernel
    assert kernel["schedule"] == rule and kernel["packed"] == [f"int8-{'vpdpbusd' if rule == 'vnni' else rule}-{lanes}"]
    asm = assembly(art)
    assert ("vpdpbusd" in asm) == (rule == "vnni") and ("vpmaddwd" in asm) == (rule == "pmaddwd")
    assert "vpmaddubsw" not in asm
    if target_runs_here(target):
        run()


@pytest.mark.parametrize("a_shape,k,n,epilogue,pins", [
    ((2, 3, 37, 64), 64, 32, False, None),  # two batch dims; 37 rows, padded to whole blocks
    ((3, 128), 128, 96, True, None),  # fewer rows than a block
    ((40, 64), 64, 64, True, {"rows": 4, "vectors": 2}),  # pinned
])
def test_int8_blocks_on_the_host(a_shape, k, n, epilogue, pins):
    """The host's rule on shapes that exercise the block's edges: batch dims
    (one weight for all), rows that do not fill the last block, fewer rows
    than a block, pinned parameters; the int32 result itself, or the epilogue."""
    rule, lanes = _host_rule()
    if rule is None or not target_runs_here("cpu"):
        pytest.skip("this host has neither VNNI nor AVX2")
    if n % lanes:
        pytest.skip(f"{n} columns are no whole number of {lanes}-lane vectors")
    schedules = {"k0": {"rule": rule, "params": pins}} if pins else None
    art, run = build_int8_matmul(a_shape, k, n, _host(), epilogue=epilogue, schedules=schedules)
    [kernel] = art.kernels
    assert kernel["schedule"] == rule
    [params] = kernel["schedule_params"].values()
    if pins:
        assert params == pins
    assert params["rows"] <= max(2, a_shape[-2])
    run()


@pytest.mark.parametrize("a_shape,k,n,a_dtype", [
    ((16, 66), 66, 64, "ui8"),  # k not a whole number of quads
    ((16, 64), 64, 36, "ui8"),  # columns not a whole number of vectors
    ((16, 64), 64, 64, "i8"),  # int8 activations: VPDPBUSD's first operand is unsigned
])
def test_int8_matmuls_the_rules_leave_to_the_generic_schedule(a_shape, k, n, a_dtype):
    """Where the block does not fit the shapes or the types, the generic
    schedule, exact all the same."""
    art, run = build_int8_matmul(a_shape, k, n, "cpu-avx2", a_dtype)
    assert [kr["schedule"] for kr in art.kernels] == ["generic"]
    if target_runs_here("cpu-avx2"):
        run()


def test_one_row_is_padded_to_a_block():
    """A classifier's pooled vector (one row) takes the rule, its row space
    padded to a block of 2, and stays exact."""
    art, run = build_int8_matmul((1, 64), 64, 64, "cpu-avx2", "ui8")
    assert [kr["schedule"] for kr in art.kernels] == ["pmaddwd"]
    if target_runs_here("cpu-avx2"):
        run()


def test_matmul_integer_from_onnx():
    """ONNX MatMulInteger (uint8 [1, 64, 256] by a constant int8 [256, 192])
    is exact, and takes the host's rule once the converter gives
    ``nn.matmul`` its 8-bit operands (it widened them to int32 before)."""
    from onnx import TensorProto, helper, numpy_helper

    from braze.compiler import compile as braze_compile

    rule, _ = _host_rule()
    w = RNG.integers(-128, 128, (256, 192)).astype(np.int8)
    graph = helper.make_graph([helper.make_node("MatMulInteger", ["a", "w"], ["y"])], "mmi",
                              [helper.make_tensor_value_info("a", TensorProto.UINT8, [1, 64, 256])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [1, 64, 192])],
                              [numpy_helper.from_array(w, "w")])
    art = braze_compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), target=_host(), level=2)
    a = RNG.integers(0, 256, (1, 64, 256)).astype(np.uint8)
    if target_runs_here("cpu"):
        np.testing.assert_array_equal(art.run({"a": a})["y"], np.matmul(a.astype(np.int32), w.astype(np.int32)))
    schedules = [kr["schedule"] for kr in art.kernels]
    if rule not in schedules:
        pytest.skip(f"MatMulInteger's kernels took {schedules}: its converter still widens the operands to int32")


@pytest.mark.parametrize("form", ["vpdpbusd", "pmaddwd"])
@pytest.mark.parametrize("lanes", [8, 16])
def test_packed_panels_are_where_the_micro_kernel_reads_them(form, lanes):
    """The compile-time packing (numpy) and the index the kernel reads
    the packed weight by (TE) agree on every element."""
    from braze.codegen.schedules.intrinsics_int8 import pack_panels, panel_index

    w = RNG.integers(-128, 128, (32, 3 * lanes)).astype(np.int8)
    r, c = np.indices(w.shape)
    np.testing.assert_array_equal(pack_panels(form, lanes, w)[panel_index(form, lanes, r, c)], w)
