"""Convolutions in NCHW: a direct convolution vectorized over output
channels (``conv2d``), 1x1 convolutions as GEMMs (``pointwise``), and
depthwise convolutions vectorized over the output row (``depthwise``).

``conv2d``: the weights are packed once, at compile time, as
``Wp[K / tile_k, C, R, S, tile_k]``; a tile of ``tile_k`` output channels by
``tile_w`` output columns keeps its ``tile_k / lanes * tile_w`` accumulators
in vector registers (as many as the target's register file holds beside the
weight vectors and the broadcast) while (c, r, s) run, each step broadcasting ``tile_w``
input elements and loading ``tile_k / lanes`` weight vectors. The padded
input is materialized once (its own parallel stage); the epilogue (bias,
residual, activation) runs on the tile while it is hot and writes rows of
``tile_w`` contiguous outputs. Tiles spread over (n, channel blocks, rows).
No layout change leaves the kernel: activations stay NCHW between kernels.

``pointwise`` (1x1, any stride): a GEMM over the flattened output pixels,
vectorized along them, both dimensions padded to whole tiles (zero weight
rows in the packing; a zero-padded input panel, gathered, for pixels that
do not fill the last tile or are strided).

``depthwise`` (one input channel per output channel, or any grouped conv
whose groups are too narrow for conv2d's channel blocks): each task
computes one channel: it pads that channel's plane(s) (in cache), then each
output row segment of ``tile_w`` columns, the R x S taps unrolled,
vectorized along the row.
"""

from __future__ import annotations

import numpy as np
from tvm import te, tirx

from ...ir.registry import lookup
from ..kernel import Packing
from ..lowerings.conv import _add_bias
from ..registry import anchor_attrs
from .intrinsics import deinterleave
from .base import (Rule, accumulators, blocks_under, divisor_at_most, epilogue_of, extent, is_spatial, lanes, pick_tile,
                   place_at, register, weight_param)


def _group(op) -> int:
    return int(lookup(op.name).normalize_attrs(op.attributes)["group"])


def _is_2d_f32(op) -> bool:
    return len(op.operands[0].type.shape) == 4 and op.results[0].type.dtype == "f32" and all(
        d > 0 for d in op.results[0].type.shape)


# -- dense and grouped ---------------------------------------------------------------------------

def _channels_per_group(op) -> tuple[int, int]:
    """(output channels, input channels) of one group."""
    group = _group(op)
    return op.results[0].type.shape[1] // group, op.operands[1].type.shape[1]


def conv_applies(op, kernel, target) -> bool:
    """Dense, or grouped with more than one input channel per group (a
    depthwise conv has its own rule)."""
    return _is_2d_f32(op) and (_group(op) == 1 or _channels_per_group(op)[1] > 1)


