"""amx_int8: an 8-bit integer ``nn.matmul`` by a constant weight on Intel AMX tiles.

Where the target has AMX-INT8 (``amx-tile`` and ``amx-int8``: Xeon since
Sapphire Rapids), a quantized model's matmul (uint8 activations ``[...,
M, K]`` by an int8 weight ``[K, N]``, an exact int32 sum; the ``vnni``
rule's ops, vnni.py) multiplies in the tile unit: one ``TDPBUSD`` adds a
16 x 64 uint8 tile of A times a 64 x 16 int8 tile of B into a 16 x 16
int32 tile, 16 times the multiply-adds of an AVX-512 ``VPDPBUSD``. As
the ``amx`` rule does for bfloat16 (amx.py), the output is cut in 32 x
32 blocks, each one micro-kernel (``amx_int8_block``,
intrinsics_int8.py) whose four accumulator tiles stay in the tile
registers while k runs, each step loading two A tiles (the activation's
rows as they are) and two B tiles. The weight is packed once, at compile
time, in the ``vnni`` rule's 16-column panels (``[N / 16, K / 4, 16,
4]``: a B tile is 16 consecutive quads of k of one panel), so its bytes
are those of ``vnni``'s packing on an AVX-512 target. One call of the
micro-kernel computes ``blocks`` such blocks down one column block (the
rule's parameter), sharing the panels, the tile configuration and the
local buffer where their int32 result lands and the elementwise epilogue
(the cast to float32, the scales, the bias) runs on it: a call's fixed
costs (loading the configuration, releasing the tiles, the buffer) are a
large share of a block's, whose four accumulators take only ``K / 64``
steps. Column blocks are spread over the cores.

The reduction must be a whole number of A tiles' rows (``K % 64 == 0``):
a tile row is 64 bytes of one row of A, and padding K in the packing
alone would not do, since the last tile of A would then read past the
row's end (into the next row, harmless against zero weights, but past the
buffer's end for the last row). Other K, and fewer than ``MIN_ROWS`` rows
(mostly padding in a 32-row block), are left to ``vnni``.
"""

from __future__ import annotations

import math

import numpy as np
from tvm import te

from ..kernel import Packing
from .intrinsics import AMX_BLOCK, AMX_ROWS
from .intrinsics_int8 import AMX_INT8_K, QUAD, amx_int8_block, pack_panels, panel_index
from .machine import cores, divisor_at_most, lanes
from .rule import Param, Rule, register, weight_param
from .tir import pad_rows, tensorize_blocks

#: the ISA features a target needs for this rule (LLVM's names)
FEATURES = ("amx-tile", "amx-int8")
#: fewer rows than this leave the tiles mostly padding: the vnni rule takes them
MIN_ROWS = 8
#: the parameter ``blocks``: 32-row blocks one call computes, 1 to MAX_BLOCKS
#: (the call's local buffer holds 32 * blocks rows of 32 int32); by default
#: the most that divide the rows' blocks (so that no more rows are padded
#: than 32-row blocks need) and leave at least ``CALLS_PER_CORE`` calls a core
MAX_BLOCKS = 4
CALLS_PER_CORE = 2


def has_amx_int8(target) -> bool:
    from ...targets.isa import requirements

    return getattr(target, "kind", None) == "llvm" and set(FEATURES) <= set(requirements(target)["features"])


def applies(op, kernel, target) -> bool:
    a, b = op.operands[0].type, op.operands[1].type
    if a.dtype != "ui8" or b.dtype != "i8" or len(a.shape) < 2 or len(b.shape) != 2:
        return False
    k, n = b.shape
    return (k > 0 and k % AMX_INT8_K == 0 and n > 0 and n % AMX_BLOCK == 0 and all(d > 0 for d in a.shape)
            and weight_param(op, kernel, rank=2) is not None and has_amx_int8(target))


def profitable(op, kernel, target) -> bool:
    return op.operands[0].type.shape[-2] >= MIN_ROWS


def defaults(op, kernel, target) -> dict | None:
    *batch, m, n = op.results[0].type.shape
    row_blocks = -(-m // AMX_BLOCK)
    calls = math.prod(batch) * (n // AMX_BLOCK)  # per block of rows
    blocks = divisor_at_most(row_blocks, MAX_BLOCKS)
    while blocks > 1 and calls * (row_blocks // blocks) < CALLS_PER_CORE * cores(target):
        blocks = divisor_at_most(row_blocks, blocks - 1)
    return {"blocks": blocks}


PARAMS = (
    Param("blocks", "32-row blocks one call of the micro-kernel computes down a column block",
          f"the most up to {MAX_BLOCKS} that divide the rows' blocks and leave {CALLS_PER_CORE} calls a core",
          high=MAX_BLOCKS, grid=(1, 2, 4)),
)


def packings(op, kernel, target, params) -> dict:
    """The weight in 16-column panels of quads, ``B[r, c] = P[c // 16, r // 4, c % 16, r % 4]``:
    named as ``vnni``'s 16-lane packing, the same layout."""
    index = weight_param(op, kernel, rank=2)
    k, n = op.operands[1].type.shape

    def pack(w: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(pack_panels("vpdpbusd", AMX_ROWS, w))

    def unpack(p: te.Tensor) -> te.Tensor:
        return te.compute((k, n), lambda r, c: p[panel_index("vpdpbusd", AMX_ROWS, r, c)], name="unpack_int8")

    return {index: Packing(f"int8-vpdpbusd-{AMX_ROWS}", (n // AMX_ROWS, k // QUAD, AMX_ROWS, QUAD), pack, unpack)}


def prepare(sch, block, op, target, params) -> None:
    """Rows that do not fill the last call (200 rows: 7 blocks, the last
    of 8 rows): the row space padded to a multiple of 32 * blocks."""
    pad_rows(sch, block, op, AMX_BLOCK * int(params["blocks"]))


def apply(sch, block, op, target, params) -> set[str]:
    blocks = int(params["blocks"])

    def intrinsic(k: int, lead_a: int, lead_c: int) -> str:
        return amx_int8_block(k, blocks, lead_a, lead_c)

    return tensorize_blocks(sch, block, op, AMX_BLOCK * blocks, AMX_BLOCK, lanes(target), intrinsic)


register(Rule("amx_int8", ("nn.matmul",),
              "uint8 x int8 matmuls by a constant weight, int32 sums, on AMX tiles (TDPBUSD)", applies, defaults,
              apply, packings, prepare, profitable=profitable, params=PARAMS, integer=True))
