"""8-bit integer matmuls built from IR text, as the MatMulInteger converter
emits them (``nn.matmul`` of ``ui8`` by ``i8``, a per-column float scale),
checked exactly against numpy; shared by the vnni and amx_int8 rule tests."""

from __future__ import annotations

import dataclasses

import numpy as np

from braze.compiler import compile_module
from braze.ir import parse_module
from braze.targets import get_target
from braze.targets.isa import missing, requirements

RNG = np.random.default_rng(11)


def int8_matmul_text(a_shape, k: int, n: int, a_dtype: str = "ui8", epilogue: bool = True) -> str:
    """``y = nn.matmul(a, w)``, then (``epilogue``) ``f32(y) * s``: ``w``
    a ``k x n`` int8 constant, ``s`` a per-column float32 scale."""
    dims = "x".join(map(str, a_shape))
    out = "x".join(map(str, (*a_shape[:-1], n)))
    a_t, w_t, y_t, f_t = f"tensor<{dims}x{a_dtype}>", f"tensor<{k}x{n}xi8>", f"tensor<{out}xi32>", f"tensor<{out}xf32>"
    lines = [f'  %w = "const"() {{value = dense_resource<w>}} : () -> {w_t}',
             f'  %0 = "nn.matmul"(%a, %w) : ({a_t}, {w_t}) -> {y_t}']
    if epilogue:
        lines += [f'  %s = "const"() {{value = dense_resource<s>}} : () -> tensor<{n}xf32>',
                  f'  %1 = "math.cast"(%0) {{to = "f32"}} : ({y_t}) -> {f_t}',
                  f'  %2 = "math.mul"(%1, %s) : ({f_t}, tensor<{n}xf32>) -> {f_t}',
                  f'  "func.return"(%2) : ({f_t}) -> ()']
    else:
        lines.append(f'  "func.return"(%0) : ({y_t}) -> ()')
    result = f_t if epilogue else y_t
    return "\n".join([f'func.func @main(%a: {a_t}) -> ({result} {{name = "y"}}) {{', *lines, "}"])


def build_int8_matmul(a_shape, k: int, n: int, target="cpu", a_dtype: str = "ui8", epilogue: bool = True,
                      schedules=None):
    """(artifact, run): ``run()`` feeds extreme and random values and
    checks the result exactly against numpy's int32 product."""
    w = RNG.integers(-128, 128, (k, n)).astype(np.int8)
    w[:, 0] = -128  # with A's 255s below: the sums that saturate an int16 pair (VPMADDUBSW's)
    w[:, 1] = 127
    s = RNG.uniform(0.5, 2, n).astype(np.float32)
    module = parse_module(int8_matmul_text(a_shape, k, n, a_dtype, epilogue), blobs={"w": w, "s": s})
    art = compile_module(module, target=target, level=2, schedules=schedules)

    def run() -> None:
        low, high = (0, 256) if a_dtype == "ui8" else (-128, 128)
        a = RNG.integers(low, high, a_shape).astype(np.uint8 if a_dtype == "ui8" else np.int8)
        a[..., 0, :] = high - 1
        exact = np.matmul(a.astype(np.int32), w.astype(np.int32))
        want = exact.astype(np.float32) * s if epilogue else exact
        np.testing.assert_array_equal(art.run({"a": a})["y"], want)

    return art, run


def target_runs_here(target) -> bool:
    return missing(requirements(get_target(target) if isinstance(target, str) else target)) is None


def assembly(art) -> str:
    return "".join(m.inspect_source("asm") for m in art._executable.mod.imports if m.kind == "llvm")


def target_with(name: str, *features: str):
    """A named target with LLVM ``features`` added (built on any x86 host)."""
    return dataclasses.replace(get_target(name), mattr=tuple(f"+{f}" for f in features))
