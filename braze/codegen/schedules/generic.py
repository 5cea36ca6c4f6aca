"""The generic schedule: what every block no rule claims gets (parallel over
the leading spatial loops, vectorized innermost when elementwise, vectorized
reductions), and the separable max pool's first stage placed at its consumer.
"""

from __future__ import annotations

from math import prod

from tvm import s_tir

from .machine import lanes
from .tir import DATA_PAR, Schedule, extent, is_spatial, write_dtype

#: iterations under which a stage runs on one core: fewer do not pay for
#: waking the thread pool
MIN_PARALLEL = 2048
#: a row longer than this many vectors is split into whole vectors, so that
#: each is one load and store, not a loop LLVM unrolls
SPLIT_VECTORS = 4
#: a row of up to this many vectors (that is no whole number of them) is
#: vectorized as one loop; a longer one is partitioned or stays scalar
ONE_LOOP_VECTORS = 8
#: elements a row needs before it is worth a vector at all
MIN_VECTOR = 4


def schedule_generic(sch: Schedule, block, target, min_parallel: int = MIN_PARALLEL) -> None:
    """Parallel over the leading spatial loops, vectorized innermost when the
    block is elementwise. Enough for memory-bound stages: reshapes,
    elementwise chains, softmax's and layer norm's reductions, pooling."""
    if int(sch.get(block).annotations.get("braze.at_consumer", 0)):
        return  # computed inside its consumer's loop: attach_to_consumers
    loops = sch.get_loops(block)
    ivs = sch.get(block).iter_vars
    if not loops or len(loops) != len(ivs):
        return
    lead = []
    for loop, iv in zip(loops, ivs):
        if iv.iter_type != DATA_PAR:
            break
        lead.append(loop)
    if not lead:
        return
    reduces = len(lead) < len(loops)
    work = prod(extent(sch, l) for l in loops)
    if work == 0:
        return
    trailing = int(sch.get(block).annotations.get("braze.trailing", 0))
    if reduces and 0 < trailing < len(lead):
        _reduce_vectorized(sch, block, lead, loops[len(lead):], trailing, target, work >= min_parallel)
        return
    if reduces and trailing == 0 and _row_reduce_vectorized(sch, block, lead, loops[len(lead):], target,
                                                           work >= min_parallel):
        return
    if reduces:
        fused = sch.fuse(*lead) if len(lead) > 1 else lead[0]
        if extent(sch, fused) > 1 and work >= min_parallel:
            sch.parallel(fused)
        return
    # elementwise: vectorize along the innermost dim (simple addresses),
    # parallel over the rest. Never along a fused dim: LLVM (znver5)
    # miscompiles vectors whose lanes wrap two indices with `%`, as a fused
    # index does once split back (a circular pad gave wrong values).
    vec = lanes(target, write_dtype(sch, block))
    inner = lead[-1]
    n = extent(sch, inner)
    if n > SPLIT_VECTORS * vec and n % vec == 0:
        rest, inner = sch.split(inner, [None, vec])
        lead = [*lead[:-1], rest, inner]
    if MIN_VECTOR <= extent(sch, inner) <= ONE_LOOP_VECTORS * vec:  # a long odd row stays scalar
        sch.vectorize(inner)
    outer = lead[:-1]
    if outer and work >= min_parallel:
        fused = sch.fuse(*outer) if len(outer) > 1 else outer[0]
        if extent(sch, fused) > 1:
            sch.parallel(fused)


def schedule_rows(sch: Schedule, target, min_parallel: int = MIN_PARALLEL) -> bool:
    """A kernel of row-wise stages (softmax, layer norm: reductions along
    the last axis and the elementwise stages around them) computed one row
    at a time: every stage runs under the output's row loop, so a row's
    intermediates (its exponentials, its centred values) stay in cache,
    where stage by stage each is a whole tensor written to memory and read
    back (a batch of 1500 x 1500 attention scores: tens of MB a stage). Each
    reduction keeps ``lanes`` partial results in a vector (rfactor), the
    elementwise stages are vectorized as ``schedule_generic`` does them.
    False, and ``sch`` untouched, when the kernel is not of that shape (a
    stage that one row needs more than its own row of, a reduction over
    another axis)."""
    try:
        if not _rows(sch.copy(), target, min_parallel):
            return False
    except s_tir.ScheduleError:
        return False
    return _rows(sch, target, min_parallel)


