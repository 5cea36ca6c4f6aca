"""Convolutions in NCHW, ``conv2d``: a direct convolution vectorized over output
channels. The weights are packed once, at compile time, as
``Wp[K / tile_k, C, R, S, tile_k]``; a tile of ``tile_k`` output channels by
``tile_w`` output columns keeps its ``tile_k / lanes * tile_w`` accumulators
in vector registers (as many as the target's register file holds beside the
weight vectors and the broadcast) while (c, r, s) run, each step broadcasting ``tile_w``
input elements and loading ``tile_k / lanes`` weight vectors. The padded
input is materialized once (its own parallel stage); the epilogue (bias,
residual, activation) runs on the tile while it is hot and writes rows of
``tile_w`` contiguous outputs. Tiles spread over (n, channel blocks, rows).
The kernel reads and writes NCHW; the convs of a blocked chain (the
layout pass) go to ``blocked`` (blocked.py).

(``pointwise`` in pointwise.py takes the 1x1 convs, ``depthwise`` in depthwise.py
the depthwise ones.)
"""

from __future__ import annotations

import numpy as np
from tvm import te

from ...ir.registry import lookup
from ..kernel import Packing
from .rule import FLOAT32_MATH, Rule, accumulators, divisor_at_most, lanes, pick_tile, register, weight_param
from .tir import blocks_under, epilogue_of, extent, place_at, vectorize_padding


def _group(op) -> int:
    return int(lookup(op.name).normalize_attrs(op.attributes)["group"])


def _is_2d_float(op) -> bool:
    return len(op.operands[0].type.shape) == 4 and op.results[0].type.dtype in FLOAT32_MATH and all(
        d > 0 for d in op.results[0].type.shape)


# -- dense and grouped ---------------------------------------------------------------------------

def _channels_per_group(op) -> tuple[int, int]:
    """(output channels, input channels) of one group."""
    group = _group(op)
    return op.results[0].type.shape[1] // group, op.operands[1].type.shape[1]


def conv_applies(op, kernel, target) -> bool:
    """Dense, or grouped with more than one input channel per group (a
    depthwise conv has its own rule)."""
    return _is_2d_float(op) and (_group(op) == 1 or _channels_per_group(op)[1] > 1)


