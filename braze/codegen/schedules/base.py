"""What every schedule rule shares: the rule table, loop helpers, and the
generic schedule that takes any block no rule claims.

A rule schedules one *anchor* op of a kernel (the matmul, the conv): the
TIR block its lowering marked with ``anchor_attrs()``, together with the
elementwise epilogue that the inlining pass left behind it. A rule has:

- ``applies(op, kernel, target)``: whether it can take this op;
- ``defaults(op, kernel, target)``: its parameters (tile sizes, ...), which
  a user may override (``braze schedule --param``); ``None`` when no
  parameters fit the shapes (the op then gets the generic schedule);
- ``packings(op, kernel, target, params)``: constant operands it wants in
  another layout (packed once at compile time), by kernel param index;
- ``prepare(sch, block, op, target, params)`` (optional): a step that
  must come before inlining (padding the iteration space);
- ``apply(sch, block, op, target, params)``: the schedule itself;
- ``profitable(op, kernel, target)`` (optional): whether the rule is worth
  taking when no rule is pinned (Winograd on a small map is not); a pin
  (``braze schedule --rule``) takes any rule that applies;
- ``lower(op, params)`` (optional): a lowering of the op that replaces its
  own in this kernel (another algorithm, e.g. Winograd's), as a function
  of the op's TE operands and attributes. Its stages marked
  ``braze.keep`` are not inlined: the rule schedules them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import Callable

from tvm import s_tir, tirx

from ...ir import Operation

Schedule = s_tir.Schedule
DATA_PAR = tirx.IterVar.DataPar


@dataclass(frozen=True)
class Rule:
    name: str
    ops: tuple[str, ...]
    doc: str
    applies: Callable
    defaults: Callable
    apply: Callable
    packings: Callable = field(default=lambda op, kernel, target, params: {})
    #: ``prepare(sch, block, op, target, params)``, run before the
    #: elementwise stages are inlined (while accesses are still plain)
    prepare: Callable | None = None
    #: ``profitable(op, kernel, target)``: taken by default (see above)
    profitable: Callable | None = None
    #: ``lower(op, params)``: the op's lowering in this kernel (see above)
    lower: Callable | None = None
    #: ``grid(op, target, defaults)``: the alternative params ``braze schedule``
    #: tries around the defaults (default: each integer halved and doubled)
    grid: Callable | None = None


def halve_double(op, target, defaults) -> list[dict]:
    """A rule's grid when it has none: each integer parameter halved or doubled."""
    return [{**defaults, key: f(value)} for key, value in defaults.items() if isinstance(value, int)
            for f in (lambda x: max(1, x // 2), lambda x: 2 * x)]


#: The order the rules are tried in for an anchor op; the first that applies
#: (and is profitable) takes it: winograd before conv2d (it takes the 3x3
#: stride-1 convs it pays on), pointwise before conv2d (every 1x1 conv), and
#: depthwise after it (the grouped convs whose groups conv2d's blocks do not fit).
PRIORITY = ("winograd", "pointwise", "conv2d", "depthwise", "gemm")

RULES: dict[str, Rule] = {}


def register(rule: Rule) -> Rule:
    if rule.name in RULES:
        raise AssertionError(f"two schedule rules named {rule.name}")
    RULES[rule.name] = rule
    return rule


def lanes(target, dtype: str = "float32") -> int:
    """Vector lanes of ``dtype`` on the target (16 floats with AVX-512)."""
    bits = getattr(target, "vector_bits", 512) or 128
    width = {"float16": 16, "bfloat16": 16, "float64": 64, "int8": 8, "uint8": 8, "int64": 64}.get(dtype, 32)
    return max(1, bits // width)


def registers(target) -> int:
    """Architectural vector registers of the target: 16 with AVX2/SSE, 32
    with AVX-512 and on AArch64 (the machine model, docs/schedules.md)."""
    return getattr(target, "vector_registers", 0) or (32 if lanes(target) >= 16 else 16)


#: Cycles from an FMA's start to its result on current x86 and Arm cores.
FMA_LATENCY = 4


def min_accumulators(target) -> int:
    """Independent accumulators that keep every FMA unit busy: latency x
    units (8 on AVX2 cores with 2 units); a tile with fewer waits on its
    own additions."""
    return FMA_LATENCY * max(1, getattr(target, "fma_units", 2) or 2)


def accumulators(target, loads: int, cap: int = 16) -> int:
    """Vector accumulators a register-tiled micro-kernel may hold: the
    register file less the ``loads`` vectors each step loads, the one it
    broadcasts into and one LLVM keeps for itself (16 - 2 - 2 = 12 on AVX2
    for two-vector-wide tiles: measured, a 14-accumulator tile with one
    vector load ran 20% slower than a 7-accumulator one), and at most
    ``cap`` (more did not pay on AVX-512's 32 registers)."""
    return max(1, min(cap, registers(target) - loads - 2))


def pick_tile(candidates: list[tuple[int, dict]], target=None) -> dict | None:
    """The register tile to use from ``(accumulators, params)`` candidates
    in order of preference (widest vectors first): the first with at least
    ``min_accumulators(target)``, else the one with the most accumulators. (On AVX2,
    a conv on a 7-wide map: 2 vectors x 1 column gives 2 accumulators, 1
    vector x 7 columns gives 7, and ran 2x faster.)"""
    for acc, params in candidates:
        if acc >= min_accumulators(target):
            return params
    return max(candidates, key=lambda c: c[0])[1] if candidates else None


def divisor_at_most(n: int, limit: int) -> int:
    return max(d for d in range(1, min(n, limit) + 1) if n % d == 0)


def weight_param(op, kernel) -> int | None:
    """The kernel param index of the conv's weight when it is a constant."""
    w = op.operands[1]
    for i, (param, arg) in enumerate(zip(kernel.params, kernel.args)):
        if param is w and arg.owner is not None and arg.owner.name == "const":
            return i
    return None


def extent(sch: Schedule, loop) -> int:
    return int(sch.get(loop).extent)


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
    layout."""
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
        if feeds_anchor and not name.startswith("unpack"):
            continue
        if any(_row_reduction(sch, c) for c in consumers) and _computes(sch, block):
            continue  # computed once, vectorized, rather than per element inside a scalar reduction loop
        if len(consumers) > 1 and any(not is_spatial(sch, c) for c in consumers) \
                and (_computes(sch, block) or _selects(sch, block)):
            continue  # read by a reduction and by others: computed (or gathered) once, not once per reader
        if _selects(sch, block) and not _computes(sch, block) and any(_computes(sch, c) for c in consumers):
            continue  # a concat feeding arithmetic: gathered once, contiguous for the arithmetic's vectors
        try:
            sch.compute_inline(block)
        except s_tir.ScheduleError:
            pass  # e.g. it feeds a reduction's init; it stays a stage


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


def schedule_generic(sch: Schedule, block, target, min_parallel: int = 2048) -> None:
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
    if n > 4 * vec and n % vec == 0:
        rest, inner = sch.split(inner, [None, vec])
        lead = [*lead[:-1], rest, inner]
    if 4 <= extent(sch, inner) <= 8 * vec:  # a long odd row stays scalar
        sch.vectorize(inner)
    outer = lead[:-1]
    if outer and work >= min_parallel:
        fused = sch.fuse(*outer) if len(outer) > 1 else outer[0]
        if extent(sch, fused) > 1:
            sch.parallel(fused)


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
    elif n <= 8 * vec:
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
    (rfactor), combined at the end of each row. False if the row does not
    split into vectors (the block is left as it was)."""
    last = reduce_loops[-1]
    n, vec = extent(sch, last), lanes(target, write_dtype(sch, block))
    if vec < 2 or n % vec or n < 2 * vec:
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
