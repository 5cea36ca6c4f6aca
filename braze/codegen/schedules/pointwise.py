"""1x1 convolutions as GEMMs (``pointwise``).

``pointwise`` (1x1, any stride): a GEMM over the flattened output pixels,
vectorized along them, both dimensions padded to whole tiles (zero weight
rows in the packing; a zero-padded input panel, gathered, for pixels that
do not fill the last tile or are strided).
"""

from __future__ import annotations

import numpy as np
from tvm import te, tirx

from ...ir.registry import lookup
from ..kernel import Packing
from ..lowerings.conv import _add_bias
from ..registry import anchor_attrs
from .machine import accumulators, cores, divisor_at_most, in_half_l2, lanes, nbytes, registers, wide
from .rule import Param, Rule, register, weight_param
from .tir import blocks_under, epilogue_of, extent, is_spatial, place_at
from .conv import conv_applies, conv_defaults


# -- pointwise (1x1) as a GEMM ------------------------------------------------------------------

def pw_applies(op, kernel, target) -> bool:
    """A 1x1 conv without padding, any stride, dense or grouped (each row
    of a tile reads its own group's input channels: rows may straddle
    groups)."""
    if not conv_applies(op, kernel, target):
        return False
    attrs = lookup(op.name).normalize_attrs(op.attributes)
    _, _, r, s = op.operands[1].type.shape
    return (r, s) == (1, 1) and not any(attrs["pads"])


#: Input channels from which a 1x1 conv's tasks pack their input panels
#: (``panel`` 2): a long reduction pays for the copy; with few channels the
#: kernel is bound by writing its outputs, and a task of one tile writes
#: them in short runs
PANEL_MIN_CHANNELS = 64
#: pixel tiles a core needs before each task packs its own input panel
TILES_PER_CORE = 4
#: the most padding a 1x1 conv's pixel tiles may carry and still be a GEMM
#: along the pixels, as a fraction over the real pixels: a tenth
PADDING_NUM, PADDING_DEN = 11, 10
#: rows of a tile at most: 8 rows by two vectors (a step's broadcasts
#: compete with its loads beyond), 12 by one vector
MAX_ROWS_TWO_VECTORS, MAX_ROWS_ONE_VECTOR = 8, 12
#: pixels a block of pixel tiles spans at most (order 2): long runs of
#: each output row for the prefetcher
BLOCK_PIXELS = 512