def conv_defaults(op, kernel, target) -> dict | None:
    k, ow = op.results[0].type.shape[1], op.results[0].type.shape[3]
    v = lanes(target)
    # order 2: output rows outside, channel blocks inside, so that the input
    # rows a task reads stay in L2 while every channel block passes over
    # them (all the weights, re-read once per row, must sit in L2 too);
    # order 1: channel blocks outside (each block's weights stay in cache,
    # the whole input streams past once per block). Order 2 whenever the
    # weights fit and the input is the larger: its tasks split the map
    # between the cores, so that each core reads the rows it (or the kernel
    # before, split the same way) has in its own cache, where order 1 makes
    # every core read the whole input, half of it from the other core's
    # cache (a kernel timed alone, every core's cache holding the whole
    # input, does not show it)
    _, c, r, s = op.operands[1].type.shape
    ih, iw = op.operands[0].type.shape[2:]
    l2 = getattr(target, "l2_bytes", 1 << 20)
    weights, inputs = k * c * r * s * 4, c * ih * iw * 4
    order = 2 if weights <= l2 // 2 and weights < inputs else 1
    # a grouped conv: a block of channels must sit in one group (they share the input channels)
    kg = _channels_per_group(op)[0]
    candidates = []
    # a 1x1 conv's step broadcasts only from its memory operand: up to 14
    # columns (a 14-wide map's whole row)
    wide_cap = 14 if (r, s) == (1, 1) else 12
    for tile_k, cap in ((2 * v, wide_cap), (v, 16), (v // 2, 16), (v // 4, 16)):
        if tile_k >= 4 and kg % tile_k == 0:
            nv = max(1, tile_k // v)  # weight vectors a step loads; tile_w accumulators each
            # columns: up to 12 with AVX-512 and two vectors, 6 with AVX2 (its 16 registers)
            tile_w = divisor_at_most(ow, accumulators(target, nv, cap * nv) // nv)
            candidates.append((nv * tile_w, {"tile_k": tile_k, "tile_w": tile_w, "order": order}))
    params = pick_tile(candidates, target)
    if params is not None:
        params["block_c"] = _block_c(op, target, params)
    return params


#: Input channels a K block of ``conv2d`` (``block_c``) takes at most.
BLOCK_C = 64


def _block_c(op, target, params) -> int:
    """Input channels a K block, for order 1 on a map whose output channel
    block fits in L1 (7x7 and 14x14 maps). A task is then a whole channel
    block: each block of input channels passes over all its rows before
    the next starts, so that the weights, which arrive cold from memory in
    a model (ResNet-50's last stages: 1-9 MB a conv), stream while the
    tiles compute, rather than the first row of each block waiting on
    them. In the model (Intel Xeon, AVX-512, 2 threads) ResNet-50's convs
    on 14x14 and 7x7 maps (1x1 and 3x3, strided or not) ran 1.04-1.17x
    faster and the whole model 5%; alone, with warm weights, about the
    same. Else all of them (no K blocks)."""
    k, c, r, s = op.operands[1].type.shape
    oh, ow = op.results[0].type.shape[2:]
    l1 = getattr(target, "l1d_bytes", 32 << 10) or (32 << 10)
    if params["order"] != 1 or params["tile_k"] * oh * ow * 4 > l1:
        return c
    block = divisor_at_most(c, BLOCK_C)
    return block if 16 <= block < c else c


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
    block_c = int(params.get("block_c", extent(sch, rc)))
    rows_pad = split_pad = False
    if order == 1 and extent(sch, rc) % block_c == 0 and extent(sch, rc) > block_c:
        # K blocks: a task is a whole channel block, its output (all rows) in
        # a local buffer; each block of block_c input channels passes over
        # every row before the next one starts (see conv_defaults)
        reduce_at, rci = sch.split(rc, [None, block_c])
        sch.reorder(n, ko, reduce_at, h, wo, rci, rh, rw, wi, kv, kl)
        tile_at, lead = ko, (n, ko)
    else:
        reduce_at = rc
        sch.reorder(n, first, second, wo, rc, rh, rw, wi, kv, kl)
        # with rows outside (order 2), each task pads the input rows its output
        # row reads, while they are in cache, rather than a stage of its own
        # writing the whole padded input first (in a model that input arrives
        # cold); the tasks are then rows, enough of them to spread over the cores
        pad = next((b for b in sch.get_producers(block) if sch.get(b).name_hint.startswith("conv_pad")), None)
        rows_pad = pad is not None and order == 2 and \
            extent(sch, n) * extent(sch, h) >= 4 * max(1, getattr(target, "num_cores", 1) or 1)
        if rows_pad:
            sch.compute_at(pad, h)
            loops = sch.get_loops(pad)
            below_h = next(i for i, loop in enumerate(loops) if sch.get(loop).same_as(sch.get(h))) + 1
            # a fill and a copy of the rows, each in vectors, rather than one
            # guarded copy, which TVM does not vectorize
            split_pad = vectorize_padding(sch, pad, loops[below_h])
        tile_at, lead = wo, ((n, first) if rows_pad else (n, first, second))
    _tile_epilogue(sch, block, tile_at, v, channels_last=True)
    sch.unroll(wi)
    sch.unroll(kv)
    sch.vectorize(kl)
    if rows_pad and not split_pad:
        last = sch.get_loops(pad)[-1]
        if extent(sch, last) > v:
            sch.vectorize(sch.split(last, [None, v])[1])
        else:
            sch.vectorize(last)
    return run_tasks(sch, block, lead, reduce_at)


def run_tasks(sch, block, lead, reduce_at) -> set[str]:
    """The tail of the direct convolutions' schedules (``conv2d``,
    ``blocked``): the ``lead`` loops fused into one parallel loop of tasks,
    the reduction's init split off at ``reduce_at`` and vectorized. Returns
    the blocks the tasks hold."""
    outer = sch.fuse(*lead)
    sch.parallel(outer)
    sch.decompose_reduction(block, reduce_at)
    for b in sch.get_child_blocks(outer):
        if sch.get(b).name_hint.endswith("_init"):
            sch.vectorize(sch.get_loops(b)[-1])
    return blocks_under(sch, outer)


def conv_grid(op, target, defaults) -> list[dict]:
    k, ow = op.results[0].type.shape[1], op.results[0].type.shape[3]
    c = op.operands[1].type.shape[1]
    v = lanes(target)
    tiles = [{"tile_k": tk, "tile_w": divisor_at_most(ow, b)} for tk in (v, 2 * v) if tk >= 4 and k % tk == 0
             for b in (4, 8, 14)]
    blocks = [{**defaults, "order": 1, "block_c": b} for b in {c, divisor_at_most(c, 32), divisor_at_most(c, BLOCK_C)}
              if b != defaults.get("block_c")]
    return tiles + blocks



register(Rule("conv2d", ("nn.conv",), "NCHW convolution vectorized over output channels, packed weights",
              conv_applies, conv_defaults, conv_apply, conv_packings, grid=conv_grid, packed_by=("tile_k",)))
