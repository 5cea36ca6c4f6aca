"""3x3 stride-1 convolutions by Winograd's minimal filtering, F(m x m, 3x3)
with output tiles of m = 4 (or 2 where 4x4 tiles are too few, and for 16-bit
convs on maps under 56 x 56: see ``packings``).

Each m x m block of outputs (a *tile*) of each output channel comes from an
(m+2) x (m+2) patch of the padded input: ``Y = A^T [ sum_c (G g G^T) .
(B^T d B) ] A``. The element-wise products summed over input channels are
(m+2)^2 independent GEMMs (one per position ``e`` of the transformed tile):
36 * C * K multiplications per 16 outputs with F(4, 3), 16 * C * K per 4
with F(2, 3), against 9 * C * K per output for the direct convolution.

The kernel runs in four stages, all vectorized over channels:

1. ``wino_pad``: the padded input, channels last (``[n, y, x, c]``), so that
   the transforms read vectors of channels;
2. ``wino_row`` / ``wino_in``: the input transform ``V[e, n, ty, tx, c] =
   B^T d B``, one tile at a time (the row pass stays in registers);
3. ``wino_gemm`` (the anchor): ``M[e, n, ty, tx, k] = sum_c V[e, ..., c] *
   U[e, k, c]`` -- the conv2d rule's micro-kernel: ``tile_t`` tiles by
   ``tile_k`` output channels of accumulators in vector registers;
4. ``wino_out_rows`` / ``wino_out``: the output transform ``A^T M A`` plus
   the fused epilogue, run on each row of tiles while it is in cache.

``U = G g G^T`` (the weights) is computed once, at compile time, in float64
and packed as ``U[(m+2)^2, K / tile_k, C, tile_k]``. Tasks are (channel
block, row of tiles): a task's weights stay in L2 while the rows of
transformed input stream past.

Rounding grows with the tile (a few 1e-6 of the output's scale, against
about 2e-7 direct), well inside the 1e-4 that braze checks models to. The
rule is taken by default only on maps of at least ``_MIN_TILES`` tiles: on
smaller maps the transformed weights (4x or 1.8x the originals) cost more
memory traffic than the multiplications they save.
"""

from __future__ import annotations

import numpy as np
from tvm import te, tirx

from ...ir.registry import lookup
from ..kernel import Packing
from ..lowerings.conv import _add_bias
from ..registry import anchor_attrs
from .machine import FLOAT32_MATH, accumulators, divisor_at_most, lanes, pick_tile, wide
from .rule import Param, Rule, register, weight_param
from .tir import blocks_under, epilogue_of, extent

#: F(m, 3) for each output tile size m: B^T (input transform), G (weight
#: transform) and A^T (output transform); F(4, 3) at the points 0, -1, 1,
#: -2, 2 (and infinity), F(2, 3) at 0, -1, 1
MATRICES = {
    4: (np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                  [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], dtype=np.float64),
        np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                  [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], dtype=np.float64),
        np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
                  [0, 1, -1, 8, -8, 1]], dtype=np.float64)),
    2: (np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=np.float64),
        np.array([[1, 0, 0], [1 / 2, 1 / 2, 1 / 2], [1 / 2, -1 / 2, 1 / 2], [0, 0, 1]], dtype=np.float64),
        np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=np.float64)),
}
#: the fewest output tiles (per image) a conv must have to take this rule
_MIN_TILES = 49
#: the fewest output positions (per image) a 16-bit conv must have to take
#: F(4, 3) with float32 transformed weights (see ``packings``) rather than
#: F(2, 3) with 16-bit ones: 4.5x the weight bytes ((36 x 4) / (16 x 2)) for
#: 0.56x the multiplications. From 56 x 56 up, the bytes added are at most
#: 1 per 49 multiplications saved (docs/schedules.md, "16-bit kernels")
_WIDE_U_OUTPUTS = 56 * 56
#: the least C*K/(C+K) (input and output channels) at which the GEMM
#: outweighs the transforms: 32 channels in and out
_MIN_GEMM_CHANNELS = 16


