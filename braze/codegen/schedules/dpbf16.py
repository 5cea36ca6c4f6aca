"""dpbf16: bfloat16 matmuls and blocked convs by a constant weight with AVX512-BF16 dot products.

Where the target has AVX512-BF16 (``avx512bf16``: AMD Zen 4 and later,
Intel Cooper Lake and Sapphire Rapids), ``VDPBF16PS`` adds, to 16 float32
accumulators, the dot products of a broadcast pair of bfloat16 with 16
pairs: twice the multiply-adds of a float32 FMA on the same register.

- a matmul whose operands are bfloat16 (the ``allow_mix_precision_bf16``
  mode), where there is no AMX (the ``amx`` rule takes it there): the
  output is cut in register blocks of ``rows`` x ``16 * vectors`` (8 x 48
  with 32 registers: 24 accumulators, 3 panel vectors, 1 broadcast), each
  one micro-kernel over the whole k (a tensor intrinsic, intrinsics.py)
  that broadcasts a pair of A (a row at k, k+1) and loads a vector of 16
  column pairs of B. The weight is packed once, at compile time, into the
  pair-interleaved panels the AMX rule uses too (``[N / 16, K / 2, 16,
  2]``). Column blocks are outside row blocks, so a block's panel stays in
  L2 while the rows pass; the block's float32 result lands in a local
  buffer where the epilogue (bias, activation, the rounding to bfloat16)
  runs on it. Blocks are spread over the cores.
- a dense or grouped conv in the blocked layout, where a pixel's channels
  lie side by side, so that a pair of input channels is one 32-bit word:
  the ``blocked`` rule's schedule and parameters, with each input block's
  channels split in pairs and the pair innermost under the vector of
  output channels, which one ``VDPBF16PS`` computes. The weight is packed
  as ``[M/16, C/bi, R, S, bi/2, 16, 2]``.
"""

from __future__ import annotations

import numpy as np
from tvm import te

from ...ir.ops.layout import blocked_depthwise
from ..kernel import Packing
from . import blocked
from .amx import has_amx
from .amx import packings as pair_panels
from .intrinsics import DPBF16_LANES, dpbf16_block, dpbf16_vector
from .machine import lanes, registers
from .rule import Param, Rule, register, weight_param
from .tir import pad_rows, tensorize_blocks

#: the ISA feature a target needs for this rule (LLVM's name)
FEATURE = "avx512bf16"
#: rows of a register block at most (as the float32 gemm's tiles)
MAX_ROWS = 8


def has_dpbf16(target) -> bool:
    from ...targets.isa import requirements

    return getattr(target, "kind", None) == "llvm" and FEATURE in requirements(target)["features"]


def native_bf16_rule(target) -> str | None:
    """The rule a bfloat16 matmul by a weight takes on ``target`` where its
    shape suits it: ``amx``, else ``dpbf16``, else None (``gemm``, float32
    arithmetic on widened operands)."""
    return "amx" if has_amx(target) else "dpbf16" if has_dpbf16(target) else None


