"""Convolutions in NCHW: a direct convolution vectorized over output
channels (``conv2d``), and depthwise convolutions vectorized over the
output row (``depthwise``).

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

``depthwise`` (one input channel per output channel, or any grouped conv
whose groups are too narrow for conv2d's channel blocks): each task
computes one channel: it pads that channel's plane(s) (in cache), then each
output row segment of ``tile_w`` columns, the R x S taps unrolled,
vectorized along the row.
"""

from __future__ import annotations

import numpy as np
from tvm import te

from ...ir.registry import lookup
from ..kernel import Packing
from .base import (Rule, accumulators, blocks_under, divisor_at_most, epilogue_of, extent, lanes, pick_tile, place_at,
                   register, weight_param)


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
    return pick_tile(candidates)


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
    """A 1x1 conv, dense or grouped (each row of a tile reads its own
    group's input channels: rows may straddle groups)."""
    if not conv_applies(op, kernel, target):
        return False
    attrs = lookup(op.name).normalize_attrs(op.attributes)
    _, _, r, s = op.operands[1].type.shape
    n, k, h, w = op.results[0].type.shape
    return (r, s) == (1, 1) and all(x == 1 for x in attrs["strides"]) and not any(attrs["pads"]) \
        and (h * w) % lanes(target) == 0


def pw_defaults(op, kernel, target) -> dict | None:
    k = op.results[0].type.shape[1]
    v = lanes(target)
    hw = op.results[0].type.shape[2] * op.results[0].type.shape[3]
    tile_n = 2 * v if hw % (2 * v) == 0 else v
    # order 2: blocks of pixel tiles outside, output-channel blocks inside, so
    # that a block of input pixels stays in cache while every weight row passes
    # over it (the weights, re-read once per block, must sit in half of L2);
    # order 1: channel blocks outside (each block's weights stay in L1, the
    # whole input streams past once per block)
    c = op.operands[1].type.shape[1]
    order = 2 if k * c * 4 <= getattr(target, "l2_bytes", 1 << 20) // 2 else 1
    # about 16 accumulators where the registers allow (AVX-512): 8 rows of two
    # vectors, or 16 rows of one; 12 at most with AVX2's 16 registers
    nv = tile_n // v
    for tile_m in ((8, 6, 4, 2) if nv == 2 else (16, 12, 8, 4, 2)):
        if k % tile_m == 0 and tile_m * nv <= accumulators(target, nv):
            # order 2 walks blocks of pixel tiles (up to 512 pixels): longer runs
            # of each output row than one tile gives, for the prefetcher
            block_n = divisor_at_most(hw // tile_n, max(1, 512 // tile_n)) if order == 2 else 1
            return {"tile_m": tile_m, "tile_n": tile_n, "order": order, "block_n": block_n}
    return None


def pw_packings(op, kernel, target, params) -> dict:
    index = weight_param(op, kernel)
    if index is None:
        return {}
    k, c, _, _ = op.operands[1].type.shape
    mr = int(params["tile_m"])
    if k % mr:
        return {}

    def pack(w: np.ndarray) -> np.ndarray:
        return w.reshape(k // mr, mr, c).transpose(0, 2, 1)

    def unpack(p: te.Tensor) -> te.Tensor:
        return te.compute((k, c, 1, 1), lambda o, i, y, x: p[o // mr, i, o % mr], name="unpack_pointwise")

    return {index: Packing(f"pointwise-rows-{mr}", (k // mr, c, mr), pack, unpack)}


def pw_apply(sch, block, op, target, params) -> set[str]:
    """out[n, k, hw] = sum_c W[k, c] * x[n, c, hw]: a GEMM whose columns
    (the pixels) are contiguous in NCHW, so vectors run along the row of
    pixels and no layout changes."""
    tile_m, tile_n = int(params["tile_m"]), int(params["tile_n"])
    v = min(lanes(target), tile_n)
    width = int(op.results[0].type.shape[3])
    epi = epilogue_of(sch, block)
    local = sch.cache_write(block, 0, "local")
    # one pixel axis (h * W + w) in every stage of the tile, so that a tile of
    # pixels that crosses a row covers exactly its pixels
    sch.transform_layout(block, ("write", 0), lambda n_, k_, h_, w_: (n_, k_, h_ * width + w_))
    sch.transform_block_layout(block, lambda n_, k_, h_, w_, c_, r_, s_: (n_, k_, h_ * width + w_, c_, r_, s_))
    tail = local
    if epi is not None:
        try:
            sch.reverse_compute_inline(epi)
        except Exception:  # noqa: BLE001 (ScheduleError): its own stage at the tile
            tail = epi
    for stage in {local, tail}:
        sch.transform_block_layout(stage, lambda n_, k_, h_, w_: (n_, k_, h_ * width + w_))
    n, k, hw, rc, rh, rw = sch.get_loops(block)
    ko, ki = sch.split(k, [None, tile_m])
    jo, jv, jl = sch.split(hw, [None, tile_n // v, v])
    order = int(params.get("order", 1))
    if order not in (1, 2):
        raise ValueError(f"pointwise order must be 1 (channel blocks outside) or 2 (pixel tiles outside), got {order}")
    block_n = int(params.get("block_n", 1))
    if order == 1:
        lead, at = [n, ko, jo], jo
    elif block_n > 1 and extent(sch, jo) % block_n == 0:
        jb, ji = sch.split(jo, [None, block_n])
        lead, at = [n, jb, ko, ji], ji
    else:
        lead, at = [n, jo, ko], ko
    sch.reorder(*lead, rc, rh, rw, ki, jv, jl)
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
    outer = sch.fuse(*lead[:3])
    sch.parallel(outer)
    sch.decompose_reduction(block, rc)
    for b in sch.get_child_blocks(outer):
        if sch.get(b).name_hint.endswith("_init"):
            sch.vectorize(sch.get_loops(b)[-1])
    return blocks_under(sch, outer)


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
            width = int(sch.get(producer).iter_vars[-1].dom.extent)
            if stride > 1 and width % stride == 0:
                # split each padded row into its stride phases, so that a strided row of taps reads contiguously
                sch.transform_layout(producer, ("write", 0), lambda n_, c_, h_, w_: (n_, c_, h_, w_ % stride,
                                                                                       w_ // stride))
            sch.compute_at(producer, outer)
            last = sch.get_loops(producer)[-1]
            if extent(sch, last) > 1:
                sch.vectorize(last)
    sch.decompose_reduction(block, rc)
    for b in sch.get_child_blocks(outer):
        if sch.get(b).name_hint.endswith("_init"):
            sch.vectorize(sch.get_loops(b)[-1])
    return blocks_under(sch, outer)


register(Rule("pointwise", ("nn.conv",), "1x1 convolution as a GEMM vectorized along the pixels, packed weights",
              pw_applies, pw_defaults, pw_apply, pw_packings))
register(Rule("conv2d", ("nn.conv",), "NCHW convolution vectorized over output channels, packed weights",
              conv_applies, conv_defaults, conv_apply, conv_packings))
register(Rule("depthwise", ("nn.conv",), "depthwise convolution vectorized along the output row",
              dw_applies, dw_defaults, dw_apply))