def _tiles(op, m: int) -> tuple[int, int]:
    oh, ow = op.results[0].type.shape[2:4]
    return -(-oh // m), -(-ow // m)


def _attrs(op) -> dict:
    return lookup(op.name).normalize_attrs(op.attributes)


def applies(op, kernel, target) -> bool:
    x, w, out = op.operands[0].type.shape, op.operands[1].type.shape, op.results[0].type.shape
    if len(x) != (5 if _blocked(op) else 4) or op.results[0].type.dtype not in FLOAT32_MATH \
            or not all(d > 0 for d in out):
        return False
    attrs = _attrs(op)
    return (int(attrs["group"]) == 1 and tuple(w[2:]) == (3, 3) and all(s == 1 for s in attrs["strides"])
            and all(d == 1 for d in attrs["dilations"]) and weight_param(op, kernel) is not None)


def _blocked(op) -> bool:
    """A conv in the blocked layout (``nn.conv_blocked``; ``applies`` asks for a blocked input)."""
    return op.name == "nn.conv_blocked"


def _out_channels(op) -> int:
    return op.operands[1].type.shape[0]


def _tile(op) -> int | None:
    """The largest output tile that leaves at least ``_MIN_TILES`` tiles;
    for a 16-bit conv, F(4, 3) only on maps of ``_WIDE_U_OUTPUTS`` or more."""
    oh, ow = op.results[0].type.shape[2:4]
    sizes = (4, 2) if op.results[0].type.dtype == "f32" or oh * ow >= _WIDE_U_OUTPUTS else (2,)
    return next((m for m in sizes if np.prod(_tiles(op, m)) >= _MIN_TILES), None)


def profitable(op, kernel, target) -> bool:
    """Enough tiles that the transformed weights (2.25-4x the originals)
    cost less than the multiplications saved, and enough channels that the
    GEMM outweighs the transforms (C*K/(C+K) >= 16: 32 in and out)."""
    k, c = op.operands[1].type.shape[:2]
    return _tile(op) is not None and c * k >= _MIN_GEMM_CHANNELS * (c + k)


def defaults(op, kernel, target) -> dict | None:
    k = _out_channels(op)
    m = _tile(op) or 2
    tw = _tiles(op, m)[1]
    v = lanes(target)
    candidates = []
    block = op.results[0].type.shape[4] if _blocked(op) else 1
    for tile_k in (2 * v, v):
        if k % tile_k == 0 and tile_k % block == 0:
            # up to 16 accumulators (12 with AVX2's 16 registers): tile_t tiles of tile_k / v vectors
            nv = tile_k // v
            tile_t = divisor_at_most(tw, accumulators(target, nv) // nv)
            candidates.append((nv * tile_t, {"tile": m, "tile_k": tile_k, "tile_t": tile_t, "order": 1}))
    return pick_tile(candidates, target)


def check(op, target, params) -> str | None:
    k, kt = _out_channels(op), params["tile_k"]
    if k % kt:
        return f"tile_k must divide the {k} output channels, got {kt}"
    block = op.results[0].type.shape[4] if _blocked(op) else 1
    if kt % block:
        return f"tile_k must be a multiple of the layout's block ({block}) in a blocked conv, got {kt}"
    return None


def transform_weights(w: np.ndarray, m: int = 4) -> np.ndarray:
    """U[e1 * alpha + e2, k, c] = (G g[k, c] G^T)[e1, e2], in float64."""
    k, c = w.shape[:2]
    g = MATRICES[m][1]
    u = np.einsum("ar,kcrs,bs->abkc", g, w.astype(np.float64), g)
    return u.reshape(len(g) ** 2, k, c)


def packings(op, kernel, target, params) -> dict:
    index = weight_param(op, kernel)
    k, c = op.operands[1].type.shape[:2]
    kt, m = int(params["tile_k"]), int(params["tile"])
    alpha = m + 2

    def pack(w: np.ndarray) -> np.ndarray:
        u = transform_weights(w, m).reshape(alpha * alpha, k // kt, kt, c).transpose(0, 1, 3, 2)
        return u.astype(np.float32)

    # No unpack: only this rule's lowering reads the transformed weights.
    # F(4, 3)'s U is float32 whatever the conv's dtype: its output transform
    # (coefficients up to 8) amplifies a 16-bit U's rounding. F(2, 3)'s (coefficients 0 and +-1) keeps
    # the conv's dtype: its error is the direct conv's, in 1.8x the bytes.
    stored = "f32" if m == 4 else None
    return {index: Packing(f"winograd-f{m}x3-{kt}", (alpha * alpha, k // kt, c, kt), pack, None, stored)}


def _combine(matrix: np.ndarray, row, read) -> tirx.PrimExpr:
    """``sum_r matrix[row, r] * read(r)`` with ``row`` a loop variable: one
    expression per row, picked by a Select that folds away once the loop
    over rows is unrolled (only the nonzero terms are written)."""
    def term(i):
        expr = None
        for r, coef in enumerate(matrix[i]):
            if coef == 0:
                continue
            value = read(r)
            part = value if coef == 1 else (-value if coef == -1 else value * tirx.const(float(coef), "float32"))
            expr = part if expr is None else expr + part
        return expr

    expr = term(matrix.shape[0] - 1)
    for i in reversed(range(matrix.shape[0] - 1)):
        expr = tirx.Select(row == i, term(i), expr)
    return expr


def lower(x, u, bias=None, *, strides, pads, dilations, group, kt: int, m: int = 4, block: int | None = None,
          pad_value=0):
    """The Winograd convolution of NCHW ``x`` with the packed transformed
    weights ``u``: the four stages of the module's doc, as TE. With
    ``block`` (``nn.conv_blocked``), ``x`` is blocked ``(N, C/bi, H, W, bi)``
    and so is the output, ``(N, K/block, OH, OW, block)``: the transforms
    read and write vectors of contiguous channels."""
    if block is not None:
        n, cb, height, width, bi = (int(d) for d in x.shape)
        c = cb * bi

        def read(b, ch, y, xx):
            return x[b, ch // bi, y, xx, ch % bi]
    else:
        n, c, height, width = (int(d) for d in x.shape)

        def read(b, ch, y, xx):
            return x[b, ch, y, xx]
    k = int(u.shape[1]) * int(u.shape[3])
    pt, pl, pb, pr = (int(p) for p in pads)
    oh, ow = height + pt + pb - 2, width + pl + pr - 2
    bt, _, at = MATRICES[m]
    alpha = m + 2
    th, tw = -(-oh // m), -(-ow // m)  # a partial last tile computes on zeros
    keep = {"braze.keep": 1}

    def padded(b, y, xx, ch):
        inside = tirx.all(y >= pt, y < pt + height, xx >= pl, xx < pl + width)
        return tirx.if_then_else(inside, wide(read(b, ch, y - pt, xx - pl)), tirx.const(0.0, "float32"))

    d = te.compute((n, m * th + 2, m * tw + 2, c), padded, name="wino_pad", attrs=keep)
    rows = te.compute((n, th, tw, alpha, alpha, c),
                      lambda b, ty, tx, r, e2, ch: _combine(bt, e2, lambda s: d[b, m * ty + r, m * tx + s, ch]),
                      name="wino_row", attrs=keep)
    v = te.compute((alpha, alpha, n, th, tw, c),
                   lambda e1, e2, b, ty, tx, ch: _combine(bt, e1, lambda r: rows[b, ty, tx, r, e2, ch]),
                   name="wino_in", attrs=keep)
    rc = te.reduce_axis((0, c), name="rc")

    def weight(e1, e2, o, ch):
        return wide(u[e1 * alpha + e2, o // kt, ch, o % kt])

    prod = te.compute((alpha, alpha, n, th, tw, k),
                      lambda e1, e2, b, ty, tx, o: te.sum(v[e1, e2, b, ty, tx, rc] * weight(e1, e2, o, rc), axis=rc),
                      name="wino_gemm", attrs=anchor_attrs())
    cols = te.compute((n, m * th, tw, alpha, k),
                      lambda b, y, tx, e2, o: _combine(at, y % m, lambda e1: prod[e1, e2, b, y // m, tx, o]),
                      name="wino_out_rows", attrs=keep)
    if block is not None:
        def blocked_out(b, ko, y, xx, kl):
            return _combine(at, xx % m, lambda e2: cols[b, y, xx // m, e2, ko * block + kl])

        out = te.compute((n, k // block, oh, ow, block), blocked_out, name="wino_out", attrs=keep)
        if bias is None:
            return out
        return te.compute(out.shape, lambda b, ko, y, xx, kl:
                          out[b, ko, y, xx, kl] + bias[ko * block + kl].astype(out.dtype), name="bias_add")
    out = te.compute((n, k, oh, ow),
                     lambda b, o, y, xx: _combine(at, xx % m, lambda e2: cols[b, y, xx // m, e2, o]),
                     name="wino_out", attrs=keep)
    return _add_bias(out, bias)


def lowering(op, params):
    kt, m = int(params["tile_k"]), int(params["tile"])

    def fn(x, u, bias=None, **attrs):
        return lower(x, u, bias, kt=kt, m=m, **attrs)

    return fn


def _next(sch, block, prefix: str, upstream: bool = True):
    """The producer (or consumer) stage of ``block`` named ``prefix...``:
    found through the dataflow, so that two Winograd convs in one kernel
    each find their own stages."""
    around = sch.get_producers(block) if upstream else sch.get_consumers(block)
    return next(b for b in around if sch.get(b).name_hint.startswith(prefix))


def apply(sch, block, op, target, params) -> set[str]:
    tile_k, tile_t, m = int(params["tile_k"]), int(params["tile_t"]), int(params["tile"])
    v = min(lanes(target), tile_k)
    done: set[str] = set()

    # 1. the padded input, channels last: vectors of channels (gathered from NCHW)
    vin = _next(sch, block, "wino_in")
    rows = _next(sch, vin, "wino_row")
    pad = _next(sch, rows, "wino_pad")
    cols = _next(sch, block, "wino_out_rows", upstream=False)
    out = _next(sch, cols, "wino_out", upstream=False)

    b, y, xx, ch = sch.get_loops(pad)
    sch.parallel(sch.fuse(b, y))
    sch.vectorize(_vector_split(sch, ch, v)[1])
    done.add(sch.get(pad).name_hint)

    # 2. the input transform, one tile at a time; its row pass under it
    e1, e2, b, ty, tx, ch = sch.get_loops(vin)
    co, ci = _vector_split(sch, ch, v)
    lead = [b, ty, tx] + ([co] if co is not None else [])
    sch.reorder(*lead, e1, e2, ci)
    sch.compute_at(rows, lead[-1])
    sch.set_scope(rows, 0, "local")
    # unrolled: the loops whose index picks the transform's coefficients
    _, pos, lane = sch.get_loops(rows)[len(lead):]
    sch.unroll(pos)
    sch.vectorize(lane)
    sch.unroll(e1)
    sch.vectorize(ci)
    sch.parallel(sch.fuse(b, ty))
    done |= {sch.get(vin).name_hint, sch.get(rows).name_hint}

    # 3./4. tasks (channel block, row of tiles), from the output side: the
    # epilogue inlined into the output transform, which pulls in the rows
    # of the transposed transform and the batched GEMM it reads
    epi = epilogue_of(sch, out)
    if epi is not None:
        try:
            sch.reverse_compute_inline(epi)
        except Exception:  # noqa: BLE001 (ScheduleError): the epilogue stays its own stage
            pass
    if len(sch.get_loops(out)) == 5:  # blocked: (n, channel blocks, y, x, channels of a block)
        b, kob, y, xx, kl = sch.get_loops(out)
        ko, oo = sch.split(kob, [None, tile_k // extent(sch, kl)])
        ov = kl
    else:
        b, o, y, xx = sch.get_loops(out)
        ko, oi = sch.split(o, [None, tile_k])
        oo, ov = sch.split(oi, [None, v])
    ty, yi = sch.split(y, [None, m])
    tx, j = sch.split(xx, [None, m])
    order = int(params["order"])
    lead = [ko, b, ty] if order == 1 else [b, ty, ko]
    sch.reorder(*lead, yi, tx, j, oo, ov)
    outer = sch.fuse(*lead)
    sch.parallel(outer)
    sch.unroll(j)
    sch.vectorize(ov)
    sch.compute_at(cols, outer)
    sch.set_scope(cols, 0, "local")
    yl, *_, ol = sch.get_loops(cols)[1:]
    sch.unroll(yl)
    sch.vectorize(_vector_split(sch, ol, v)[1])
    sch.compute_at(block, outer)
    sch.set_scope(block, 0, "local")
    *positions, tx, o, rc = sch.get_loops(block)[1:]  # the (e1, e2) loops: extent-1 loops are gone
    kv, kl = sch.split(o, [None, v])
    txo, txi = sch.split(tx, [None, tile_t])
    sch.reorder(*positions, txo, rc, txi, kv, kl)
    sch.unroll(txi)
    sch.unroll(kv)
    sch.vectorize(kl)
    sch.decompose_reduction(block, rc)
    for blk in sch.get_child_blocks(outer):
        if sch.get(blk).name_hint.endswith("_init"):
            sch.vectorize(sch.get_loops(blk)[-1])
    return done | blocks_under(sch, outer)


def _vector_split(sch, loop, v):
    """(outer, vector) loops of ``loop`` split by ``v``; (None, loop) when
    it does not split evenly into more than one vector."""
    if extent(sch, loop) % v == 0 and extent(sch, loop) > v:
        return tuple(sch.split(loop, [None, v]))
    return None, loop


def tiles(op, target, defaults) -> list[dict]:
    """1 and 2 vectors of channels by 2, 4 and 8 tiles (or the divisors of a row's tiles under them)."""
    k, row = _out_channels(op), -(-op.results[0].type.shape[3] // int(defaults["tile"]))
    v = lanes(target)
    return [{"tile_k": tk, "tile_t": divisor_at_most(row, b)} for tk in (v, 2 * v) if k % tk == 0
            for b in (2, 4, 8)]


PARAMS = (
    Param("tile", "outputs per side of a Winograd tile: F(tile x tile, 3x3)",
          f"4, or 2 where 4x4 tiles are fewer than {_MIN_TILES} (16-bit: under 56x56 outputs)",
          values=tuple(sorted(MATRICES)), packs=True, grid=()),
    Param("tile_k", "output channels of the GEMM's register tile (and of a packed weight block)",
          "2 or 1 vectors that divide the channels, the first with accumulators enough", packs=True, grid=()),
    Param("tile_t", "tiles of a row the GEMM's register tile takes",
          "the most that divide a row's tiles and fit the registers", grid=()),
    Param("order", "1: channel blocks outside; 2: rows of tiles outside", 1, values=(1, 2), grid=(1, 2)),
)

register(Rule("winograd", ("nn.conv", "nn.conv_blocked"),
              "3x3 stride-1 convolution by Winograd F(4x4, 3x3), packed transformed "
              "weights", applies, defaults, apply, packings, profitable=profitable, lower=lowering,
              params=PARAMS, check=check, tiles=tiles))
