"""The ``amx_int8`` rule (schedules/amx_int8.py): uint8 activations times a
constant int8 weight on AMX tiles (TDPBUSD), an exact int32 sum, with the
epilogue fused into the 32 x 32 block.

The kernels are built from IR text (``nn.matmul`` of ``ui8`` by ``i8``)
with test_schedule_vnni.py's helpers; the rule, the packing and the
instruction are checked in each build, and the numbers, exact against
numpy's int32 product (a row of 255s against columns of -128s and of
127s included), where this host has AMX-INT8."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from braze.codegen.schedules.amx_int8 import has_amx_int8
from braze.runtime.manifest import cannot_run
from braze.targets import get_target
from braze.targets import isa
from int8_matmul import RNG, assembly, build_int8_matmul, target_runs_here, target_with

#: a Sapphire Rapids-like target named by its features: builds on any x86 host
AMX_INT8 = ("avx512vnni", "amx-tile", "amx-int8")


def _skip_unless_host_runs_amx_int8() -> None:
    if not has_amx_int8(get_target("cpu")) or not target_runs_here("cpu"):
        pytest.skip("this host has no AMX-INT8 (amx-tile, amx-int8), or the OS refuses this process AMX tile state")


def _rule_on(target, a_shape, k: int, n: int) -> str:
    art, _ = build_int8_matmul(a_shape, k, n, target)
    return art.kernels[0]["schedule"]


def test_a_target_naming_amx_int8_builds_tdpbusd_blocks():
    """On a target that names ``amx-int8`` (built on any host): one kernel,
    the weight in vnni's 16-column panels, TDPBUSD on tiles, and an
    artifact that requires ``amx-tile`` and ``amx-int8``."""
    art, _ = build_int8_matmul((1, 64, 256), 256, 192, target_with("cpu-avx512", *AMX_INT8))
    [kernel] = art.kernels
    assert kernel["ops"] == ["nn.matmul", "math.cast", "math.mul"], kernel
    assert kernel["schedule"] == "amx_int8" and kernel["packed"] == ["int8-vpdpbusd-16"]
    asm = assembly(art)
    assert "tdpbusd" in asm and "ldtilecfg" in asm and "tilerelease" in asm
    assert {"amx-tile", "amx-int8"} <= set(art.manifest["requires"]["features"])


def test_the_load_time_check_names_amx_int8(monkeypatch):
    """An artifact that requires AMX-INT8, loaded on a CPU without it, is
    refused with the feature named (cpp/src/cpu.cpp knows it too:
    test_named_targets.py)."""
    art, _ = build_int8_matmul((1, 64, 256), 256, 192, target_with("cpu-avx512", *AMX_INT8))
    monkeypatch.setattr(isa, "host_features", lambda: frozenset(isa.FEATURES["x86_64"]) - {"amx-int8"})
    assert "this CPU lacks amx-int8" in cannot_run(art.manifest)
    assert "amx-int8" in isa.ON_REQUEST  # tile state is asked of the OS for it as for amx-bf16


@pytest.mark.parametrize("target,a_shape,k,n,rule", [
    (target_with("cpu-avx512", "avx512vnni"), (64, 256), 256, 192, "vnni"),  # Cascade Lake: no AMX
    (target_with("cpu-avx512", "avx512vnni", "amx-tile", "amx-bf16"), (64, 256), 256, 192, "vnni"),  # AMX, no AMX-INT8
    ("cpu-avx512", (64, 256), 256, 192, "pmaddwd"),  # Skylake-SP: no VNNI either
    (target_with("cpu-avx512", *AMX_INT8), (4, 256), 256, 192, "vnni"),  # fewer rows than MIN_ROWS
    (target_with("cpu-avx512", *AMX_INT8), (64, 96), 96, 192, "vnni"),  # k not a whole number of 64
    (target_with("cpu-avx512", *AMX_INT8), (64, 256), 256, 48, "vnni"),  # columns not a whole number of 32
], ids=["vnni-only", "amx-bf16-only", "avx512bw", "few-rows", "k96", "n48"])
def test_where_amx_int8_does_not_apply_the_vnni_rules_do(target, a_shape, k, n, rule):
    """Targets without AMX-INT8, and shapes the 32 x 32 block over steps of
    64 k does not fit, take ``vnni`` (or ``pmaddwd``) as before."""
    assert _rule_on(target, a_shape, k, n) == rule


def test_the_host_takes_amx_int8():
    """On this host (AMX-INT8), a quantized matmul of 128 rows takes the
    rule; the result is exact, extreme values included."""
    _skip_unless_host_runs_amx_int8()
    art, run = build_int8_matmul((128, 768), 768, 256, "cpu")
    assert [k["schedule"] for k in art.kernels] == ["amx_int8"]
    run()


@pytest.mark.parametrize("a_shape,k,n,epilogue,pins", [
    ((2, 3, 37, 64), 64, 32, False, None),  # two batch dims; 37 rows, padded to 64 (two blocks a call)
    ((1, 200, 128), 128, 96, True, None),  # 200 rows: the last block 8 rows
    ((1, 200, 128), 128, 64, True, {"blocks": 4}),  # four blocks a call: 200 rows padded to 256
    ((3, 128), 128, 64, True, {}),  # fewer rows than MIN_ROWS, pinned: one block, mostly padding
])
def test_amx_int8_blocks_on_the_host(a_shape, k, n, epilogue, pins):
    """The block's edges, exact: batch dims (one weight for all), rows that
    do not fill the last block or the last call, a pinned rule on 3 rows;
    the int32 result itself, or the epilogue."""
    _skip_unless_host_runs_amx_int8()
    schedules = None if pins is None else {"k0": {"rule": "amx_int8", "params": pins}}
    art, run = build_int8_matmul(a_shape, k, n, "cpu", epilogue=epilogue, schedules=schedules)
    [kernel] = art.kernels
    assert kernel["schedule"] == "amx_int8"
    [params] = kernel["schedule_params"].values()
    assert params["blocks"] == (pins or {}).get("blocks", params["blocks"])
    run()


def test_blocks_a_call_by_default():
    """As many 32-row blocks a call as divide the rows' blocks, up to 4,
    while every core keeps two calls at least (built for 2 cores)."""
    from braze.codegen.schedules import RULES

    target = dataclasses.replace(target_with("cpu-avx512", *AMX_INT8), num_cores=2)
    for a_shape, n, blocks in [((128, 768), 3072, 4), ((1, 384, 768), 768, 4), ((96, 768), 768, 3),
                               ((64, 768), 32, 1), ((200, 768), 768, 1)]:
        art, _ = build_int8_matmul(a_shape, 768, n, target)
        assert art.kernels[0]["schedule_params"] == {"nn.matmul#0": {"blocks": blocks}}, a_shape
    assert RULES["amx_int8"].grid(None, target, {"blocks": 4}) == [{"blocks": 1}, {"blocks": 2}]


def test_the_packing_is_vnnis():
    """The AMX B tiles read vnni's 16-lane panels: the same layout under the
    same name, so one weight packed by either rule is the same bytes (stored
    once where gears take both rules)."""
    from braze.codegen.kernel import partition
    from braze.codegen.schedules import RULES
    from braze.ir import parse_module
    from int8_matmul import int8_matmul_text

    w = RNG.integers(-128, 128, (128, 64)).astype(np.int8)
    module = parse_module(int8_matmul_text((64, 128), 128, 64, epilogue=False), blobs={"w": w})
    [kernel] = partition(module.main)
    op, target = kernel.ops[0], target_with("cpu-avx512", *AMX_INT8)
    [ours] = RULES["amx_int8"].packings(op, kernel, target, {}).values()
    [theirs] = RULES["vnni"].packings(op, kernel, target, {}).values()
    assert (ours.name, ours.shape) == (theirs.name, theirs.shape)
    np.testing.assert_array_equal(ours.pack(w), theirs.pack(w))
