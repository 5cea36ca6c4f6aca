"""flash: ``nn.attention`` as one CPU kernel that never stores the scores.

A task is one batch, one key/value head and ``block_q`` query rows, for
every query head that shares that key/value head (GQA: the heads of a
group read one K/V block while it is in cache). It walks the keys in blocks
of ``block_k`` and keeps, per query row, a running max ``m``, a running sum
``l`` and an accumulator ``acc`` (``v``'s head size wide). For each tile of
``tile_q`` rows against a key block it

1. computes the scores on a register tile (``tile_q`` rows by ``key_vectors``
   vectors of keys, as gemm's micro-kernel: one broadcast q element a row,
   one K^T vector load a column vector), scaled, soft-capped and biased
   (mask, causality, window, key lengths) as they leave the registers, into
   a ``tile_q x block_k`` buffer that stays in L1;
2. updates ``m``, rescales ``l`` and ``acc`` by ``exp(m_old - m_new)`` and
   turns the scores into ``exp(s - m_new)`` (a vectorized polynomial exp);
3. adds ``P @ V`` to ``acc`` on a register tile (``tile_q`` rows by
   ``value_vectors`` vectors of ``v``'s head size).

Tiles where causality or the window masks every pair are skipped. At the
end ``y = acc / l`` (0 for a row no key may attend). K is re-laid once a
call as K^T (and V copied, both widened to float32 and padded to whole key
blocks), linear in the sequence length; nothing is of size S x S.

Parameters: ``PARAMS`` (``braze schedule --rule flash`` prints them).
"""

from __future__ import annotations

import numpy as np
import tvm

from ...ir.ops.attention import heads_of
from ..kernel import TVM_DTYPES
from .flash_kernel import Layout, flash_kernel
from .machine import ACC_BYTES, FLOAT32_MATH, accumulators, cores, l1_bytes, l2_bytes, lanes, registers
from .rule import Param, Rule, register

#: keys a block holds at most (fewer where the caches are small: ``_block_k_cap``)
MAX_BLOCK_K = 256
#: query row tiles a task holds (``block_q = tile_q * ROW_TILES``) when there are tasks enough for the cores
ROW_TILES = 8
#: tasks per core below which ``block_q`` shrinks (load balance across cores)
TASKS_PER_CORE = 4
#: the time a key block's softmax bookkeeping costs (row max and sum across
#: lanes, the rescale), in keys' worth of scores
BLOCK_OVERHEAD_KEYS = 8
#: the relative time of a score by the key vectors of its register tile:
#: fewer accumulators (16 with 2 vectors, 8 with 1) and more loads per FMA
TILE_COST = {3: 1.0, 2: 1.01, 1: 1.15}
#: rows of a register tile at most (gemm's cap)
MAX_TILE_Q = 8
#: the share of L1 a row tile's scores may take (1/4): the rest for the
#: K^T and V vectors streaming through it
SCORES_L1_SHARE = 4


def _layout(op) -> Layout:
    q, k, v = (x.type for x in op.operands[:3])
    a = op.attributes
    h = heads_of(q, k, v, a.get("q_heads", 0), a.get("kv_heads", 0))
    mask = op.operands[3].type if len(op.operands) > 3 else None
    return Layout(h, TVM_DTYPES[q.dtype], q.rank == 4, k.rank == 4, v.rank == 4,
                  mask.shape if mask is not None else None, TVM_DTYPES[mask.dtype] if mask is not None else None,
                  len(op.operands) > 4)


def applies(op, kernel, target) -> bool:
    if op.results[0].type.dtype not in FLOAT32_MATH or len(kernel.ops) != 1:
        return False
    if getattr(target, "kind", "llvm") != "llvm":
        return False
    values = op.operands
    if len({id(x) for x in values}) != len(values):  # q is k, say: one param for two operands
        return False
    mask_immediate = len(values) > 3 and id(kernel.ops[0].operands[3]) in kernel.immediates
    if any(id(x) in kernel.immediates for x in values[:3]) or len(values) > 4 and id(values[4]) in kernel.immediates:
        return False
    if mask_immediate:  # one value for every score: a finite bias or "attend" changes nothing; else not ours
        value = kernel.immediates[id(values[3])]
        if not bool(value) if values[3].type.dtype == "i1" else not np.isfinite(float(value)):
            return False
    layout = _layout(op)
    return layout.heads.kv_seq > 0 and layout.heads.q_seq > 0


