"""Evaluating ops on constant operands with their numpy references."""

from __future__ import annotations

import numpy as np

from .builder import const_array
from .core import Module, Operation, Value
from .registry import lookup

#: Folds that would produce more elements than this are left to run time.
FOLD_LIMIT = 1 << 26


#: ops that only move their first operand's elements: folding one costs a
#: copy of a constant as large as its result, never more (a Gemm's transposed
#: weight), so FOLD_LIMIT does not apply
MOVES = ("tensor.transpose", "tensor.reshape")


def fold_op(op: Operation, module: Module, operand_values: list[np.ndarray | None]) -> list[np.ndarray] | None:
    """The results of ``op`` computed by its reference, or None if it cannot
    be folded (no reference, a non-constant operand, too large a result)."""
    opdef = lookup(op.name)
    if opdef is None or not opdef.has_reference or op.regions:
        return None
    if not opdef.folds_from_types and any(v is None for v in operand_values):
        return None
    if sum(r.type.size for r in op.results) > FOLD_LIMIT and op.name not in MOVES:
        return None
    with np.errstate(all="ignore"):
        out = opdef.run_reference(operand_values, [v.type for v in op.operands], op.attributes)
    return [np.asarray(a, dtype=r.type.np_dtype).reshape(r.type.shape) for a, r in zip(out, op.results)]


class Evaluator:
    """Lazily evaluates values that depend only on constants (memoized)."""

    def __init__(self, module: Module):
        self.module = module
        self.cache: dict[int, np.ndarray | None] = {}

    def __call__(self, v: Value) -> np.ndarray | None:
        key = id(v)
        if key not in self.cache:
            self.cache[key] = self._eval(v)
        return self.cache[key]

    def _eval(self, v: Value) -> np.ndarray | None:
        op = v.owner
        if op is None:
            return None
        if op.name == "const":
            return const_array(op, self.module)
        opdef = lookup(op.name)
        if opdef is None or not opdef.has_reference:
            return None
        inputs = [None] * len(op.operands) if opdef.folds_from_types else [self(x) for x in op.operands]
        out = fold_op(op, self.module, inputs)
        if out is None:
            return None
        for r, a in zip(op.results, out):
            self.cache[id(r)] = a
        return out[v.index]
