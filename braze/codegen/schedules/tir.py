"""TIR helpers the rules and the generic schedule share: loops, blocks, the
anchor blocks of a kernel, inlining the elementwise stages around them,
and placing an epilogue at a tile.
"""

from __future__ import annotations

from tvm import s_tir, tirx


Schedule = s_tir.Schedule


DATA_PAR = tirx.IterVar.DataPar

#: The most characters of expression (as TVMScript prints it) that inlining
#: one stage may copy into its consumers, counted once per read. A stage is
#: copied into every read of it, and fast-math tanh/sigmoid/exp read their
#: argument many times, so a chain of them (a recurrent cell's gates) grows
#: geometrically when each link is inlined into the next; past this size the
#: stage is computed once into its own buffer instead.
MAX_INLINED_CHARS = 20_000


def extent(sch: Schedule, loop) -> int:
    return int(sch.get(loop).extent)


def vectorize_padding(sch: Schedule, block, at) -> bool:
    """A padding stage (``if_then_else(inside, x[...], 0)``) split at loop
    ``at`` into a fill of the pad value and a copy of the in-bound region,
    each vectorized along its innermost loop. Left whole, the guarded load
    is not vectorized by TVM (it becomes a scalar loop, each lane behind a
    branch, which LLVM vectorizes with masked loads or not at all). False
    when the stage is not such a pattern (it is then left as it was), and
    for a bfloat16 stage: TVM's bfloat16 legalization cannot store the
    fill's vectors."""
    if write_dtype(sch, block) == "bfloat16":
        return False
    try:
        if not sch.can_decompose_padding(block, at):
            return False
        fill = sch.decompose_padding(block, at)
    except s_tir.ScheduleError:
        return False
    for b in (fill, block):
        last = sch.get_loops(b)[-1]
        if extent(sch, last) > 1:
            sch.vectorize(last)
    return True


def is_spatial(sch: Schedule, block) -> bool:
    return all(iv.iter_type == DATA_PAR for iv in sch.get(block).iter_vars)


def anchors(sch: Schedule) -> dict[int, object]:
    """op index -> its anchor block."""
    found = {}
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        index = sch.get(block).annotations.get("braze.anchor")
        if index is not None:
            found[int(index)] = block
    return found


def inline(sch: Schedule, anchor_blocks) -> None:
    """Inline every elementwise/injective stage into its consumers, except
    the operands of anchors (a matmul must read its operands from memory,
    not recompute them per tile) and outputs. Packed-weight unpacking is
    inlined into the anchor: that is what makes the anchor read the packed
    layout; so is a stage marked ``braze.view`` (an index map, no
    arithmetic: gemm's clamped rows)."""
    anchor_names = {sch.get(b).name_hint for b in anchor_blocks}
    outputs = {sch.get(b).name_hint for b in sch.get_output_blocks(sch.get_sblock("root"))}
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        name = sch.get(block).name_hint
        if name in anchor_names or name in outputs or not is_spatial(sch, block) \
                or int(sch.get(block).annotations.get("braze.at_consumer", 0)) \
                or int(sch.get(block).annotations.get("braze.keep", 0)):
            continue
        consumers = sch.get_consumers(block)
        feeds_anchor = any(sch.get(c).name_hint in anchor_names for c in consumers)
        if feeds_anchor and not (name.startswith("unpack") or int(sch.get(block).annotations.get("braze.view", 0))):
            continue
        if any(_row_reduction(sch, c) for c in consumers) and _computes(sch, block):
            continue  # computed once, vectorized, rather than per element inside a scalar reduction loop
        if len(consumers) > 1 and any(not is_spatial(sch, c) for c in consumers) \
                and (_computes(sch, block) or _selects(sch, block)):
            continue  # read by a reduction and by others: computed (or gathered) once, not once per reader
        if _selects(sch, block) and not _computes(sch, block) and any(_computes(sch, c) for c in consumers):
            continue  # a concat feeding arithmetic: gathered once, contiguous for the arithmetic's vectors
        if _computes(sch, block) and _inlined_chars(sch, block, consumers) > MAX_INLINED_CHARS:
            continue  # a large expression read many times: computed once, not copied into each read
        try:
            sch.compute_inline(block)
        except s_tir.ScheduleError:
            pass  # e.g. it feeds a reduction's init; it stays a stage


def _inlined_chars(sch: Schedule, block, consumers) -> int:
    """How much expression inlining ``block`` would copy: its value's
    printed size times the number of reads of its buffer in its consumers."""
    node = sch.get(block)
    value = getattr(node.body, "value", None)
    if value is None or len(node.writes) != 1:
        return 0
    read = node.writes[0].source.name + "["
    reads = sum(str(getattr(sch.get(c).body, "value", "")).count(read) for c in consumers)
    return len(str(value)) * reads


def _row_reduction(sch: Schedule, block) -> bool:
    """A reduction along the innermost axis (a softmax's sum): its loop
    does not vectorize."""
    node = sch.get(block)
    return (not all(iv.iter_type == DATA_PAR for iv in node.iter_vars) and "braze.anchor" not in node.annotations
            and int(node.annotations.get("braze.trailing", 0)) == 0)


