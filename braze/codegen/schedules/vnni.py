"""vnni, pmaddwd: 8-bit integer matmuls by a constant weight, summed exactly in int32.

A quantized model's matmul (``nn.matmul`` of uint8 activations ``[...,
M, K]`` by an int8 weight ``[K, N]``, giving int32; ONNX
``MatMulInteger``) and the elementwise epilogue after it (the cast to
float32, the scales, the bias, the quantization back to uint8). Two rules,
one per instruction form (intrinsics_int8.py):

- ``vnni``, where the target has VNNI: AVX512-VNNI on 512-bit vectors
  (``avx512vnni``), AVX-VNNI (``avxvnni``, or AVX512-VNNI with AVX512-VL)
  on 256-bit ones. ``VPDPBUSD`` adds to each of 16 (8) int32 lanes the
  4 products of a broadcast word of 4 uint8 with that column's 4 int8: 64
  multiply-adds an instruction on zmm.
- ``pmaddwd``, where it has no VNNI (AVX2, or AVX-512BW without VNNI):
  ``VPMADDWD`` on operands widened to int16 in the registers, two
  instructions (and two additions) for one ``VPDPBUSD``. The weight stays
  int8 in memory, sign-extended as each panel vector is loaded (it is then
  reused by every row of the block): half the bytes to stream of an int16
  packing.

Either way the weight is packed once, at compile time, in panels of
``lanes`` columns by quads of k (``[N / lanes, K / 4, ...]``, laid out for
the instruction: intrinsics_int8.py), and the output is cut in register
blocks of ``rows`` x ``lanes * vectors`` int32 accumulators, each one
micro-kernel over the whole k (a tensor intrinsic) whose step reads one
word of each A row (4 uint8) and one vector of each panel. Column blocks
are outside row blocks, so a block's panel stays in cache while the rows
pass; the block's int32 result lands in a local buffer where the epilogue
runs on it. Blocks are spread over the cores.

The reduction must be a whole number of quads (``K % 4 == 0``): a word of
A is then 4 k of one row, never of two. Padding K in the packing would not
be enough, as A's rows would need the same padding, a copy of A each run;
quantized models' reductions are multiples of 4. The columns must be a
whole number of vectors. Other integer matmuls (int8 activations, two
activations) take the generic schedule.
"""

from __future__ import annotations

import numpy as np
from tvm import te

from ..kernel import Packing
from .intrinsics_int8 import QUAD, int8_block, pack_panels, panel_index, panel_shape
from .machine import lanes, registers
from .rule import Param, Rule, register, weight_param
from .tir import pad_rows, tensorize_blocks

#: rows of a register block at most (as dpbf16's)
MAX_ROWS = 8


def _features(target) -> set[str]:
    from ...targets.isa import requirements

    if getattr(target, "kind", None) != "llvm" or getattr(target, "arch", None) != "x86_64":
        return set()
    return set(requirements(target)["features"])


def has_vnni(target) -> bool:
    """Whether the target has VPDPBUSD at its vector width."""
    features, width = _features(target), lanes(target)
    return (width == 16 and "avx512vnni" in features) or (
        width == 8 and ("avxvnni" in features or {"avx512vnni", "avx512vl"} <= features))


def has_pmaddwd(target) -> bool:
    """Whether the target has VPMADDWD at its vector width."""
    features, width = _features(target), lanes(target)
    return (width == 16 and "avx512bw" in features) or (width == 8 and "avx2" in features)


def _applies(form: str, op, kernel, target) -> bool:
    a, b = op.operands[0].type, op.operands[1].type
    if a.dtype != "ui8" or b.dtype != "i8" or len(a.shape) < 2 or len(b.shape) != 2:
        return False
    k, n = b.shape
    # one row (a classifier's pooled vector) is padded to a block of 2 (pad_rows)
    return (k % QUAD == 0 and n % lanes(target) == 0 and all(d > 0 for d in (*a.shape, n))
            and weight_param(op, kernel, rank=2) is not None)


def _live(form: str, rows: int, vectors: int) -> int:
    """Vector registers a block holds at once: its accumulators, the panel
    vectors (both widened halves for ``pmaddwd``) and the row's broadcast
    (``pmaddwd``: also its two int16 halves and a product)."""
    if form == "vpdpbusd":
        return rows * vectors + vectors + 1
    return rows * vectors + 2 * vectors + 3


