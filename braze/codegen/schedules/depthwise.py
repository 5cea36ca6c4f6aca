"""Depthwise convolutions vectorized over the output row (``depthwise``).

``depthwise`` (one input channel per output channel, or any grouped conv
whose groups are too narrow for conv2d's channel blocks): each task
computes one channel: it pads that channel's plane(s) (in cache), then each
output row segment of ``tile_w`` columns, the R x S taps unrolled,
vectorized along the row, one vector register at a time. With stride 1
and rows that are not a whole number of vectors, ``form`` 2 computes the
plane flat over the padded width instead (``dw_lower``).
"""

from __future__ import annotations

from tvm import te, tirx

from ...ir.registry import lookup
from ..lowerings.conv import _add_bias
from ..registry import anchor_attrs
from .machine import divisor_at_most, lanes, wide
from .rule import Param, Rule, register
from .tir import blocks_under, extent, is_spatial, tile_epilogue
from .conv import float_conv_2d, group
from .intrinsics import deinterleave


# -- depthwise -----------------------------------------------------------------------------------

def dw_applies(op, kernel, target) -> bool:
    """Depthwise, and any grouped conv that conv2d's channel blocks do not
    fit (fewer output channels per group than a vector: each output
    channel is then a task of its own, vectorized along the row)."""
    return float_conv_2d(op) and group(op) > 1


#: ``form`` 2: the plane computed flat over the padded width (``dw_lower``)
FLAT = 2
#: columns a row segment spans at most (a step's inputs and taps stay in registers)
MAX_SEGMENT = 64
#: the narrowest power-of-two segment worth its own vectors: one SSE register of floats
MIN_POWER_SEGMENT = 4
#: vectors a step of the flat form computes (``unroll``)
FLAT_UNROLL = 4


def _flat_fits(op, target) -> bool:
    """Stride 1, one input channel per output channel, and output rows that
    are not a whole number of vectors (28, 14, 7 columns with 8 lanes)."""
    attrs = lookup(op.name).normalize_attrs(op.attributes)
    x, w = op.operands[0].type.shape, op.operands[1].type.shape
    return (all(s == 1 for s in attrs["strides"]) and all(d == 1 for d in attrs["dilations"])
            and w[1] == 1 and w[0] == x[1] and op.results[0].type.shape[3] % lanes(target) != 0)


def _row_tile(ow: int, v: int) -> int:
    """The row segment one step computes: the whole row up to 64 columns,
    computed one vector register at a time when it is a whole number of
    vectors. A segment wider than a vector but not a whole number of them
    would be one partial-register-wide vector whose taps' weights LLVM
    broadcasts to several registers and spills; it becomes a divisor of
    the row that is a whole number of vectors, or else the widest power of
    two of at least 4 lanes (one SSE register) that divides it."""
    tile = ow if ow <= MAX_SEGMENT else divisor_at_most(ow, MAX_SEGMENT)
    if tile <= v or tile % v == 0:
        return tile
    whole = [d for d in range(v, MAX_SEGMENT + 1, v) if ow % d == 0]
    if whole:
        return max(whole)
    power = max(p for p in (1, 2, 4, 8, 16, 32, 64) if p <= v and ow % p == 0)
    return power if power >= MIN_POWER_SEGMENT else tile


def dw_defaults(op, kernel, target) -> dict | None:
    ow = op.results[0].type.shape[3]
    rows = {"tile_w": _row_tile(ow, lanes(target))}
    if _flat_fits(op, target):  # form: 2 flat over the padded width, 1 row by row (tile_w)
        return {"form": FLAT, "unroll": FLAT_UNROLL, "lanes": lanes(target), **rows}
    return rows


