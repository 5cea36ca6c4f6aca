"""AMX: a bfloat16 ``nn.matmul`` by a constant weight on Intel AMX tiles.

Where the target has AMX (``amx-tile`` and ``amx-bf16``: Xeon since
Sapphire Rapids), a matmul whose operands are bfloat16 (the
``allow_mix_precision_bf16`` mode) multiplies in the tile unit: one
``TDPBF16PS`` adds a 16 x 32 bf16 tile of A times a 32 x 16 tile of B into
a 16 x 16 float32 tile, 16 times the multiply-adds an AVX-512 FMA does
per cycle. The output is cut in 32 x 32 blocks, each one micro-kernel (a
tensor intrinsic, intrinsics.py): its four accumulator tiles stay in the
tile registers while k runs, each step loading two A tiles (rows of the
activation as they are) and two B tiles. The weight is packed once, at
compile time, into the pair-interleaved panels a B tile reads
(``[N / 16, K / 2, 16, 2]``). The block's float32 result lands in a local
buffer, where the elementwise epilogue (bias, activation, the rounding to
bfloat16) runs on it while it is hot. Blocks are spread over the cores.
"""

from __future__ import annotations

import numpy as np
from tvm import te

from ..kernel import Packing
from .intrinsics import AMX_BLOCK, AMX_K, amx_bf16_block
from .machine import lanes
from .rule import Rule, register, weight_param
from .tir import pad_rows, tensorize_blocks

#: the ISA features a target needs for this rule (LLVM's names)
FEATURES = ("amx-tile", "amx-bf16")
#: fewer rows than this leave the tiles mostly padding: the gemm rule takes them
MIN_ROWS = 8


def has_amx(target) -> bool:
    from ...targets.isa import requirements

    return getattr(target, "kind", None) == "llvm" and set(FEATURES) <= set(requirements(target)["features"])


def applies(op, kernel, target) -> bool:
    a, b = op.operands[0].type, op.operands[1].type
    if a.dtype != "bf16" or b.dtype != "bf16" or len(a.shape) < 2 or len(b.shape) != 2:
        return False
    k, n = b.shape
    return (k > 0 and k % AMX_K == 0 and n % AMX_BLOCK == 0 and weight_param(op, kernel, rank=2) is not None
            and has_amx(target))


def profitable(op, kernel, target) -> bool:
    return op.operands[0].type.shape[-2] >= MIN_ROWS


def defaults(op, kernel, target) -> dict | None:
    return {}  # nothing to choose: the block is the tiles' (AMX_BLOCK), so a --param is an unknown parameter


def packings(op, kernel, target, params) -> dict:
    index = weight_param(op, kernel, rank=2)
    k, n = op.operands[1].type.shape

    def pack(w: np.ndarray) -> np.ndarray:  # B[r, c] -> P[c // 16, r // 2, c % 16, r % 2]
        return np.ascontiguousarray(w.reshape(k // 2, 2, n // 16, 16).transpose(2, 0, 3, 1))

    def unpack(p: te.Tensor) -> te.Tensor:
        return te.compute((k, n), lambda r, c: p[c // 16, r // 2, c % 16, r % 2], name="unpack_amx")

    return {index: Packing("amx-bf16-pairs", (n // 16, k // 2, 16, 2), pack, unpack)}


def prepare(sch, block, op, target, params) -> None:
    """Rows that do not fill the last block (197 tokens): the row
    space padded to a multiple of 32."""
    pad_rows(sch, block, op, AMX_BLOCK)


def apply(sch, block, op, target, params) -> set[str]:
    return tensorize_blocks(sch, block, op, AMX_BLOCK, AMX_BLOCK, lanes(target), amx_bf16_block)


register(Rule("amx", ("nn.matmul",), __doc__.split("\n\n")[0], applies, defaults, apply, packings, prepare,
              profitable=profitable))
