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
from .machine import (ACC_BYTES, BLOCK_C, FLOAT32_MATH, accumulators, block_c, cores, divisor_at_most, element_bytes,
                      lanes, nbytes, pick_tile, rows_outside)
from .rule import Param, Rule, register, weight_param
from .tir import extent, run_tasks, tile_epilogue, vectorize_padding

#: columns a register tile spans at most: a 1x1 conv's step broadcasts
#: only from its memory operand, so it may take a 14-wide map's whole row;
#: a wider kernel's step also reloads the taps' inputs
WIDE_COLUMNS_1X1, WIDE_COLUMNS = 14, 12
#: columns of a tile one vector (or less) wide: the registers allow more,
#: but more columns than this only lengthen the broadcasts' chain
NARROW_COLUMNS = 16
#: output channels a tile holds at least: fewer than 4 lanes is no vector
MIN_TILE_K = 4
#: rows of conv2d's tasks a core needs before each task pads its own rows
ROWS_PER_CORE = 4


def group(op) -> int:
    return int(lookup(op.name).normalize_attrs(op.attributes)["group"])


def float_conv_2d(op) -> bool:
    return len(op.operands[0].type.shape) == 4 and op.results[0].type.dtype in FLOAT32_MATH and all(
        d > 0 for d in op.results[0].type.shape)


# -- dense and grouped ---------------------------------------------------------------------------

def _channels_per_group(op) -> tuple[int, int]:
    """(output channels, input channels) of one group."""
    return op.results[0].type.shape[1] // group(op), op.operands[1].type.shape[1]


def conv_applies(op, kernel, target) -> bool:
    """Dense, or grouped with more than one input channel per group (a
    depthwise conv has its own rule)."""
    return float_conv_2d(op) and (group(op) == 1 or _channels_per_group(op)[1] > 1)


def conv_defaults(op, kernel, target) -> dict | None:
    ow = op.results[0].type.shape[3]
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
    # input, does not show it). The input counted as one group's channels of one image
    _, c, r, s = op.operands[1].type.shape
    x = op.operands[0].type
    ih, iw = x.shape[2:]
    order = rows_outside(nbytes(op.operands[1].type), c * ih * iw * element_bytes(x), target)
    # a grouped conv: a block of channels must sit in one group (they share the input channels)
    kg = _channels_per_group(op)[0]
    candidates = []
    wide_cap = WIDE_COLUMNS_1X1 if (r, s) == (1, 1) else WIDE_COLUMNS
    for tile_k, cap in ((2 * v, wide_cap), (v, NARROW_COLUMNS), (v // 2, NARROW_COLUMNS), (v // 4, NARROW_COLUMNS)):
        if tile_k >= MIN_TILE_K and kg % tile_k == 0:
            nv = max(1, tile_k // v)  # weight vectors a step loads; tile_w accumulators each
            # columns: up to 12 with AVX-512 and two vectors, 6 with AVX2 (its 16 registers)
            tile_w = divisor_at_most(ow, accumulators(target, nv, cap * nv) // nv)
            candidates.append((nv * tile_w, {"tile_k": tile_k, "tile_w": tile_w, "order": order}))
    params = pick_tile(candidates, target)
    if params is not None:
        # K blocks (the machine model's ``block_c``): a task is then a whole
        # channel block, its output over the whole map in L1 (7x7 and 14x14 maps)
        oh, ow = op.results[0].type.shape[2:]
        params["block_c"] = block_c(c, 1, params["tile_k"] * oh * ow * ACC_BYTES, params["order"], target)
    return params


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


def conv_apply(sch, block, op, target, params) -> set[str]:
    tile_k, tile_w = int(params["tile_k"]), int(params["tile_w"])
    v = min(lanes(target), tile_k)
    n, k, h, w, rc, rh, rw = sch.get_loops(block)
    ko, kv, kl = sch.split(k, [None, tile_k // v, v])
    wo, wi = sch.split(w, [None, tile_w])
    order = int(params["order"])
    first, second = (ko, h) if order == 1 else (h, ko)
    block_c = int(params["block_c"]) or extent(sch, rc)
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
            extent(sch, n) * extent(sch, h) >= ROWS_PER_CORE * cores(target)
        if rows_pad:
            sch.compute_at(pad, h)
            loops = sch.get_loops(pad)
            below_h = next(i for i, loop in enumerate(loops) if sch.get(loop).same_as(sch.get(h))) + 1
            # a fill and a copy of the rows, each in vectors, rather than one
            # guarded copy, which TVM does not vectorize
            split_pad = vectorize_padding(sch, pad, loops[below_h])
        tile_at, lead = wo, ((n, first) if rows_pad else (n, first, second))
    tile_epilogue(sch, block, tile_at, v, channels_last=True)
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


def conv_tiles(op, target, defaults) -> list[dict]:
    """Tiles of 1 and 2 vectors by 4, 8 and 14 columns (or the divisors of
    the row under them), and K blocks of all, 32 and 64 channels (order 1)."""
    k, ow = op.results[0].type.shape[1], op.results[0].type.shape[3]
    c = op.operands[1].type.shape[1]
    v = lanes(target)
    tiles = [{"tile_k": tk, "tile_w": divisor_at_most(ow, b)} for tk in (v, 2 * v)
             if tk >= MIN_TILE_K and k % tk == 0 for b in (4, 8, 14)]
    sizes = sorted({c, divisor_at_most(c, BLOCK_C // 2), divisor_at_most(c, BLOCK_C)})
    blocks = [{"order": 1, "block_c": b} for b in sizes if b != defaults.get("block_c")]
    return tiles + blocks


PARAMS = (
    Param("tile_k", "output channels of the register tile (and of a packed weight block)",
          "2, 1, 1/2 or 1/4 vectors that divide a group's channels, the first with accumulators enough",
          packs=True, grid=()),
    Param("tile_w", "output columns of the register tile", "the most that divide the row and fit the registers",
          grid=()),
    Param("order", "1: channel blocks outside; 2: output rows outside",
          "2 when the weights fit in half of L2 and are fewer bytes than a group's input", values=(1, 2),
          grid=(1, 2)),
    Param("block_c", "input channels a K block takes (order 1)",
          f"up to {BLOCK_C} where a tile's output over the map fits in L1, else all", off=True, grid=()),
)

register(Rule("conv2d", ("nn.conv",), "NCHW convolution vectorized over output channels, packed weights",
              conv_applies, conv_defaults, conv_apply, conv_packings, params=PARAMS, tiles=conv_tiles))