def _rows(sch: Schedule, target, min_parallel: int) -> bool:
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    if len(blocks) < 2 or any(int(sch.get(b).annotations.get("braze.at_consumer", 0)) for b in blocks):
        return False
    out = blocks[-1]
    loops = sch.get_loops(out)
    if len(loops) < 2 or not is_spatial(sch, out) or len(loops) != len(sch.get(out).iter_vars):
        return False
    rows = prod(extent(sch, l) for l in loops[:-1])
    reductions = [b for b in blocks[:-1] if not is_spatial(sch, b)]
    if rows < 2 or not reductions:
        return False
    vectors = []  # the rfactor blocks, vectorized once placed
    stages = []
    for b in blocks[:-1]:
        if not is_spatial(sch, b):
            rf = _row_rfactor(sch, b, target)
            if rf is None:
                return False
            if rf is not b:
                vectors.append(rf)
                stages.append(rf)
        stages.append(b)
    row = sch.fuse(*loops[:-1]) if len(loops) > 2 else loops[0]
    for b in reversed(stages):
        sch.compute_at(b, row, preserve_unit_loops=False)
    for b in stages:  # each stage computes one row's share of its iteration space, no more
        size = prod(int(iv.dom.extent) for iv in sch.get(b).iter_vars)
        if size % rows or prod(extent(sch, l) for l in sch.get_loops(b)[1:]) > size // rows:
            return False
    partition = []
    for b in stages + [out]:
        inner = sch.get_loops(b)[1:]
        if b in vectors:  # (lanes, the row's vectors): the reduction outside, the lanes one vector
            sch.reorder(inner[1], inner[0])
            sch.vectorize(inner[0])
        elif inner and is_spatial(sch, b):
            vec = lanes(target, write_dtype(sch, b))
            n = extent(sch, inner[-1])
            if n > SPLIT_VECTORS * vec and n % vec == 0:
                _, v = sch.split(inner[-1], [None, vec])
                sch.vectorize(v)
            elif MIN_VECTOR <= n <= ONE_LOOP_VECTORS * vec:
                sch.vectorize(inner[-1])
            elif n > ONE_LOOP_VECTORS * vec:
                # a long row that is no whole number of vectors: its whole
                # vectors, then the rest as one short vector (partitioned
                # last, once the loops are placed: it replaces the block).
                # Vectors of the divisor nearest a vector instead (15 of
                # 1500 with 16 lanes) are split by LLVM into 8 + 4 + 2 + 1
                # lanes for every load and store, and a masked split masks
                # every vector, not only the last
                partition.append((inner[-1], n, vec))
    if rows * extent(sch, sch.get_loops(out)[-1]) >= min_parallel:
        sch.parallel(row)
    for loop, n, vec in partition:
        whole, rest = sch.loop_partition(loop, [n - n % vec, None])
        _, v = sch.split(whole, [None, vec])
        sch.vectorize(v)
        sch.vectorize(rest)
    return True


def _row_rfactor(sch: Schedule, block, target):
    """A reduction along its innermost loop split into partial results side
    by side (its rfactor block, to be vectorized): ``lanes`` of them, or
    the divisor of the row nearest to that (15 for rows of 1500 with 16
    lanes). The split must be exact: once the rfactor block moves
    under the row loop, TVM (0.27) drops a partial split's predicate and
    the last vector would read the next row. The block itself when the row
    is shorter than two vectors (left scalar); None when no divisor fits,
    or it reduces over more than its innermost loop."""
    ivs = sch.get(block).iter_vars
    loops = sch.get_loops(block)
    if sum(iv.iter_type != DATA_PAR for iv in ivs) != 1 or ivs[-1].iter_type == DATA_PAR \
            or len(loops) != len(ivs):
        return None
    n, vec = extent(sch, loops[-1]), lanes(target, write_dtype(sch, block))
    if vec < 2 or n < 2 * vec:
        return block
    width = _exact_width(n, vec)
    if width is None:
        return None
    _, inner = sch.split(loops[-1], [None, width])
    return sch.rfactor(inner, factor_axis=0)