def _computes(sch: Schedule, block) -> bool:
    """Whether the stage does arithmetic beyond moving elements (a
    reshape/transpose/concat stage only moves them)."""
    value = getattr(sch.get(block).body, "value", None)
    if value is None:
        return True
    moving = ("BufferLoad", "TensorLoad", "Cast", "Var", "IntImm", "FloatImm")

    def kind(e) -> str:
        return type(e).__name__

    def moves(e) -> bool:
        if kind(e) in moving:
            return True
        if kind(e) == "Call" and str(getattr(e.op, "name", "")).endswith("if_then_else"):
            return all(moves(a) for a in e.args[1:])
        if kind(e) == "Select":
            return moves(e.true_value) and moves(e.false_value)
        return False

    return not moves(value)


def _selects(sch: Schedule, block) -> bool:
    """Whether the stage picks between sources (a concat, a pad): inlined,
    each vector lane gathers from every source."""
    text = str(getattr(sch.get(block).body, "value", ""))
    return "if_then_else" in text  # picking by index (concat, pad), not by value (a Select on isnan)


def epilogue_of(sch: Schedule, block, padded: bool = False):
    """The single elementwise consumer that covers ``block``'s output with
    the same iteration space (what inlining left of the epilogue), or None.
    ``padded``: the block computes a padded space; its consumer may cover
    less of it."""
    consumers = sch.get_consumers(block)
    if len(consumers) != 1 or not is_spatial(sch, consumers[0]):
        return None
    epi = consumers[0]
    ours = [int(iv.dom.extent) for iv in sch.get(block).iter_vars if iv.iter_type == DATA_PAR]
    theirs = [int(iv.dom.extent) for iv in sch.get(epi).iter_vars]
    if ours == theirs or (padded and len(ours) == len(theirs) and all(t <= o for t, o in zip(theirs, ours))):
        return epi
    return None


def write_dtype(sch: Schedule, block) -> str:
    """The element type the block writes."""
    store = sch.get(block).body  # a TE block's body is its one BufferStore
    buffer = getattr(store, "buffer", None)
    return str(buffer.dtype) if buffer is not None else "float32"


def place_at(sch: Schedule, stage, loop) -> bool:
    """Run ``stage`` (an epilogue) at ``loop`` if it can; it cannot when it
    also reads what is computed elsewhere (an attention mask). Otherwise it
    stays its own stage, for the generic schedule."""
    try:
        sch.reverse_compute_at(stage, loop)
        return True
    except s_tir.ScheduleError:
        return False


def blocks_under(sch: Schedule, loop) -> set[str]:
    return {sch.get(b).name_hint for b in sch.get_child_blocks(loop)}


def tile_result(sch: Schedule, block, epi, loop, v: int) -> None:
    """The anchor's result tile kept in a local buffer at ``loop`` (the
    register tile, or the block a tensor intrinsic writes), the epilogue
    ``epi`` (from ``epilogue_of``) inlined into its write-back, or run at
    the same loop where it cannot be, and the write-back vectorized by ``v``."""
    local = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(local, loop)
    tail = local
    if epi is not None:
        try:
            sch.reverse_compute_inline(epi)
        except Exception:  # noqa: BLE001 (TVM's ScheduleError): keep it as its own stage at the tile
            tail = epi if place_at(sch, epi, loop) else local
    for stage in {local, tail}:
        *_, wj = sch.get_loops(stage)
        if extent(sch, wj) % v == 0:
            _, wv = sch.split(wj, [None, v])
            sch.vectorize(wv)


def pad_rows(sch: Schedule, block, op, rows: int) -> None:
    """Pad a matmul block's row space to a multiple of ``rows`` (zero rows
    of A, dropped from C), for a tensor intrinsic of ``rows`` rows; run
    before the epilogue is inlined (a rule's ``prepare``)."""
    m = op.results[0].type.shape[-2]
    if m % rows:
        padding = [1] * len(sch.get(block).iter_vars)  # (batch..., i, j, k)
        padding[-3] = rows
        sch.pad_einsum(block, padding)


def tensorize_blocks(sch: Schedule, block, op, rows: int, cols: int, v: int, intrinsic) -> set[str]:
    """A matmul by a 2-D weight cut in ``rows`` x ``cols`` blocks over the
    whole k, each block one tensor intrinsic (``intrinsic(k, lead_a,
    lead_c)`` names it: A's and C's leading batch dims), column blocks
    outside row blocks, spread over the cores; the block's result in a
    local buffer where the epilogue runs, vectorized by ``v``."""
    *batch, i, j, k = sch.get_loops(block)
    epi = epilogue_of(sch, block, padded=True)
    io, ii = sch.split(i, [None, rows])
    jo, ji = sch.split(j, [None, cols])
    sch.reorder(*batch, jo, io, ii, ji, k)
    tile_result(sch, block, epi, io, v)
    outer = sch.fuse(*batch, jo, io)
    sch.parallel(outer)
    init = sch.decompose_reduction(block, ii)
    sch.vectorize(sch.get_loops(init)[-1])
    reduction = int(op.operands[1].type.shape[0])
    lead_a, lead_c = len(op.operands[0].type.shape) - 2, len(op.results[0].type.shape) - 2
    sch.tensorize(ii, intrinsic(reduction, lead_a, lead_c))
    return blocks_under(sch, outer)


def tile_epilogue(sch: Schedule, block, at_loop, v: int, channels_last: bool = False) -> None:
    """Cache the block's output in registers at ``at_loop`` and run its
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


def run_tasks(sch: Schedule, block, lead, reduce_at) -> set[str]:
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
