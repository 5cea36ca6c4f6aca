"""Building ops with inferred result types, and reading constant values."""

from __future__ import annotations

import numpy as np

from ..errors import VerifyError
from .core import Block, Module, Operation, Value
from .registry import lookup
from .types import DenseElements, DenseResource, Location, TensorType, dtype_of

#: Constants up to this many elements (and every splat) are written inline.
INLINE_LIMIT = 8


class Builder:
    """Appends ops to a block (or inserts them before ``before``)."""

    def __init__(self, module: Module, block: Block, before: Operation | None = None):
        self.module, self.block, self.before = module, block, before

    def insert(self, op: Operation) -> Operation:
        if self.before is None:
            return self.block.append(op)
        return self.block.insert_before(self.before, op)

    def create(self, name: str, operands: list[Value], attrs: dict | None = None,
               loc: Location | None = None) -> Operation:
        """A new op whose result types come from the registry's inference."""
        opdef = lookup(name)
        if opdef is None:
            raise VerifyError(f"unknown op '{name}'")
        attrs = {k: v for k, v in (attrs or {}).items() if v is not None}
        where = f"{loc}: " if loc else ""
        types = opdef.infer_types([v.type for v in operands], attrs, where)
        return self.insert(Operation(name, operands, types, attrs, loc=loc))

    def value(self, name: str, operands: list[Value], attrs: dict | None = None,
              loc: Location | None = None) -> Value:
        return self.create(name, operands, attrs, loc).result

    def const(self, array: np.ndarray, hint: str | None = None, loc: Location | None = None) -> Value:
        array = np.asarray(array)
        ty = TensorType(array.shape, dtype_of(array.dtype))
        if array.size <= INLINE_LIMIT or (array.size and (array.reshape(-1) == array.reshape(-1)[0]).all()):
            value = DenseElements.from_array(array)
        else:
            value = DenseResource(self.module.add_blob(hint or "cst", np.ascontiguousarray(array)))
        op = self.insert(Operation("const", [], [ty], {"value": value}, loc=loc))
        op.result.name = hint
        return op.result


def const_array(op: Operation, module: Module) -> np.ndarray | None:
    """The data of a ``const`` op, or None when its blob was not loaded."""
    value, ty = op.attributes["value"], op.result.type
    if isinstance(value, DenseElements):
        return value.to_array(ty)
    data = module.blobs.get(value.handle)
    return None if data is None else data


def constant_value(v: Value, module: Module) -> np.ndarray | None:
    """The value of ``v`` if it is the result of a const op."""
    op = v.owner
    if op is None or op.name != "const":
        return None
    return const_array(op, module)