def pw_profitable(op, kernel, target) -> bool:
    """Whether the 1x1 conv is better as a GEMM along the pixels than
    vectorized over output channels (``conv2d``): not when its pixel tiles
    are more than a tenth padding (a 7x7 or 14x14 map in 32-pixel tiles),
    the stride is 1 and conv2d's register tile, which pads nothing, holds
    more accumulators doing useful work (with AVX2's 16 registers conv2d's
    tile is the smaller one, and pointwise stays). A strided one keeps its
    gathered input, which conv2d would read strided."""
    params = pw_defaults(op, kernel, target)
    hw = op.results[0].type.shape[2] * op.results[0].type.shape[3]
    cols = -(-hw // params["tile_n"]) * params["tile_n"]
    if cols * PADDING_DEN <= hw * PADDING_NUM or not _stride_one(op):
        return True
    other = conv_defaults(op, kernel, target)
    if other is None:
        return True
    v = lanes(target)
    # accumulators doing useful work: pointwise's less its padding
    return max(1, other["tile_k"] // v) * other["tile_w"] * cols <= params["tile_m"] * (params["tile_n"] // v) * hw


def _stride_one(op) -> bool:
    return all(int(x) == 1 for x in lookup(op.name).normalize_attrs(op.attributes)["strides"])


def pw_defaults(op, kernel, target) -> dict | None:
    k = op.results[0].type.shape[1]
    v = lanes(target)
    hw = op.results[0].type.shape[2] * op.results[0].type.shape[3]
    # columns (pixels): two vectors, padded: a step loads two vectors and
    # broadcasts a few weights, where one vector wide needs twice the
    # broadcasts for the same FMAs
    tile_n = 2 * v if hw > v else v
    nv = tile_n // v
    # rows (output channels): as many as the registers hold beside the
    # vectors a step loads (6 rows of two vectors with AVX2's 16 registers,
    # 8 with AVX-512's 32); the rows are padded to a whole tile (zero
    # weights) when the channels do not divide
    tile_m = max(1, min(MAX_ROWS_TWO_VECTORS if nv == 2 else MAX_ROWS_ONE_VECTOR, accumulators(target, nv) // nv))
    if nv == 2:
        # the micro-kernel broadcasts one weight at a time into its vectors
        # (rows outside), so the tile may take the register file: 8 to 14
        # rows with AVX-512, the count that pads the channels least
        widest = accumulators(target, nv, cap=registers(target)) // nv
        tile_m = min(range(tile_m, widest + 1), key=lambda t: (-(-k // t) * t, -t))
    if k % tile_m and kernel is not None and weight_param(op, kernel) is None:  # no packed (paddable) weights
        tile_m = next((t for t in range(tile_m, 0, -1) if k % t == 0))
    # order 2: blocks of pixel tiles outside, output-channel blocks inside, so
    # that a block of input pixels stays in cache while every weight row passes
    # over it (the weights, re-read once per block, must sit in half of L2,
    # unless the block is a packed panel: below);
    # order 1: channel blocks outside (each block's weights stay in L1, the
    # whole input streams past once per block)
    c = op.operands[1].type.shape[1]
    tiles = -(-hw // tile_n)
    # panel 2 (order 2 only): each task first copies its pixel tile's input
    # (c x tile_n, strided by the map's size in NCHW) into one contiguous
    # panel that every channel block then streams through (packed A
    # panels). A task is one tile: taken when there are enough tiles to
    # spread over the cores (4 a core), and (PANEL_MIN_CHANNELS) when the
    # reduction is long enough to pay for shorter output runs. Stride-2
    # 1x1 convs keep their gathered input stage, which already makes the
    # panel
    many = tiles >= TILES_PER_CORE * cores(target)
    packs = many and _stride_one(op) and c > PANEL_MIN_CHANNELS
    # the weights as the micro-kernel reads them: a 16-bit kernel's are widened in a stage (stage_16bit)
    weights = nbytes(op.operands[1].type.with_shape((k, c)), widened=True)
    order = 2 if packs or in_half_l2(weights, target) else 1
    # order 2 walks blocks of pixel tiles: longer runs of each output row
    # than one tile gives, for the prefetcher
    block_n = divisor_at_most(tiles, max(1, BLOCK_PIXELS // tile_n)) if order == 2 else 1
    panel = 2 if packs else 1
    if packs:
        block_n = 1
    return {"tile_m": tile_m, "tile_n": tile_n, "order": order, "block_n": block_n, "block_k": c, "block_m": 1,
            "panel": panel}


def pw_packings(op, kernel, target, params) -> dict:
    index = weight_param(op, kernel)
    if index is None:
        return {}
    k, c, _, _ = op.operands[1].type.shape
    mr = int(params["tile_m"])
    rows = -(-k // mr) * mr

    def pack(w: np.ndarray) -> np.ndarray:
        w = w.reshape(k, c)
        if rows != k:  # zero rows: the last tile's padding
            w = np.concatenate([w, np.zeros((rows - k, c), w.dtype)])
        return w.reshape(rows // mr, mr, c).transpose(0, 2, 1)

    # no unpack: only this rule's lowering (pw_lower) reads the packed weights
    return {index: Packing(f"pointwise-rows-{mr}", (rows // mr, c, mr), pack, None)}


def pw_lower(op, params):
    """The 1x1 conv as the GEMM ``y[n, k, p] = sum_c W[k, c] x[n, c, p]``
    over the flattened output pixels ``p``, padded to whole tiles: rows (the
    packed weights' zero rows) and columns (a gathered input panel
    ``pw_in``, zero beyond the last pixel, when the pixels are strided or
    do not fill the last tile). ``pw_out`` drops the padding."""
    tile_m, tile_n = int(params["tile_m"]), int(params["tile_n"])
    _, k_out, oh, ow = (int(d) for d in op.results[0].type.shape)
    hw = oh * ow

    def fn(x, w, bias=None, *, strides, pads, dilations, group, pad_value=0):  # float convs: pad_value 0
        n, c, _, width = (int(d) for d in x.shape)
        sh, sw = (int(s) for s in strides)
        cols = -(-hw // tile_n) * tile_n
        packed = len(w.shape) == 3
        cg = int(w.shape[1])
        rows = int(w.shape[0]) * tile_m if packed else k_out
        kg = k_out // group

        if int(params["panel"]) == 2:
            def tile_gather(b, t, ch, lane):
                p = t * tile_n + lane
                q = tirx.min(p, hw - 1)
                value = x[b, ch, q // ow * sh, q % ow * sw]
                return value if cols == hw else tirx.if_then_else(p < hw, value, tirx.const(0.0, x.dtype))

            tiles_panel = te.compute((n, cols // tile_n, c, tile_n), tile_gather, name="pw_in")

            def read(b, ch, p):
                return tiles_panel[b, p // tile_n, ch, p % tile_n]
        elif cols == hw and sh == sw == 1:
            def read(b, ch, p):
                return x[b, ch, p // width, p % width]
        else:
            def gather(b, ch, p):
                q = tirx.min(p, hw - 1)
                value = x[b, ch, q // ow * sh, q % ow * sw]
                return value if cols == hw else tirx.if_then_else(p < hw, value, tirx.const(0.0, x.dtype))

            panel = te.compute((n, c, cols), gather, name="pw_in")

            def read(b, ch, p):
                return panel[b, ch, p]

        rc = te.reduce_axis((0, cg), name="rc")

        def weight(o, i):
            if packed:
                return w[o // tile_m, i, o % tile_m]
            return w[o, i, 0, 0]

        def channel(o):
            return tirx.min(o, k_out - 1) // kg * cg + rc if group > 1 else rc

        y = te.compute((n, rows, cols), lambda b, o, p: te.sum(wide(weight(o, rc)) * wide(read(b, channel(o), p)),
                                                               axis=rc),
                       name="conv", attrs=anchor_attrs())
        out = te.compute((n, k_out, oh, ow), lambda b, o, i, j: y[b, o, i * ow + j], name="pw_out")
        return _add_bias(out, bias)

    return fn


def pw_apply(sch, block, op, target, params) -> set[str]:
    """out[n, k, p] = sum_c W[k, c] * x[n, c, p]: a GEMM whose columns
    (the pixels) are contiguous in NCHW, so vectors run along the row of
    pixels and no layout changes."""
    tile_m, tile_n = int(params["tile_m"]), int(params["tile_n"])
    v = min(lanes(target), tile_n)
    width = int(op.results[0].type.shape[3])
    epi = epilogue_of_flat(sch, block, width)
    n, k, hw, rc = sch.get_loops(block)
    k_out, oh = (int(d) for d in op.results[0].type.shape[1:3])
    padded = extent(sch, k) != k_out or extent(sch, hw) != oh * width
    if padded and epi is not None:
        # the tile's accumulators are the GEMM's own (padded) output, in
        # registers; the epilogue runs on the tile's real rows and pixels
        sch.set_scope(block, 0, "local")
        local = tail = epi
    else:
        local = sch.cache_write(block, 0, "local")
        tail = local
        if epi is not None:
            try:
                sch.reverse_compute_inline(epi)
            except Exception:  # noqa: BLE001 (ScheduleError): its own stage at the tile
                tail = epi
    ko, ki = sch.split(k, [None, tile_m])
    jo, jv, jl = sch.split(hw, [None, tile_n // v, v])
    order = int(params["order"])
    block_n = int(params["block_n"])
    block_k = int(params["block_k"])  # input channels a K block (0 or all: no K blocks)
    inner = [rc]
    block_m = int(params["block_m"])
    if order == 1 and 0 < block_k < extent(sch, rc):
        # blocks of input channels (K blocks) and of row tiles: a task's
        # accumulators (block_m row tiles by every pixel) stay in L1 while a
        # K block passes, whose input panel (block_k x pixels) stays in L2
        # for every row tile of the task, whose weights stay in L1
        rco, rci = sch.split(rc, [None, block_k])
        kg, kb = sch.split(ko, [None, block_m])
        lead, at, inner = [n, kg, rco, kb, jo], kg, [rci]
        rc = rco
    elif order == 1:
        lead, at = [n, ko, jo], jo
    elif block_n > 1 and extent(sch, jo) % block_n == 0:
        jb, ji = sch.split(jo, [None, block_n])
        lead, at = [n, jb, ko, ji], ji
    else:
        lead, at = [n, jo, ko], ko
    sch.reorder(*lead, *inner, ki, jv, jl)
    panel = next((b for b in sch.get_producers(block) if sch.get(b).name_hint.startswith("pw_in")), None)
    packed_at = None
    if panel is not None and int(params["panel"]) == 2:
        packed_at = lead[1]
        sch.compute_at(panel, packed_at)
    sch.reverse_compute_at(local, at)
    if tail is not local and not place_at(sch, tail, at):
        tail = local
    for stage in {local, tail}:
        last = sch.get_loops(stage)[-1]
        if extent(sch, last) % v == 0 and extent(sch, last) > v:
            _, last = sch.split(last, [None, v])
        sch.vectorize(last)
    sch.unroll(ki)
    sch.unroll(jv)
    sch.vectorize(jl)
    outer = sch.fuse(*lead[:2] if len(lead) == 5 or packed_at is not None else lead[:3])
    sch.parallel(outer)
    sch.decompose_reduction(block, rc)
    for b in sch.get_child_blocks(outer):
        if sch.get(b).name_hint.endswith("_init"):
            sch.vectorize(sch.get_loops(b)[-1])
    done = blocks_under(sch, outer)
    if packed_at is not None:
        p_ = sch.get_loops(panel)[-1]
        sch.vectorize(p_)
        done.add(sch.get(panel).name_hint)
    elif panel is not None:  # the gathered input: its own parallel stage, vectorized along the pixels
        b_, c_, p_ = sch.get_loops(panel)
        sch.parallel(sch.fuse(b_, c_))
        if extent(sch, p_) % v == 0:
            sch.vectorize(sch.split(p_, [None, v])[1])
        done.add(sch.get(panel).name_hint)
    return done


def epilogue_of_flat(sch, block, width: int):
    """The anchor's epilogue (``pw_out`` and what was inlined into it), its
    pixels flattened to one axis ``h * width + w`` like the anchor's."""
    consumers = sch.get_consumers(block)
    if len(consumers) != 1 or not is_spatial(sch, consumers[0]):
        return None
    epi = consumers[0]
    if len(sch.get(epi).iter_vars) != 4:
        return None
    sch.transform_block_layout(epi, lambda n_, k_, h_, w_: (n_, k_, h_ * width + w_))
    return epilogue_of(sch, block, padded=True)


def pw_tiles(op, target, defaults) -> list[dict]:
    """Tiles of the default and 4 rows by 1 and 2 vectors, each in the three
    (order, panel) pairs; and K blocks of 256 input channels, four row
    tiles a task (cache blocking) when there are more channels."""
    v, c = lanes(target), op.operands[1].type.shape[1]
    grid = [{"tile_m": tm, "tile_n": tn, "order": order, "panel": panel}
            for tn in (2 * v, v) for tm in (defaults["tile_m"], 4) for order, panel in ((1, 1), (2, 1), (2, 2))]
    return grid + ([{"order": 1, "panel": 1, "block_k": 256, "block_m": 4}] if c > 256 else [])


def pw_check(op, target, params) -> str | None:
    if params["panel"] == 2 and params["order"] != 2:
        return "panel 2 (packed by each task) goes with order 2 (pixel tiles outside)"
    return None


PARAMS = (
    Param("tile_m", "output channels (rows) of the register tile (and of a packed weight block)",
          "as many rows as the registers hold beside a step's loads, the count that pads the channels least",
          packs=True, grid=()),
    Param("tile_n", "pixels (columns) of the register tile", "two vectors, one on a map of one vector or less",
          grid=()),
    Param("order", "1: channel blocks outside; 2: pixel tiles outside",
          "2 when the weights fit in half of L2 or the tasks pack their panels", values=(1, 2), grid=()),
    Param("block_n", "pixel tiles a block takes (order 2)", f"the most that divide the tiles up to {BLOCK_PIXELS} "
          "pixels (order 2), else 1", grid=()),
    Param("block_k", "input channels a K block takes (order 1)", "all of them (no K blocks)", off=True, grid=()),
    Param("block_m", "row tiles a task takes with K blocks (order 1)", 1, grid=()),
    Param("panel", "1: the input where it lies; 2: each task packs its pixel tile's input in a panel (order 2)",
          "2 with pixel tiles enough for the cores, stride 1 and a long reduction", values=(1, 2), grid=()),
)

register(Rule("pointwise", ("nn.conv",), "1x1 convolution as a GEMM vectorized along the pixels, packed weights",
              pw_applies, pw_defaults, pw_apply, pw_packings, profitable=pw_profitable, lower=pw_lower,
              params=PARAMS, check=pw_check, tiles=pw_tiles, stage_16bit=(1,)))