def dw_lower(op, params):
    """With ``form`` 2: the plane computed over the padded width, as one flat
    run of vectors (``dw_flat[n, c, i * Wp + j]``; the ``kw - 1`` columns
    past each row's end are computed and dropped), so that rows shorter than
    a whole number of vectors still use whole vectors; else the conv
    lowering."""
    if int(params["form"]) != FLAT:
        return None

    def fn(x, w, bias=None, *, strides, pads, dilations, group, pad_value=0):  # float convs: pad_value 0
        n, c, height, width = (int(d) for d in x.shape)
        kh, kw = (int(d) for d in w.shape[2:])
        pt, pl, pb, pr = (int(p) for p in pads)
        wp = width + pl + pr
        oh, ow = height + pt + pb - kh + 1, wp - kw + 1
        step = int(params["lanes"])
        rows = next(r for r in range(oh, oh + step + 1) if r * wp % step == 0)  # whole vectors
        hp = rows + kh  # the rows the last vector's taps reach, and one for the columns past the end

        def padded(b, ch, y, xx):
            inside = tirx.all(y >= pt, y < pt + height, xx >= pl, xx < pl + width)
            return tirx.if_then_else(inside, wide(x[b, ch, y - pt, xx - pl]), tirx.const(0.0, "float32"))

        pad = te.compute((n, c, hp, wp), padded, name="conv_pad", attrs={"braze.keep": 1})
        rh, rw = te.reduce_axis((0, kh), name="rh"), te.reduce_axis((0, kw), name="rw")

        def tap(b, ch, r, col):
            q = (r + rh) * wp + col + rw  # flat: a row's last taps run into the next row
            return pad[b, ch, q // wp, q % wp] * wide(w[ch, 0, rh, rw])

        acc = te.compute((n, c, rows, wp), lambda b, ch, r, col: te.sum(tap(b, ch, r, col), axis=[rh, rw]),
                         name="dw_flat", attrs=anchor_attrs())
        out = te.compute((n, c, oh, ow), lambda b, ch, i, j: acc[b, ch, i, j], name="dw_rows")
        return _add_bias(out, bias)

    return fn


def _flat_apply(sch, block, op, target, params) -> set[str]:
    v = lanes(target)
    n, k, r, col, rh, rw = sch.get_loops(block)
    q = sch.fuse(r, col)  # the plane over the padded width, as one run of whole vectors
    u = divisor_at_most(extent(sch, q) // v, int(params["unroll"]))
    qo, qu, qv = sch.split(q, [None, u, v])
    sch.reorder(n, k, qo, rh, rw, qu, qv)
    outer = sch.fuse(n, k)
    sch.parallel(outer)
    sch.unroll(rh)
    sch.unroll(rw)
    sch.unroll(qu)
    sch.vectorize(qv)
    for producer in sch.get_producers(block):
        if sch.get(producer).name_hint.startswith("conv_pad"):
            sch.compute_at(producer, outer)
            sch.vectorize(sch.get_loops(producer)[-1])
    # the rows (and the epilogue inlined into them) written per channel; a
    # pool after them (a reduction over a window of rows) stays a stage of its own
    stage = block
    while len(sch.get_consumers(stage)) == 1 and is_spatial(sch, sch.get_consumers(stage)[0]):
        stage = sch.get_consumers(stage)[0]
        sch.reverse_compute_at(stage, outer)
        sch.vectorize(sch.get_loops(stage)[-1])
    sch.decompose_reduction(block, rh)
    for b in sch.get_child_blocks(outer):
        if sch.get(b).name_hint.endswith("_init"):
            sch.vectorize(sch.get_loops(b)[-1])
    return blocks_under(sch, outer)


def dw_apply(sch, block, op, target, params) -> set[str]:
    if int(params["form"]) == FLAT:
        return _flat_apply(sch, block, op, target, params)
    tile_w = int(params["tile_w"])
    v = lanes(target)
    n, k, h, w, rc, rh, rw = sch.get_loops(block)
    wo, wi = sch.split(w, [None, tile_w])
    sch.reorder(n, k, h, wo, rc, rh, rw, wi)
    tile_epilogue(sch, block, wo, v)
    sch.unroll(rh)
    sch.unroll(rw)
    if tile_w > v and tile_w % v == 0:
        # one register's worth per vector op: a tile_w-lane vector would
        # broadcast each tap's weight to tile_w / v registers, which LLVM
        # hoists out of the row loop (9 taps x tile_w / v of them) and spills
        wv, wl = sch.split(wi, [None, v])
        sch.unroll(wv)
        wi = wl
    sch.vectorize(wi)
    outer = sch.fuse(n, k)
    sch.parallel(outer)
    # pad each channel's plane where it is used, while it is in cache
    stride = int(lookup(op.name).normalize_attrs(op.attributes)["strides"][-1])
    for producer in sch.get_producers(block):
        if sch.get(producer).name_hint.startswith("conv_pad") and len(sch.get_consumers(producer)) == 1:
            _pad_plane(sch, producer, outer, stride, v)
    sch.decompose_reduction(block, rc)
    for b in sch.get_child_blocks(outer):
        if sch.get(b).name_hint.endswith("_init"):
            sch.vectorize(sch.get_loops(b)[-1])
    return blocks_under(sch, outer)



def _phases(stride: int):
    """A row's layout split into its ``stride`` phases: column ``w`` at
    ``[w % stride, w // stride]``, so that a strided row of taps (or of
    inputs) reads contiguously."""
    return lambda n_, c_, h_, w_: (n_, c_, h_, w_ % stride, w_ // stride)


def _pad_plane(sch, pad, outer, stride: int, v: int) -> None:
    """Pad one channel's plane per task (``outer``). With a stride, the
    padded plane is stored by stride phases, and the input rows are first
    split into their phases by a copy that loads whole vectors and shuffles
    them (the ``deinterleave`` intrinsic; a strided read would be a gather,
    one scalar load per lane, 2-3 cycles per element and most of the
    kernel's time); the padding then copies contiguous runs. Not for runs
    of an odd number of columns, which the shuffles take lane by lane."""
    width = int(sch.get(pad).iter_vars[-1].dom.extent)
    source = sch.get(pad).reads[0].source
    phased = stride > 1 and width % stride == 0
    if phased:
        sch.transform_layout(pad, ("write", 0), _phases(stride))
        # iterated in that order: contiguous writes, not a scatter
        sch.transform_block_layout(pad, _phases(stride))
    sch.compute_at(pad, outer)
    in_width = int(source.shape[-1]) if len(source.shape) == 4 else 0
    run = divisor_at_most(in_width // stride, 2 * v) if phased and in_width % stride == 0 else 0
    # an odd run (7 columns a phase: a 14-wide row at stride 2) is shuffled
    # piecemeal, lane by lane: the strided reads are left to the padding copy
    if run and run % 2 == 0:
        split = sch.cache_read(pad, 0, "global", consumer_blocks=[pad])
        sch.transform_layout(split, ("write", 0), _phases(stride))
        sch.transform_block_layout(split, _phases(stride))
        sch.compute_at(split, outer)
        *_, phase, q = sch.get_loops(split)
        q_outer, q_inner = sch.split(q, [None, run])
        sch.reorder(q_outer, phase, q_inner)
        sch.tensorize(phase, deinterleave(stride, run, str(source.dtype)))
        # one phase at a time: its reads of the split rows are then contiguous
        sch.unroll(sch.get_loops(pad)[-2])
    last = sch.get_loops(pad)[-1]
    if extent(sch, last) > 1:
        sch.vectorize(last)


def dw_tiles(op, target, defaults) -> list[dict]:
    """Row segments of up to 8, 16, 32 and 64 columns (row by row only)."""
    if int(defaults.get("form", 1)) == FLAT:
        return []
    ow = op.results[0].type.shape[3]
    return [{"tile_w": divisor_at_most(ow, b)} for b in (8, 16, 32, 64)]


PARAMS = (
    Param("tile_w", "output columns a step computes, row by row (form 1)",
          "the whole row up to 64 columns, in whole vectors where it can", grid=()),
    Param("form", "1: row by row; 2: the plane flat over the padded width",
          "2 at stride 1 on rows that are no whole number of vectors, else 1", values=(1, FLAT), grid=(1,),
          unset=1),
    Param("unroll", "vectors a step of the flat form computes", FLAT_UNROLL, grid=(1, 2, 8)),
    Param("lanes", "lanes of the flat form's vectors (its rows padded to whole vectors)",
          "the target's float32 lanes", grid=()),
)

register(Rule("depthwise", ("nn.conv",), "depthwise convolution vectorized along the output row",
              dw_applies, dw_defaults, dw_apply, params=PARAMS, tiles=dw_tiles, lower=dw_lower))