def _block(form: str, op, target) -> tuple[int, int]:
    """(rows, vectors) of the register block: of the panels of 3, 2 or 1
    vectors that divide the columns, each with the most rows (at most
    ``MAX_ROWS``) whose block fits the registers (``_live``; the machine
    model, docs/schedules.md), the one with the most accumulators, the
    wider on a tie: 8 x 3 with AVX-512's 32 registers (7 x 3 for
    ``pmaddwd``), 4 x 3 for ``vnni`` and 4 x 2 for ``pmaddwd`` with AVX2's
    16. Each row's word meets every panel vector, each panel vector every
    row: the more accumulators, the more steps a load feeds."""
    m, n = op.results[0].type.shape[-2], op.results[0].type.shape[-1]
    width = lanes(target)
    blocks = [(r, v) for v in (3, 2, 1) if n % (v * width) == 0 for r in range(2, MAX_ROWS + 1)
              if _live(form, r, v) <= registers(target)] or [(2, 1)]
    rows, vectors = max(blocks, key=lambda b: (b[0] * b[1], b[1]))
    return min(rows, max(2, m)), vectors


def _check(op, target, params) -> str | None:
    n, width = op.results[0].type.shape[-1], lanes(target)
    if n % (params["vectors"] * width):
        return f"{width} x vectors must divide the {n} columns, got vectors={params['vectors']}"
    return None


PARAMS = (
    Param("rows", "rows of the register block", f"the most (at most {MAX_ROWS}) whose block fits the registers",
          low=2, grid=()),
    Param("vectors", "vectors of columns of the register block",
          "3, 2 or 1 dividing the columns, the one with the most accumulators", grid=()),
)


def _packings(form: str, op, kernel, target) -> dict:
    """The weight in the form's panels, ``B[r, c] = P[panel_index(r, c)]``."""
    index = weight_param(op, kernel, rank=2)
    k, n = op.operands[1].type.shape
    width = lanes(target)
    shape = (n // width, k // QUAD, *panel_shape(form, width))

    def pack(w: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(pack_panels(form, width, w))

    def unpack(p: te.Tensor) -> te.Tensor:
        return te.compute((k, n), lambda r, c: p[panel_index(form, width, r, c)], name="unpack_int8")

    return {index: Packing(f"int8-{form}-{width}", shape, pack, unpack)}


def _tiles(form: str, op, target) -> list[dict]:
    """Blocks of 2 to 8 rows by 1 to 4 vectors that divide the columns and fit the registers."""
    n, width = op.results[0].type.shape[-1], lanes(target)
    return [{"rows": r, "vectors": v} for v in (1, 2, 3, 4) if n % (v * width) == 0 for r in (2, 3, 4, 6, 8)
            if _live(form, r, v) <= registers(target)]


def _rule(name: str, form: str, available, doc: str) -> Rule:
    """The rule ``name``: the ``form`` micro-kernel where ``available(target)``."""

    def applies(op, kernel, target) -> bool:
        return available(target) and _applies(form, op, kernel, target)

    def defaults(op, kernel, target) -> dict | None:
        rows, vectors = _block(form, op, target)
        return {"rows": rows, "vectors": vectors}

    def packings(op, kernel, target, params) -> dict:
        return _packings(form, op, kernel, target)

    def prepare(sch, block, op, target, params) -> None:
        """Rows that do not fill the last block: the row space padded to a multiple of ``rows``."""
        pad_rows(sch, block, op, int(params["rows"]))

    def apply(sch, block, op, target, params) -> set[str]:
        rows, vectors = int(params["rows"]), int(params["vectors"])
        width = lanes(target)

        def intrinsic(k: int, lead_a: int, lead_c: int) -> str:
            return int8_block(form, width, rows, vectors, k, lead_a, lead_c)

        return tensorize_blocks(sch, block, op, rows, vectors * width, width, intrinsic)

    def tiles(op, target, defaults) -> list[dict]:
        """Blocks of 2 to 8 rows by 1 to 4 vectors that divide the columns and fit the registers."""
        return _tiles(form, op, target)

    return Rule(name, ("nn.matmul",), doc, applies, defaults, apply, packings, prepare, params=PARAMS, check=_check,
                tiles=tiles, integer=True)


register(_rule("vnni", "vpdpbusd", has_vnni,
               "uint8 x int8 matmuls by a constant weight, int32 sums, with VNNI dot products (VPDPBUSD)"))
register(_rule("pmaddwd", "pmaddwd", lambda target: has_pmaddwd(target) and not has_vnni(target),
               "uint8 x int8 matmuls by a constant weight, int32 sums, with VPMADDWD on int16 (no VNNI)"))
