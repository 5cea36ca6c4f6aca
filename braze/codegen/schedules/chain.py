"""A pointwise conv computed inside the depthwise conv that reads it (the
expansion and depthwise convs of an inverted residual block, one kernel:
the ``conv_depthwise`` fusion rule).

Scheduled apart, the expansion writes its whole output (6x the block's
input channels, megabytes on a 112x112 map) and the depthwise conv reads
it back from L3 or DRAM. Chained, a task of the depthwise conv
(``rows`` output rows of one channel block) first computes the expansion's
rows it reads, for that channel block, into a buffer of its own, and the
depthwise conv reads them from L1/L2. Tasks of neighbouring rows both
compute the rows between them (``k - s`` of them for a k x k kernel of
stride s), so ``rows`` is picked by the machine model (``chain_rows``):
among the row counts whose buffer fits in half of L2, the one of least
estimated time, recomputed rows and the tasks' imbalance over the cores
counted (docs/schedules.md, "Chained convs").

The expansion's micro-kernel is ``blocked``'s for one output channel block:
``tile_w`` columns of accumulators over the input channels, its epilogue
(bias, activation) applied where the tile is written to the buffer.
"""

from __future__ import annotations

import math

from ...ir.ops.layout import blocked_pointwise
from ...ir.registry import Kind, lookup
from .machine import ACC_BYTES, accumulators, cores, divisor_at_most, in_half_l2, lanes, registers
from .tir import extent, is_spatial, run_tasks, tile_epilogue

#: The annotation ``chain_prepare`` puts on the stage the depthwise conv
#: reads (the expansion's epilogue), so that inlining keeps it a stage.
KEEP = "braze.keep"
#: stages between the two convs a walk looks through at most (pads, casts,
#: a bias and an activation: a real chain has a handful)
MAX_STAGES = 8
#: loops of a blocked dense conv block: n, k, h, w, kl, rco, rh, rw, rci
BLOCKED_CONV_LOOPS = 9
#: how much cheaper a row count must be to beat a smaller one (fewer rows
#: give more tasks to share among the cores; a near tie is no reason to drop them)
TIE = 0.999


def source(op, kernel):
    """The pointwise conv of ``kernel`` that the depthwise ``op`` reads
    through elementwise ops that nothing else reads (its bias, its
    activation, SiLU's ``x * sigmoid(x)``): a 1x1, stride-1, unpadded dense
    ``nn.conv_blocked`` reading a blocked input from outside the kernel,
    of ``op``'s dtype. None when there is none."""
    inside = {id(o) for o in kernel.ops}
    returned = {id(v) for v in kernel.results}
    between, anchors, stack = {}, {}, [op.operands[0]]
    while stack:
        v = stack.pop()
        p = v.owner
        if p is None or id(p) not in inside:
            continue  # a param: a bias, a constant
        if id(v) in returned:
            return None
        if p.name == "nn.conv_blocked":
            anchors[id(p)] = p
        elif lookup(p.name).kind not in (Kind.ELEMWISE, Kind.BROADCAST):
            return None
        elif id(p) not in between:
            between[id(p)] = p
            stack.extend(p.operands)
    if len(anchors) != 1:
        return None
    pw = next(iter(anchors.values()))
    readers = set(between) | {id(op)}
    if any(id(u) not in readers for o in [pw, *between.values()] for r in o.results for u in r.users()):
        return None
    x = pw.operands[0]
    outside = x.owner is None or id(x.owner) not in inside
    return pw if blocked_pointwise(pw) and outside and pw.results[0].type.dtype == op.results[0].type.dtype else None


def _walk_up(sch, block):
    """The stages between a depthwise conv and the anchor before it:
    (padding stage or None, the epilogue stage or None, the pointwise
    anchor block), or None when the producer is not an anchor reached
    through single-consumer spatial stages."""
    pad = epi = None
    current = block
    for _ in range(MAX_STAGES):
        computed = [p for p in sch.get_producers(current) if not sch.get(p).name_hint.startswith("unpack")]
        if len(computed) != 1:
            return None
        p = computed[0]
        node = sch.get(p)
        if "braze.anchor" in node.annotations:
            return pad, epi, p
        if not is_spatial(sch, p) or len(sch.get_consumers(p)) != 1:
            return None
        if node.name_hint.startswith("conv_pad") and current is block:
            pad = p
        elif epi is None:
            epi = p
        current = p
    return None


def pointwise_anchor(sch, block) -> bool:
    """Whether ``block`` is a 1x1 dense conv in the blocked layout reading
    the kernel's inputs (a 16-bit one: their float32 copy, ``conv_pad``,
    which stays a parallel stage of its own before the tasks)."""
    loops = sch.get_loops(block)
    if len(loops) != BLOCKED_CONV_LOOPS:
        return False
    if extent(sch, loops[6]) != 1 or extent(sch, loops[7]) != 1:
        return False
    stages = [p for p in sch.get_producers(block) if not sch.get(p).name_hint.startswith("unpack")]
    if any(not sch.get(p).name_hint.startswith("conv_pad") or sch.get_producers(p) for p in stages):
        return False
    return True  # stride 1 and no padding: checked on the op (``source``)


def chained(sch, block):
    """(pad, epilogue, pointwise block) for a depthwise ``block`` whose
    producer is a pointwise anchor this kernel can compute inside it; else None."""
    found = _walk_up(sch, block)
    if found is None or not pointwise_anchor(sch, found[2]):
        return None
    return found