def _block(op, target) -> tuple[int, int]:
    """(rows, vectors) of the register block: the widest panel (3, 2 or 1
    vectors of 16 columns) that divides the columns, and the rows whose
    accumulators fit the registers beside the panel vectors and the
    broadcast (the machine model, docs/schedules.md)."""
    m, n = op.results[0].type.shape[-2], op.results[0].type.shape[-1]
    vectors = next(v for v in (3, 2, 1) if n % (v * DPBF16_LANES) == 0)
    rows = max(2, min(MAX_ROWS, (registers(target) - vectors - 1) // vectors, m))
    return rows, vectors


def _matmul_applies(op, kernel, target) -> bool:
    a, b = op.operands[0].type, op.operands[1].type
    if a.dtype != "bf16" or b.dtype != "bf16" or len(a.shape) < 2 or len(b.shape) != 2:
        return False
    k, n = b.shape
    # one row (a vector times the weight) is the gemm rule's: the block's row loop would vanish
    return (k > 0 and k % 2 == 0 and n % DPBF16_LANES == 0 and a.shape[-2] >= 2
            and weight_param(op, kernel, rank=2) is not None and lanes(target) == DPBF16_LANES
            and has_dpbf16(target) and not has_amx(target))


def _matmul_defaults(op, kernel, target) -> dict | None:
    rows, vectors = _block(op, target)
    return {"rows": rows, "vectors": vectors}


def _matmul_prepare(sch, block, op, target, params) -> None:
    """Rows that do not fill the last block (197 tokens): the row space
    padded to a multiple of ``rows``."""
    pad_rows(sch, block, op, int(params["rows"]))


def _matmul_apply(sch, block, op, target, params) -> set[str]:
    rows, vectors = int(params["rows"]), int(params["vectors"])

    def intrinsic(k: int, lead_a: int, lead_c: int) -> str:
        return dpbf16_block(rows, vectors, k, lead_a, lead_c)

    return tensorize_blocks(sch, block, op, rows, vectors * DPBF16_LANES, lanes(target), intrinsic)


def _matmul_tiles(op, target, defaults) -> list[dict]:
    """Blocks of 4, 6 and 8 rows by 1, 2 and 3 vectors that divide the columns and fit the registers."""
    n = op.results[0].type.shape[-1]
    return [{"rows": r, "vectors": v} for v in (1, 2, 3) if n % (v * DPBF16_LANES) == 0 for r in (4, 6, 8)
            if r * v + v + 1 <= registers(target)]


# --- blocked convolutions -------------------------------------------------------------------------
def _conv_applies(op, kernel, target) -> bool:
    """A dense or grouped (not depthwise) conv in the blocked layout whose
    input, weight and output blocks are bfloat16, 16 channels a block on
    both sides (or an even input block), by a constant weight."""
    x, w, out = op.operands[0].type, op.operands[1].type, op.results[0].type
    return (x.dtype == "bf16" and w.dtype == "bf16" and x.rank == 5 and x.shape[4] % 2 == 0
            and out.shape[4] == DPBF16_LANES and not blocked_depthwise(op)
            and weight_param(op, kernel) is not None and lanes(target) == DPBF16_LANES and has_dpbf16(target)
            and blocked.blocked_applies(op, kernel, target))


def _conv_packings(op, kernel, target, params) -> dict:
    """The weight as ``[M/16, C/bi, R, S, bi/2, 16, 2]``: per input block
    and tap, each pair of input channels a vector of 16 output channels x
    the pair (``W[o, i] = P[o // 16, i // bi, y, z, i % bi // 2, o % 16, i % 2]``)."""
    index = weight_param(op, kernel)
    m, cg, r, s = op.operands[1].type.shape
    bi, b = op.operands[0].type.shape[4], DPBF16_LANES

    def pack(w: np.ndarray) -> np.ndarray:
        return w.reshape(m // b, b, cg // bi, bi // 2, 2, r, s).transpose(0, 2, 5, 6, 3, 1, 4)

    def unpack(p: te.Tensor) -> te.Tensor:
        return te.compute((m, cg, r, s), lambda o, i, y, z: p[o // b, i // bi, y, z, i % bi // 2, o % b, i % 2],
                          name="unpack_conv")

    return {index: Packing(f"conv-dpbf16-{bi}x{b}", (m // b, cg // bi, r, s, bi // 2, b, 2), pack, unpack)}


def _conv_apply(sch, block, op, target, params) -> set[str]:
    out_rank = len(op.results[0].type.shape)
    return blocked.blocked_apply(sch, block, op, target, params, pairs=dpbf16_vector(5, 7, out_rank))


# --- the rule: one instruction, two ops -------------------------------------------------------------
def _conv(op) -> bool:
    return op.name == "nn.conv_blocked"


def applies(op, kernel, target) -> bool:
    return _conv_applies(op, kernel, target) if _conv(op) else _matmul_applies(op, kernel, target)


def defaults(op, kernel, target) -> dict | None:
    if _conv(op):
        return blocked.blocked_defaults(op, kernel, target, widened=False)  # the pairs are read as bfloat16
    return _matmul_defaults(op, kernel, target)


def packings(op, kernel, target, params) -> dict:
    return _conv_packings(op, kernel, target, params) if _conv(op) else pair_panels(op, kernel, target, params)


def prepare(sch, block, op, target, params) -> None:
    if not _conv(op):
        _matmul_prepare(sch, block, op, target, params)


def apply(sch, block, op, target, params) -> set[str]:
    return _conv_apply(sch, block, op, target, params) if _conv(op) else _matmul_apply(sch, block, op, target, params)


def tiles(op, target, defaults) -> list[dict]:
    """A matmul's blocks of 4, 6 and 8 rows by 1 to 3 vectors; a conv's, ``blocked``'s tiles."""
    return (blocked.blocked_tiles if _conv(op) else _matmul_tiles)(op, target, defaults)


def check(op, target, params) -> str | None:
    n = op.results[0].type.shape[-1]
    if not _conv(op) and "vectors" in params and n % (params["vectors"] * DPBF16_LANES):
        return f"16 x vectors must divide the {n} columns, got vectors={params['vectors']}"
    return None


#: a matmul's parameters, then a conv's (``blocked``'s, with a padded copy of the input only)
PARAMS = (
    Param("rows", "rows of a matmul's register block", f"as the registers allow, at most {MAX_ROWS}", low=2,
          grid=()),
    Param("vectors", "16-column vectors of a matmul's register block", "3, 2 or 1, the widest dividing the columns",
          grid=()),
    *blocked.PADDED_COPY_PARAMS,
)

register(Rule("dpbf16", ("nn.matmul", "nn.conv_blocked"), __doc__.split("\n\n")[0], applies, defaults, apply,
              packings, prepare, params=PARAMS, check=check, tiles=tiles))