def defaults(op, kernel, target) -> dict:
    layout, v = _layout(op), lanes(target)
    best = None
    for key_vectors in (3, 2, 1):
        # as many rows as the registers hold beside the key vectors and the broadcast (gemm's 8 x 3 / 4 x 3)
        tile_q = min(MAX_TILE_Q, (registers(target) - key_vectors - 1) // key_vectors)
        if tile_q < 1:
            continue
        width = key_vectors * v
        for block_k in range(width, max(width, _block_k_cap(layout, target, tile_q)) + 1, width):
            padded = -(-layout.heads.kv_seq // block_k) * block_k
            cost = padded * TILE_COST[key_vectors] * (1 + BLOCK_OVERHEAD_KEYS / block_k)
            if best is None or cost < best[0]:
                best = (cost, tile_q, key_vectors, block_k)
    _, tile_q, key_vectors, block_k = best
    value_vectors = max(n for n in (1, 2, 3, 4) if -(-layout.heads.v_head_size // v) % n == 0
                        and tile_q * n <= accumulators(target, n))
    row_tiles = ROW_TILES
    while row_tiles > 1 and _tasks(layout, tile_q * row_tiles) < TASKS_PER_CORE * cores(target):
        row_tiles //= 2
    row_tiles = min(row_tiles, -(-layout.heads.q_seq // tile_q))
    return {"tile_q": tile_q, "key_vectors": key_vectors, "value_vectors": value_vectors, "block_k": block_k,
            "block_q": tile_q * row_tiles}


def _block_k_cap(layout: Layout, target, tile_q: int) -> int:
    """The most keys a block may hold: ``MAX_BLOCK_K``, and fewer where a
    block's K^T and V (float32) would take more than half of L2 or a row
    tile's scores more than a quarter of L1 (large heads, small caches)."""
    h = layout.heads
    return min(MAX_BLOCK_K, l2_bytes(target) // 2 // (ACC_BYTES * (h.head_size + h.v_head_size)),
               l1_bytes(target) // SCORES_L1_SHARE // (ACC_BYTES * tile_q))


def _tasks(layout: Layout, block_q: int) -> int:
    return layout.heads.batch * layout.heads.kv_heads * -(-layout.heads.q_seq // block_q)


def check(op, target, params) -> str | None:
    layout, v = _layout(op), lanes(target)
    tq, kvec, vvec = params["tile_q"], params["key_vectors"], params["value_vectors"]
    bk, bq = params["block_k"], params["block_q"]
    if bk % (kvec * v) or bq % tq or -(-layout.heads.v_head_size // v) % vvec:
        return (f"block_k must be a multiple of key_vectors x {v}, block_q of tile_q, and "
                f"value_vectors must divide {-(-layout.heads.v_head_size // v)}; got {params}")
    return None


def primfunc(op, kernel, target, params):
    """The kernel's PrimFunc: flash attention for ``op`` (the kernel's only op)."""
    layout, v = _layout(op), lanes(target)
    a = {**op.attributes}
    immediate_mask = len(op.operands) > 3 and id(op.operands[3]) in kernel.immediates
    func = flash_kernel(layout, v, params, scale=float(a["scale"]), causal=bool(a.get("causal", False)),
                  offset=int(a.get("offset", 0)), left=int(a.get("window_left", -1)),
                  right=int(a.get("window_right", -1)), softcap=float(a.get("softcap", 0.0)),
                  use_mask=layout.mask_shape is not None and not immediate_mask)
    # the parameters the kernel passes: q, k, v, then the mask and key lengths it has
    keep = [0, 1, 2] + ([3] if layout.mask_shape is not None and not immediate_mask else []) \
        + ([4] if layout.kv_lengths else []) + [5]
    return tvm.tirx.PrimFunc([func.params[i] for i in keep], func.body, func.ret_type, func.attrs)


def tiles(op, target, defaults_) -> list[dict]:
    """Key blocks of 2, 4 and 8 times a score tile's width; 2, 4 and 16 row tiles a task."""
    v = lanes(target)
    return ([{"block_k": defaults_["key_vectors"] * v * n} for n in (2, 4, 8)]
            + [{"block_q": defaults_["tile_q"] * rows} for rows in (2, 4, 16)])


PARAMS = (
    Param("tile_q", "query rows of a register tile", f"as the registers hold beside the key vectors, at most "
          f"{MAX_TILE_Q}", grid=()),
    Param("key_vectors", "vectors of keys of the score tile", "3, 2 or 1, with block_k: the least estimated time",
          values=(1, 2, 3), grid=()),
    Param("value_vectors", "vectors of v's head of the P V tile",
          "the most of 1 to 4 that divide the head's vectors and fit the registers", values=(1, 2, 3, 4), grid=()),
    Param("block_k", "keys a block holds", f"a multiple of the score tile's width up to {MAX_BLOCK_K} (less "
          "where the caches are small), the least padded", grid=()),
    Param("block_q", "query rows a task holds", f"tile_q x {ROW_TILES}, halved until there are "
          f"{TASKS_PER_CORE} tasks a core", grid=()),
)


def _no_apply(sch, block, op, target, params):  # pragma: no cover - never called: the rule has ``build``
    raise AssertionError("flash writes the kernel's PrimFunc itself (Rule.build); it schedules no TE graph")


register(Rule("flash", ("nn.attention",), __doc__.split("\n\n")[0], applies, defaults, _no_apply,
              params=PARAMS, check=check, tiles=tiles, build=primfunc))
