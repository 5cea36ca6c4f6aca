"""Rewrite patterns as data, and the one greedy driver that applies them.

A pattern is a name, the op it roots at, and a function that returns the
replacement values for the op's results (or None when it does not apply)::

    @pattern("tensor.identity")
    def drop_identity(op, rw):
        return [op.operands[0]]

Pattern sets are tuples and combine with ``+``. The driver applies them
(and constant folding) until nothing changes, then removes dead ops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..ir import Builder, Module, Operation, Value, constant_value
from ..ir.core import Block
from ..ir.fold import MOVES, fold_op
from ..ir.types import DenseElements, Location

Rewrite = Callable[[Operation, "Rewriter"], "list[Value] | None"]


@dataclass(frozen=True)
class Pattern:
    name: str
    op: str
    rewrite: Rewrite


def pattern(op_name: str):
    """Decorator: a named rewrite rooted at ops called ``op_name`` (``"*"``:
    at every op; the rewrite picks its ops itself)."""

    def wrap(fn: Rewrite) -> Pattern:
        return Pattern(fn.__name__, op_name, fn)

    return wrap


class Rewriter:
    """What a rewrite function may do: read constants, build ops before the root."""

    def __init__(self, module: Module, op: Operation):
        self.module, self.op = module, op
        self.builder = Builder(module, op.parent, before=op)

    def value(self, v: Value) -> np.ndarray | None:
        return constant_value(v, self.module)

    def create(self, name: str, operands: list[Value], loc: Location | None = None, **attrs) -> Value:
        """A new op before the root, located at ``loc`` (default: the root's)."""
        return self.builder.value(name, operands, attrs, loc=loc or self.op.loc)

    def const(self, array: np.ndarray, hint: str | None = None, loc: Location | None = None) -> Value:
        return self.builder.const(array, hint, loc or self.op.loc)

    def splat(self, value: DenseElements, ty) -> Value:
        """A constant of type ``ty`` filled with ``value``'s one element."""
        op = self.builder.insert(Operation("const", [], [ty], {"value": value}, loc=self.op.loc))
        return op.result


#: elements a folded result may always have; beyond it, at most twice its
#: inputs' (a small constant is not traded for a huge one, e.g. a broadcast scalar)
FOLD_FREE_ELEMENTS = 1 << 16


def fold_constants(op: Operation, rw: Rewriter) -> list[Value] | None:
    """Replace an op whose operands are all constants by constants."""
    if op.name == "const" or op.regions or not op.results:
        return None
    splat = _moved_splat(op)
    if splat is not None:  # a splat weight transposed or reshaped: a splat, never materialized
        return [rw.splat(splat, op.result.type)]
    inputs = [rw.value(v) for v in op.operands]
    out = fold_op(op, rw.module, inputs)
    if out is None:
        return None
    if sum(a.size for a in out) > max(FOLD_FREE_ELEMENTS, 2 * sum(x.size for x in inputs if x is not None)):
        return None
    return [rw.const(a, f"{op.loc.name}.folded" if op.loc else None) for a in out]


def _moved_splat(op: Operation):
    """The one value of a splat constant that ``op`` only moves, or None."""
    if op.name not in MOVES or len(op.results) != 1:
        return None
    src = op.operands[0].owner
    value = src.attributes.get("value") if src is not None and src.name == "const" else None
    return value if isinstance(value, DenseElements) and value.splat else None


def apply_patterns(module: Module, patterns: tuple[Pattern, ...], fold: bool = True) -> bool:
    """Apply ``patterns`` (and constant folding) to a fixpoint; True if changed."""
    by_op: dict[str, list[Pattern]] = {}
    for p in patterns:
        by_op.setdefault(p.op, []).append(p)
    changed = False
    for func in module.funcs:
        changed |= _apply_block(module, func.body, by_op, fold)
    return changed


def _apply_block(module: Module, block: Block, by_op: dict, fold: bool) -> bool:
    changed, progress = False, True
    while progress:
        progress = False
        for op in list(block.ops):
            if op.parent is not block:
                continue  # erased by an earlier rewrite in this sweep
            for region in op.regions:
                for inner in region.blocks:
                    progress |= _apply_block(module, inner, by_op, fold)
            rewrites = ([fold_constants] if fold else []) + [p.rewrite for p in by_op.get(op.name, ())] + \
                [p.rewrite for p in by_op.get("*", ())]
            for rewrite in rewrites:
                replacement = rewrite(op, Rewriter(module, op))
                if replacement is None:
                    continue
                for old, new in zip(op.results, replacement):
                    if new is not old:
                        old.replace_all_uses_with(new)
                if all(not r.uses for r in op.results):
                    op.erase()
                progress = True
                break
        changed |= progress
        remove_dead(block)
    return changed


def remove_dead(block: Block) -> bool:
    """Erase ops whose results are all unused (every op here is pure)."""
    dead = []
    for op in reversed(block.ops):
        if op.results and all(not r.uses for r in op.results):
            op.drop_operands()
            dead.append(op)
    if dead:
        block.remove_many(dead)
    return bool(dead)