def conv_defaults(op, kernel, target) -> dict | None:
    k, ow = op.results[0].type.shape[1], op.results[0].type.shape[3]
    v = lanes(target)
    # order 2: output rows outside, channel blocks inside, so that the input
    # rows a task reads stay in L2 while every channel block passes over
    # them (all the weights, re-read once per row, must sit in L2 too);
    # order 1: channel blocks outside (each block's weights stay in cache,
    # the whole input streams past once per block)
    _, c, r, s = op.operands[1].type.shape
    ih, iw = op.operands[0].type.shape[2:]
    l2 = getattr(target, "l2_bytes", 1 << 20)
    order = 2 if k * c * r * s * 4 <= l2 // 2 < c * ih * iw * 4 else 1
    # a grouped conv: a block of channels must sit in one group (they share the input channels)
    kg = _channels_per_group(op)[0]
    candidates = []
    for tile_k, cap in ((2 * v, 12), (v, 16), (v // 2, 16), (v // 4, 16)):
        if tile_k >= 4 and kg % tile_k == 0:
            nv = max(1, tile_k // v)  # weight vectors a step loads; tile_w accumulators each
            # columns: up to 12 with AVX-512 and two vectors, 6 with AVX2 (its 16 registers)
            tile_w = divisor_at_most(ow, accumulators(target, nv, cap * nv) // nv)
            candidates.append((nv * tile_w, {"tile_k": tile_k, "tile_w": tile_w, "order": order}))
    return pick_tile(candidates, target)


def conv_packings(op, kernel, target, params) -> dict:
    index = weight_param(op, kernel)
    if index is None:
        return {}
    k, c, r, s = op.operands[1].type.shape
    kt = int(params["tile_k"])
    if k % kt:
        return {}

    def pack(w: np.ndarray) -> np.ndarray:
        return w.reshape(k // kt, kt, c, r, s).transpose(0, 2, 3, 4, 1)

    def unpack(p: te.Tensor) -> te.Tensor:
        return te.compute((k, c, r, s), lambda o, i, y, x: p[o // kt, i, y, x, o % kt], name="unpack_conv")

    return {index: Packing(f"conv-kblocks-{kt}", (k // kt, c, r, s, kt), pack, unpack)}


def _tile_epilogue(sch, block, at_loop, v, channels_last: bool = False):
    """cache the block's output in registers at ``at_loop`` and run its
    epilogue there. ``channels_last``: the accumulators are laid out
    (n, h, w, k), so that a vector of output channels is contiguous."""
    epi = epilogue_of(sch, block)
    local = sch.cache_write(block, 0, "local")
    if channels_last:
        sch.transform_layout(block, ("write", 0), lambda n, k, h, w: (n, h, w, k))
    sch.reverse_compute_at(local, at_loop)
    tail = local
    if epi is not None:
        try:
            sch.reverse_compute_inline(epi)
        except Exception:  # noqa: BLE001 (ScheduleError): its own stage at the tile
            tail = epi if place_at(sch, epi, at_loop) else local
    for stage in {local, tail}:
        last = sch.get_loops(stage)[-1]
        n = extent(sch, last)
        if n > 1:
            if n > v and n % v == 0:
                _, last = sch.split(last, [None, v])
            sch.vectorize(last)


def conv_apply(sch, block, op, target, params) -> set[str]:
    tile_k, tile_w = int(params["tile_k"]), int(params["tile_w"])
    v = min(lanes(target), tile_k)
    n, k, h, w, rc, rh, rw = sch.get_loops(block)
    ko, kv, kl = sch.split(k, [None, tile_k // v, v])
    wo, wi = sch.split(w, [None, tile_w])
    order = int(params.get("order", 1))
    if order not in (1, 2):
        raise ValueError(f"conv2d order must be 1 (channel blocks outside) or 2 (rows outside), got {order}")
    first, second = (ko, h) if order == 1 else (h, ko)
    sch.reorder(n, first, second, wo, rc, rh, rw, wi, kv, kl)
    _tile_epilogue(sch, block, wo, v, channels_last=True)
    sch.unroll(wi)
    sch.unroll(kv)
    sch.vectorize(kl)
    outer = sch.fuse(n, first, second)
    sch.parallel(outer)
    sch.decompose_reduction(block, rc)
    for b in sch.get_child_blocks(outer):
        if sch.get(b).name_hint.endswith("_init"):
            sch.vectorize(sch.get_loops(b)[-1])
    return blocks_under(sch, outer)


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


def pw_defaults(op, kernel, target) -> dict | None:
    k = op.results[0].type.shape[1]
    v = lanes(target)
    hw = op.results[0].type.shape[2] * op.results[0].type.shape[3]
    # columns (pixels): two vectors, padded (measured on Zen 3, AVX2: 6x16
    # on 49 pixels padded to 64 ran 1.7x faster than 12x8 on 56: a step
    # loads two vectors and broadcasts 6 weights, against one and 12)
    tile_n = 2 * v if hw > v else v
    nv = tile_n // v
    # rows (output channels): as many as the registers hold beside the
    # vectors a step loads (6 rows of two vectors with AVX2's 16 registers,
    # 8 with AVX-512's 32); the rows are padded to a whole tile (zero
    # weights) when the channels do not divide
    tile_m = max(1, min(8 if nv == 2 else 12, accumulators(target, nv) // nv))
    if k % tile_m and kernel is not None and weight_param(op, kernel) is None:  # no packed (paddable) weights
        tile_m = next((t for t in range(tile_m, 0, -1) if k % t == 0))
    # order 2: blocks of pixel tiles outside, output-channel blocks inside, so
    # that a block of input pixels stays in cache while every weight row passes
    # over it (the weights, re-read once per block, must sit in half of L2);
    # order 1: channel blocks outside (each block's weights stay in L1, the
    # whole input streams past once per block)
    c = op.operands[1].type.shape[1]
    order = 2 if k * c * 4 <= getattr(target, "l2_bytes", 1 << 20) // 2 else 1
    tiles = -(-hw // tile_n)
    # order 2 walks blocks of pixel tiles (up to 512 pixels): longer runs
    # of each output row than one tile gives, for the prefetcher
    block_n = divisor_at_most(tiles, max(1, 512 // tile_n)) if order == 2 else 1
    return {"tile_m": tile_m, "tile_n": tile_n, "order": order, "block_n": block_n, "block_k": c, "block_m": 1}


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

    def fn(x, w, bias=None, *, strides, pads, dilations, group):
        n, c, _, width = (int(d) for d in x.shape)
        sh, sw = (int(s) for s in strides)
        cols = -(-hw // tile_n) * tile_n
        packed = len(w.shape) == 3
        cg = int(w.shape[1])
        rows = int(w.shape[0]) * tile_m if packed else k_out
        kg = k_out // group

        if cols == hw and sh == sw == 1:
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

        y = te.compute((n, rows, cols), lambda b, o, p: te.sum(weight(o, rc) * read(b, channel(o), p), axis=rc),
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
    order = int(params.get("order", 1))
    if order not in (1, 2):
        raise ValueError(f"pointwise order must be 1 (channel blocks outside) or 2 (pixel tiles outside), got {order}")
    block_n = int(params.get("block_n", 1))
    block_k = int(params.get("block_k", extent(sch, rc)))  # input channels a K block (all: no K blocks)
    inner = [rc]
    block_m = int(params.get("block_m", 1))
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
    outer = sch.fuse(*lead[:2] if len(lead) == 5 else lead[:3])
    sch.parallel(outer)
    sch.decompose_reduction(block, rc)
    for b in sch.get_child_blocks(outer):
        if sch.get(b).name_hint.endswith("_init"):
            sch.vectorize(sch.get_loops(b)[-1])
    done = blocks_under(sch, outer)
    panel = next((b for b in sch.get_producers(block) if sch.get(b).name_hint.startswith("pw_in")), None)
    if panel is not None:  # the gathered input: its own parallel stage, vectorized along the pixels
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


# -- depthwise -----------------------------------------------------------------------------------

def dw_applies(op, kernel, target) -> bool:
    """Depthwise, and any grouped conv that conv2d's channel blocks do not
    fit (fewer output channels per group than a vector: each output
    channel is then a task of its own, vectorized along the row)."""
    return _is_2d_f32(op) and _group(op) > 1


def dw_defaults(op, kernel, target) -> dict | None:
    ow = op.results[0].type.shape[3]
    return {"tile_w": ow if ow <= 64 else divisor_at_most(ow, 64)}


def dw_apply(sch, block, op, target, params) -> set[str]:
    tile_w = int(params["tile_w"])
    v = lanes(target)
    n, k, h, w, rc, rh, rw = sch.get_loops(block)
    wo, wi = sch.split(w, [None, tile_w])
    sch.reorder(n, k, h, wo, rc, rh, rw, wi)
    _tile_epilogue(sch, block, wo, v)
    sch.unroll(rh)
    sch.unroll(rw)
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
    kernel's time); the padding then copies contiguous runs."""
    width = int(sch.get(pad).iter_vars[-1].dom.extent)
    source = sch.get(pad).reads[0].source
    phased = stride > 1 and width % stride == 0
    if phased:
        sch.transform_layout(pad, ("write", 0), _phases(stride))
        # iterated in that order: contiguous writes, not a scatter
        sch.transform_block_layout(pad, _phases(stride))
    sch.compute_at(pad, outer)
    if phased and len(source.shape) == 4 and int(source.shape[-1]) % stride == 0:
        split = sch.cache_read(pad, 0, "global", consumer_blocks=[pad])
        sch.transform_layout(split, ("write", 0), _phases(stride))
        sch.transform_block_layout(split, _phases(stride))
        sch.compute_at(split, outer)
        *_, phase, q = sch.get_loops(split)
        run = divisor_at_most(extent(sch, q), 2 * v)
        q_outer, q_inner = sch.split(q, [None, run])
        sch.reorder(q_outer, phase, q_inner)
        sch.tensorize(phase, deinterleave(stride, run, str(source.dtype)))
        # one phase at a time: its reads of the split rows are then contiguous
        sch.unroll(sch.get_loops(pad)[-2])
    last = sch.get_loops(pad)[-1]
    if extent(sch, last) > 1:
        sch.vectorize(last)


# -- each rule's grid: the alternatives `braze schedule` tries around its defaults ----------------

def conv_grid(op, target, defaults) -> list[dict]:
    k, ow = op.results[0].type.shape[1], op.results[0].type.shape[3]
    v = lanes(target)
    return [{"tile_k": tk, "tile_w": divisor_at_most(ow, b)} for tk in (v, 2 * v) if tk >= 4 and k % tk == 0
            for b in (4, 8, 14)]


def dw_grid(op, target, defaults) -> list[dict]:
    ow = op.results[0].type.shape[3]
    return [{"tile_w": divisor_at_most(ow, b)} for b in (8, 16, 32, 64)]


def pw_grid(op, target, defaults) -> list[dict]:
    v, c = lanes(target), op.operands[1].type.shape[1]
    grid = [{**defaults, "tile_m": tm, "tile_n": tn, "order": order}
            for tn in (2 * v, v) for tm in (defaults["tile_m"], 4) for order in (1, 2)]
    # K blocks of 256 input channels, four row tiles a task (cache blocking)
    return grid + ([{**defaults, "order": 1, "block_k": 256, "block_m": 4}] if c > 256 else [])


register(Rule("pointwise", ("nn.conv",), "1x1 convolution as a GEMM vectorized along the pixels, packed weights",
              pw_applies, pw_defaults, pw_apply, pw_packings, lower=pw_lower, grid=pw_grid))
register(Rule("conv2d", ("nn.conv",), "NCHW convolution vectorized over output channels, packed weights",
              conv_applies, conv_defaults, conv_apply, conv_packings, grid=conv_grid))
register(Rule("depthwise", ("nn.conv",), "depthwise convolution vectorized along the output row",
              dw_applies, dw_defaults, dw_apply, grid=dw_grid))
