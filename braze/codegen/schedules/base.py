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
- ``apply(sch, block, op, target, params)``: the schedule itself.
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
        if name in anchor_names or name in outputs or not is_spatial(sch, block):
            continue
        feeds_anchor = any(sch.get(c).name_hint in anchor_names for c in sch.get_consumers(block))
        if feeds_anchor and not name.startswith("unpack"):
            continue
        try:
            sch.compute_inline(block)
        except s_tir.ScheduleError:
            pass  # e.g. it feeds a reduction's init; it stays a stage


def epilogue_of(sch: Schedule, block):
    """The single elementwise consumer that covers ``block``'s output with
    the same iteration space (what inlining left of the epilogue), or None."""
    consumers = sch.get_consumers(block)
    if len(consumers) != 1 or not is_spatial(sch, consumers[0]):
        return None
    epi = consumers[0]
    ours = [int(iv.dom.extent) for iv in sch.get(block).iter_vars if iv.iter_type == DATA_PAR]
    theirs = [int(iv.dom.extent) for iv in sch.get(epi).iter_vars]
    return epi if ours == theirs else None


def write_dtype(sch: Schedule, block) -> str:
    """The element type the block writes."""
    store = sch.get(block).body  # a TE block's body is its one BufferStore
    buffer = getattr(store, "buffer", None)
    return str(buffer.dtype) if buffer is not None else "float32"


def blocks_under(sch: Schedule, loop) -> set[str]:
    return {sch.get(b).name_hint for b in sch.get_child_blocks(loop)}


def schedule_generic(sch: Schedule, block, target, min_parallel: int = 2048) -> None:
    """Parallel over the leading spatial loops, vectorized innermost when the
    block is elementwise. Enough for memory-bound stages: reshapes,
    elementwise chains, softmax's and layer norm's reductions, pooling."""
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
    if reduces:
        fused = sch.fuse(*lead) if len(lead) > 1 else lead[0]
        if extent(sch, fused) > 1 and work >= min_parallel:
            sch.parallel(fused)
        return
    # elementwise: vectorize along the innermost dim (simple addresses),
    # parallel over the rest; a short innermost dim is fused with its outer one
    vec = lanes(target, write_dtype(sch, block))
    while len(lead) > 1 and extent(sch, lead[-1]) < vec:
        lead = [*lead[:-2], sch.fuse(lead[-2], lead[-1])]
    inner = lead[-1]
    n = extent(sch, inner)
    if n > 4 * vec and n % vec == 0:
        rest, inner = sch.split(inner, [None, vec])
        lead = [*lead[:-1], rest, inner]
    if 1 < extent(sch, inner) <= 8 * vec:  # a long odd row stays scalar
        sch.vectorize(inner)
    outer = lead[:-1]
    if outer and work >= min_parallel:
        fused = sch.fuse(*outer) if len(outer) > 1 else outer[0]
        if extent(sch, fused) > 1:
            sch.parallel(fused)