def _exact_width(n: int, vec: int) -> int | None:
    """The divisor of a row of ``n`` nearest to ``vec`` lanes, from half
    to twice a vector (15 for 1500 with 16 lanes), or None: the nearest,
    not the one of fewest power-of-two pieces (20 = 16 + 4 lanes), whose
    vectors LLVM still splits in two."""
    return min((d for d in range(max(MIN_VECTOR, vec // 2), 2 * vec + 1) if n % d == 0 and n >= 2 * d),
               key=lambda d: (abs(d - vec), -d), default=None)


def _reduce_vectorized(sch: Schedule, block, lead, reduce_loops, trailing: int, target, parallel: bool) -> None:
    """A reduction over an axis that is not the innermost (softmax over
    channels, a mean over H): the innermost kept dims go inside the
    reduction loops and are vectorized, the rest run in parallel."""
    # only the innermost kept dim is vectorized (never a fused one: see schedule_generic)
    head, tail = lead[:-1], lead[-1]
    n, vec = extent(sch, tail), lanes(target, write_dtype(sch, block))
    if n % vec == 0 and n > vec:
        outer, inner = sch.split(tail, [None, vec])
        head = [*head, outer]
    elif n <= ONE_LOOP_VECTORS * vec:
        inner = tail
    else:
        head, inner = [*head, tail], None
    sch.reorder(*head, *reduce_loops, *([inner] if inner is not None else []))
    if inner is not None and extent(sch, inner) > 1:
        sch.vectorize(inner)
    if head and parallel:
        fused = sch.fuse(*head) if len(head) > 1 else head[0]
        if extent(sch, fused) > 1:
            sch.parallel(fused)
    if inner is not None:
        sch.decompose_reduction(block, reduce_loops[0])


def _row_reduce_vectorized(sch: Schedule, block, lead, reduce_loops, target, parallel: bool) -> bool:
    """A reduction along the innermost axis (softmax's max and sum, layer
    norm's mean): ``lanes`` partial results side by side in a vector
    (rfactor), combined at the end of each row. A row that is not a whole
    number of vectors (1500 frames, 197 tokens) ends in a partial vector
    whose lanes past the row are masked off (the split's predicate), rather
    than the whole row falling to a scalar loop. False if the row is
    shorter than two vectors (the block is left as it was)."""
    last = reduce_loops[-1]
    n, vec = extent(sch, last), lanes(target, write_dtype(sch, block))
    if vec < 2 or n < 2 * vec:
        return False
    try:
        outer, inner = sch.split(last, [None, vec])
        rf = sch.rfactor(inner, factor_axis=len(lead))
    except s_tir.ScheduleError:
        return False
    rf_loops = sch.get_loops(rf)  # the lead loops, the outer reduce loops, then the vector (now spatial)
    sch.vectorize(rf_loops[-1])
    fused = sch.fuse(*rf_loops[:len(lead)]) if len(lead) > 1 else rf_loops[0]
    sch.reverse_compute_at(block, fused)
    if parallel and extent(sch, fused) > 1:
        sch.parallel(fused)
    return True


def attach_to_consumers(sch: Schedule) -> None:
    """Blocks marked ``braze.at_consumer`` (the first stage of a separable
    max pool): computed under their one consumer's outermost loop, as much
    as one iteration of it needs, vectorized innermost (a reduction's taps
    outside the vector)."""
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        if not int(sch.get(block).annotations.get("braze.at_consumer", 0)):
            continue
        consumers = sch.get_consumers(block)
        if len(consumers) != 1 or not sch.get_loops(consumers[0]):
            continue
        try:
            sch.compute_at(block, sch.get_loops(consumers[0])[0])
        except s_tir.ScheduleError:
            continue
        # under the consumer's loop: its own loops, spatial then reduction
        # (a TE compute lists its reduction axes last)
        taps = sum(iv.iter_type != DATA_PAR for iv in sch.get(block).iter_vars)
        loops = sch.get_loops(block)[1:]
        spatial, reduce = (loops[:-taps], loops[-taps:]) if taps else (loops, [])
        if not spatial:
            continue
        sch.reorder(*spatial[:-1], *reduce, spatial[-1])
        if extent(sch, spatial[-1]) > 1:
            sch.vectorize(spatial[-1])
        if reduce:
            init = sch.decompose_reduction(block, reduce[0])
            if extent(sch, sch.get_loops(init)[-1]) > 1:
                sch.vectorize(sch.get_loops(init)[-1])
