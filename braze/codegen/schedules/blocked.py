"""Convolutions in the blocked layout, ``blocked`` (``nn.conv_blocked``, which
the layout pass makes: passes/layout.py).

Input and output hold a block of channels of one pixel side by side, so
that one vector is a block of output channels and one broadcast is an
input channel of one pixel, with no transposition anywhere:

- dense: a tile of ``tile_k`` channel blocks by ``tile_w`` output columns
  keeps ``tile_k * tile_w`` vector accumulators in registers while (input
  channel blocks, r, s, input channels of a block) run, each step loading
  ``tile_k`` weight vectors and broadcasting ``tile_w`` input elements,
  one column at a time (so one broadcast is live, and the tile may take
  the rest of the register file: 2 x 14 with AVX-512). The
  weights are packed once, at compile time, as
  ``Wp[M/b, C/bi, R, S, bi, b]`` (``[M/b, C, R, S, b]`` for a plain input);
- depthwise: ``tile_w`` columns of one channel block, each tap one weight
  vector and ``tile_w`` input vectors; weights ``Wp[M/b, R, S, b]``.

The tile's epilogue writes ``tile_w`` contiguous vectors. A dense conv's
padding is done per task, for the input rows its output row reads (rows
outside), or as a stage of its own (channel blocks outside); a depthwise
conv reads it in place (``pad`` 2). Tiles spread over (n, rows, channel
blocks).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from tvm import te

from ...ir.ops.layout import blocked_depthwise
from ...ir.registry import lookup
from ..kernel import Packing
from ..lowerings.layout import conv_blocked
from . import chain
from .machine import (ACC_BYTES, FLOAT32_MATH, accumulators, block_c, cores, divisor_at_most, lanes,
                      min_accumulators, nbytes, pick_tile, registers, rows_outside)
from .rule import OFF, HALF, Param, Rule, candidates, register, weight_param
from .tir import extent, run_tasks, tile_epilogue, vectorize_padding

#: columns of a depthwise tile at most: more only add input vectors to load per tap
DEPTHWISE_COLUMNS = 8
#: columns a dense tile over a plain input (a stem) may span: its
#: broadcasts come from a strided plain row, not from a block
PLAIN_INPUT_COLUMNS = 16
#: rows of a task a core needs before each task pads its own input rows
ROWS_PER_CORE = 4
#: channels of a block at most that a padding stage's innermost loop vectorizes (a plain row: left to LLVM)
PAD_VECTOR_CHANNELS = 64


def _attrs(op) -> dict:
    return lookup(op.name).normalize_attrs(op.attributes)


def blocked_applies(op, kernel, target) -> bool:
    return op.results[0].type.dtype in FLOAT32_MATH and all(d > 0 for d in op.results[0].type.shape)


def blocked_defaults(op, kernel, target, widened: bool | None = None) -> dict | None:
    """``widened``: whether the micro-kernel reads a float32 copy of the
    input (None: as ``blocked_lowering`` makes it; the rules that run this
    schedule with dot products read the input as it is)."""
    _, kb, _, ow, block = op.results[0].type.shape
    m, cg, r, s = op.operands[1].type.shape
    if blocked_depthwise(op):
        # each output column's taps load their own input vectors: one weight
        # vector and the columns' accumulators, as many as keep the FMA
        # units busy (min_accumulators: 8 with two units, 4 with Zen 4's one
        # 512-bit unit), else up to 8 where that count divides no width
        # (7, 14): more columns only add input vectors to load per tap
        cap = min(DEPTHWISE_COLUMNS, accumulators(target, 1) - 1)
        want = min(cap, min_accumulators(target))
        tile_w = divisor_at_most(ow, want)
        if tile_w < want:
            tile_w = divisor_at_most(ow, cap)
        # the padding read in place (guarded vector loads, one condition a
        # vector): a padded copy per output row copies each input row thrice
        params = {"tile_k": 1, "tile_w": tile_w, "order": 2, "pad": 2}
        rows = _chain_rows(op, kernel, target)
        return {**params, "chain": rows} if rows else params
    candidates = []
    group_blocks = kb // _attrs(op)["group"]  # output blocks a group (all of them when dense)
    # a blocked input: up to the whole register file less a step's loads (the
    # micro-kernel broadcasts one column at a time into its tile_k weight
    # vectors, so only one broadcast is live). A plain input (a stem): 16,
    # since its broadcasts come from a strided plain row
    cap = registers(target) if op.operands[0].type.rank == 5 else PLAIN_INPUT_COLUMNS
    for nb in (2, 3, 1):
        if group_blocks % nb == 0:  # a tile's blocks share their input: one group's
            tile_w = divisor_at_most(ow, accumulators(target, nb, cap=cap) // nb)
            candidates.append((nb * tile_w, {"tile_k": nb, "tile_w": tile_w}))
    params = pick_tile(candidates, target)
    if params is None:
        return None
    # rows outside (order 2) when the weights sit in half of L2 and are
    # fewer bytes than the input, as conv2d does; a 16-bit dense conv reads
    # a float32 copy of its input (``blocked_lowering``)
    x = op.operands[0].type
    widened = _widens(op, 1) if widened is None else widened
    params["order"] = rows_outside(nbytes(op.operands[1].type), nbytes(x, widened=widened), target)
    # padded rows (1): a dense conv's broadcasts are scalars, and a guard on each costs more than the copy
    params["pad"] = 1
    params["block_c"] = _block_c(op, target, params)
    rows = _chained_into(op, kernel, target)
    if rows:
        params["chain"] = rows  # computed inside the depthwise conv after it (chain.py)
    return params


def _chain_rows(op, kernel, target) -> int:
    """Rows a task of the depthwise ``op`` takes when the pointwise conv
    before it in the kernel is computed inside it (chain.py); 0: none."""
    pw = chain.source(op, kernel) if kernel is not None else None
    if pw is None or not (_takes(pw, kernel, target) and _takes(op, kernel, target)):
        return 0
    _, kb, oh, ow, block = op.results[0].type.shape
    _, _, r, _ = op.operands[1].type.shape
    stride = _attrs(op)["strides"][0]
    x = op.operands[0].type
    c = pw.operands[1].type.shape[1]
    return chain.chain_rows(oh, stride, r, x.shape[3], kb, block, 2 * c * x.shape[3] * block,
                            2 * r * r * ow * block, target)


def _takes(op, kernel, target) -> bool:
    """Whether ``blocked`` is the rule a kernel's schedule gives ``op`` (a
    bfloat16 conv goes to ``dpbf16`` where the CPU has its dot products)."""
    first = next(candidates(op, kernel, target), None)
    return first is not None and first.name == "blocked"


def _chained_into(op, kernel, target) -> int:
    """The rows of a task of the depthwise conv of the kernel that computes
    ``op`` inside it (its ``chain``); 0: none does."""
    if kernel is None:
        return 0
    return next((_chain_rows(o, kernel, target) for o in kernel.ops if o.name == "nn.conv_blocked"
                 and blocked_depthwise(o) and chain.source(o, kernel) is op), 0)


def _block_c(op, target, params) -> int:
    """Input channels a K block (the machine model's ``block_c``), in whole
    blocks of the input's channels; a plain input (a stem): all of them."""
    x = op.operands[0].type
    c = op.operands[1].type.shape[1]
    _, _, oh, ow, block = op.results[0].type.shape
    if x.rank != 5:
        return c
    return block_c(c, x.shape[4], params["tile_k"] * block * oh * ow * ACC_BYTES, params["order"], target)


def _widens(op, pad: int) -> bool:
    """Whether the conv reads a float32 copy of its 16-bit input (a dense
    one with padded rows: ``blocked_lowering``)."""
    return op.results[0].type.dtype in ("f16", "bf16") and not blocked_depthwise(op) and pad == 1


def blocked_packings(op, kernel, target, params) -> dict:
    index = weight_param(op, kernel)
    if index is None:
        return {}
    m, cg, r, s = op.operands[1].type.shape
    b = op.results[0].type.shape[4]
    x = op.operands[0].type
    if blocked_depthwise(op):
        def pack(w: np.ndarray) -> np.ndarray:
            return w.reshape(m // b, b, r, s).transpose(0, 2, 3, 1)

        def unpack(p: te.Tensor) -> te.Tensor:
            return te.compute((m, cg, r, s), lambda o, i, y, z: p[o // b, y, z, o % b], name="unpack_conv")

        return {index: Packing(f"dw-blocked-{b}", (m // b, r, s, b), pack, unpack)}
    bi = x.shape[4] if x.rank == 5 else cg

    def pack(w: np.ndarray) -> np.ndarray:
        return w.reshape(m // b, b, cg // bi, bi, r, s).transpose(0, 2, 4, 5, 3, 1)

    def unpack(p: te.Tensor) -> te.Tensor:
        return te.compute((m, cg, r, s), lambda o, i, y, z: p[o // b, i // bi, y, z, i % bi, o % b],
                          name="unpack_conv")

    return {index: Packing(f"conv-blocked-{bi}x{b}", (m // b, cg // bi, r, s, bi, b), pack, unpack)}


def blocked_apply(sch, block, op, target, params, pairs: str | None = None, group: int = 2) -> set[str]:
    """``pairs``: the name of a tensor intrinsic that takes the vector of a
    block's output channels over ``group`` input channels (a pair for
    AVX512-BF16's dot products, the ``dpbf16`` rule; four uint8 for VNNI's,
    ``vnni_conv``): the block's input channels are split in groups, the
    group innermost under the vector, which the intrinsic replaces."""
    if params["chain"] and not blocked_depthwise(op) and chain.defers(sch, block):
        return set()  # computed inside the depthwise conv that reads it
    if params["chain"] and pairs is None and blocked_depthwise(op):
        found = chain.chained(sch, block)
        if found is not None:
            return chain.chain_apply(sch, block, found, target, params)
    tile_k, tile_w = int(params["tile_k"]), int(params["tile_w"])
    order = int(params["order"])
    loops = sch.get_loops(block)
    n, k, h, w, kl = loops[:5]
    reduce = loops[5:]
    ko, kb = sch.split(k, [None, tile_k])
    wo, wi = sch.split(w, [None, tile_w])
    first, second = (ko, h) if order == 1 else (h, ko)
    # the micro-kernel: per step of the reduction, tile_k weight vectors
    # and tile_w broadcasts (dense: the block's input channels innermost,
    # outside the tile; depthwise: the taps), columns outside blocks: with
    # blocks outside, LLVM hoisted every column's broadcast and a 28-
    # accumulator tile spilled
    block_c = int(params["block_c"]) or None
    bi = extent(sch, reduce[-1]) if len(reduce) == 4 else None  # (rco, rh, rw, rci): a blocked input
    k_blocks = (order == 1 and bi is not None and block_c is not None and block_c % bi == 0
                and extent(sch, reduce[0]) * bi > block_c and (extent(sch, reduce[0]) * bi) % block_c == 0)
    pair = []
    if pairs is not None:
        rcp, r2 = sch.split(reduce[-1], [None, group])
        reduce, pair = [*reduce[:-1], rcp], [r2]
    if k_blocks:
        # K blocks: a task is a tile of channel blocks over every row, its
        # output in a local buffer; each block of block_c input channels
        # passes over every row before the next one starts
        reduce_at, rci_o = sch.split(reduce[0], [None, block_c // bi])
        sch.reorder(n, ko, reduce_at, h, wo, rci_o, *reduce[1:], wi, kb, kl, *pair)
        reduce = [reduce_at, rci_o, *reduce[1:]]
    else:
        sch.reorder(n, first, second, wo, *reduce, wi, kb, kl, *pair)
    pad = next((b for b in sch.get_producers(block) if sch.get(b).name_hint.startswith("conv_pad")), None)
    if pad is not None and int(params["pad"]) == 2:
        sch.compute_inline(pad)
        pad = None
    rows_pad = pad is not None and order == 2 and not k_blocks and \
        extent(sch, n) * extent(sch, h) >= ROWS_PER_CORE * cores(target)
    v = min(lanes(target), extent(sch, kl))
    if rows_pad:
        sch.compute_at(pad, h)
        pad_loops = sch.get_loops(pad)
        below_h = next(i for i, loop in enumerate(pad_loops) if sch.get(loop).same_as(sch.get(h))) + 1
        split_pad = vectorize_padding(sch, pad, pad_loops[below_h])
        lead = (n, first)
    else:
        split_pad = True
        lead = (n, ko) if k_blocks else (n, first, second)
        if pad is not None:  # a stage of its own: parallel over (n, channel blocks, rows)
            pad_loops = sch.get_loops(pad)
            sch.parallel(sch.fuse(*pad_loops[:3]))
            if extent(sch, pad_loops[-1]) <= PAD_VECTOR_CHANNELS:
                sch.vectorize(pad_loops[-1])
    tile_epilogue(sch, block, ko if k_blocks else wo, v)
    sch.unroll(wi)
    sch.unroll(kb)
    if pairs is None:
        sch.vectorize(kl)
    if rows_pad and not split_pad:
        sch.vectorize(sch.get_loops(pad)[-1])
    done = run_tasks(sch, block, lead, reduce[0])
    if pairs is not None:
        sch.tensorize(kl, pairs)
    return done


def blocked_tiles(op, target, defaults) -> list[dict]:
    """Tiles of 1, 2 and 4 channel blocks (1 for a depthwise conv) by up to 4, 7, 8, 14 and 28 columns."""
    ow = op.results[0].type.shape[3]
    kb = op.results[0].type.shape[1]
    return [{"tile_k": nb, "tile_w": divisor_at_most(ow, cap)}
            for nb in (1, 2, 4) if kb % nb == 0 and not (blocked_depthwise(op) and nb > 1) for cap in (4, 7, 8, 14, 28)]


def blocked_prepare(sch, block, op, target, params) -> None:
    """A depthwise conv after an anchor keeps the anchor's epilogue a stage (chain.py)."""
    if blocked_depthwise(op):
        chain.chain_prepare(sch, block)


def blocked_lowering(op, params):
    """The conv's own lowering, except that a 16-bit dense conv reads a
    float32 copy of its input, made in the pass that pads it (``conv_pad``,
    a plain copy where there is no padding) with padded rows (``pad=1``,
    the default): the micro-kernel broadcasts its input one value at a
    time, and converting at each broadcast (F16C's ``vcvtph2ps``, a shift
    for bfloat16) competes with the FMAs for the vector pipes, once per
    tile of output channels (docs/schedules.md, "16-bit kernels")."""
    widen = _widens(op, int(params["pad"]))

    def fn(x, w, bias=None, **attrs):
        return conv_blocked(x, w, bias, widen=widen, **attrs)

    return fn


#: The parameters of ``blocked`` (and of the rules that run its schedule
#: with another instruction: dpbf16, vnni_conv, pmaddwd_conv).
TILE_K = Param("tile_k", "channel blocks (vectors of output channels) of the register tile",
               "1 for a depthwise conv; else 2, 3 or 1 blocks, the first with accumulators enough", grid=())
TILE_W = Param("tile_w", "output columns of the register tile",
               "the most that divide the row and fit the registers beside a step's loads", grid=())
ORDER = Param("order", "1: channel blocks outside; 2: output rows outside",
              "2 when the weights fit in half of L2 and are fewer bytes than the input", values=(1, 2),
              grid=(1, 2))
PAD = Param("pad", "1: a padded copy of the input rows; 2: guarded reads of the input in place",
            "1 for a dense conv, 2 for a depthwise one", values=(1, 2), grid=(1, 2))
BLOCK = Param("block_c", "input channels a K block takes (order 1)",
              "whole input blocks up to 64 channels where a tile's output over the map fits in L1, else all",
              off=True, grid=())
CHAIN = Param("chain", "output rows a task of a depthwise conv takes while computing the pointwise conv "
              "before it (chain.py)", "the row count of least estimated time whose buffer fits in half of L2",
              off=True, grid=(OFF, HALF))
PARAMS = (TILE_K, TILE_W, ORDER, PAD, BLOCK, CHAIN)
#: the same for a schedule whose instruction broadcasts a word of the
#: input (dpbf16's pair, VNNI's quad): a padded copy only, a guarded read
#: being no word in memory
PADDED_COPY = replace(PAD, meaning="1: a padded copy of the input rows (the only one)", default=1, values=(1,),
                      grid=())
PADDED_COPY_PARAMS = tuple(PADDED_COPY if p is PAD else p for p in PARAMS)

register(Rule("blocked", ("nn.conv_blocked",),
              "convolution in the blocked (NCHWc) layout: vectors of output channels, packed weights",
              blocked_applies, blocked_defaults, blocked_apply, blocked_packings, params=PARAMS,
              tiles=blocked_tiles, lower=blocked_lowering, prepare=blocked_prepare))