def defers(sch, block) -> bool:
    """Whether the pointwise anchor ``block`` reaches, through single-
    consumer spatial stages, a depthwise anchor that ``chained`` takes."""
    current = block
    for _ in range(MAX_STAGES):
        consumers = sch.get_consumers(current)
        if len(consumers) != 1:
            return False
        c = consumers[0]
        if "braze.anchor" in sch.get(c).annotations:
            found = chained(sch, c)
            return found is not None and sch.get(found[2]).same_as(sch.get(block))
        if not is_spatial(sch, c):
            return False
        current = c
    return False


def chain_prepare(sch, block) -> None:
    """Before inlining, in a kernel where a depthwise conv reads an anchor's
    result (a ``conv_depthwise`` kernel): keep the stage the depthwise conv
    reads (the expansion's epilogue, into which inlining then folds the
    rest of it) a stage of its own, so that it is applied once per element
    where the expansion's tile is written, not at each tap of the
    depthwise conv (chained or not: unchained, the expansion's own tile
    epilogue takes it)."""
    top = block
    pads = [p for p in sch.get_producers(block) if sch.get(p).name_hint.startswith("conv_pad")]
    if len(pads) == 1:
        top = pads[0]
    producers = [p for p in sch.get_producers(top) if not sch.get(p).name_hint.startswith("unpack")]
    if len(producers) == 1 and "braze.anchor" not in sch.get(producers[0]).annotations \
            and is_spatial(sch, producers[0]) and _reaches_anchor(sch, producers[0]):
        sch.annotate(producers[0], KEEP, 1)


def _reaches_anchor(sch, stage) -> bool:
    """Whether an anchor block computes what ``stage`` reads, through spatial stages."""
    seen, todo = set(), [stage]
    while todo:
        current = todo.pop()
        for p in sch.get_producers(current):
            node = sch.get(p)
            if "braze.anchor" in node.annotations:
                return True
            if node.name_hint not in seen and is_spatial(sch, p):
                seen.add(node.name_hint)
                todo.append(p)
    return False


def chain_rows(oh: int, stride: int, k: int, width: int, blocks: int, channels: int, expand_flops_row: float,
               dw_flops_row: float, target) -> int:
    """Output rows a task of the chained depthwise conv takes: among the
    divisors of ``oh``, the one of least estimated time, where a task's
    expansion buffer (``(rows * stride + k - stride)`` rows of ``width``
    columns of one ``channels``-wide block, the expansion's float32
    results) fits in half of L2.
    Time: the expansion's recomputed rows plus the depthwise rows, times
    the load imbalance of ``tasks = oh / rows * blocks`` over the cores.
    0: no divisor fits (the kernel is then scheduled unchained)."""
    n_cores = cores(target)
    best, best_cost = 0, math.inf
    for rows in (d for d in range(1, oh + 1) if oh % d == 0):
        in_rows = rows * stride + k - stride
        if not in_half_l2(in_rows * width * channels * ACC_BYTES, target):
            continue
        tasks = oh // rows * blocks
        imbalance = math.ceil(tasks / n_cores) / (tasks / n_cores)
        cost = (in_rows * expand_flops_row + rows * dw_flops_row) * (oh // rows) * imbalance
        if cost < best_cost * TIE:
            best, best_cost = rows, cost
    return best


def chain_apply(sch, block, found, target, params) -> set[str]:
    """The depthwise conv ``block`` in tasks of ``params['chain']`` output
    rows x one channel block, each computing the pointwise conv's rows it
    reads first (``found`` from ``chained``)."""
    pad, epi, pw = found
    rows, tile_w = int(params["chain"]), int(params["tile_w"])
    if pad is not None:
        sch.compute_inline(pad)  # guarded reads of the buffer (the padding is never stored)
    n, k, h, w, kl, *reduce = sch.get_loops(block)
    v = min(lanes(target), extent(sch, kl))
    ho, hi = sch.split(h, [None, rows])
    wo, wi = sch.split(w, [None, tile_w])
    sch.reorder(n, ho, k, hi, wo, *reduce, wi, kl)
    tile_epilogue(sch, block, wo, v)
    sch.unroll(wi)
    sch.vectorize(kl)

    # the expansion: its tile's write-back applies the epilogue into the task's buffer
    write_back = sch.cache_write(pw, 0, "local")
    if epi is not None:
        sch.reverse_compute_inline(epi)  # a ScheduleError: the kernel is scheduled unchained (schedule_kernel)
    sch.compute_at(write_back, k, preserve_unit_loops=True)
    cw = sch.get_loops(write_back)[-2]
    pw_tile = divisor_at_most(extent(sch, cw), accumulators(target, 1, cap=registers(target)))
    cwo, _ = sch.split(cw, [None, pw_tile])
    sch.vectorize(sch.get_loops(write_back)[-1])
    sch.compute_at(pw, cwo, preserve_unit_loops=True)
    ploops = sch.get_loops(pw)
    at = next(i for i, loop in enumerate(ploops) if sch.get(loop).same_as(sch.get(cwo)))
    inner = ploops[at + 1:]  # (n, k, h, w, kl, rco, rh, rw, rci), units but w
    pn, pk, ph, pw_, pkl, rco, rh, rw, rci = inner
    sch.reorder(pn, pk, ph, rco, rh, rw, rci, pw_, pkl)
    sch.unroll(pw_)
    sch.vectorize(pkl)
    done = run_tasks(sch, block, (n, ho, k), reduce[0])  # parallel before the pointwise's init is split off
    init = sch.decompose_reduction(pw, rco)
    sch.vectorize(sch.get_loops(init)[-1])
    return done | {sch.get(init).name_hint}
