"""The lowering table: one TVM compute per IR op, usually a single TOPI call.

A lowering takes the operands as TE tensors and the op's attributes (defaults
filled in) as keywords, and returns the result tensor(s)::

    @lowering("math.add")
    def add(lhs, rhs):
        return topi.add(lhs, rhs)

A lowering that needs the result types declares a keyword ``out_types``.
"""

from __future__ import annotations

import contextvars
import inspect
from typing import Callable

LOWERINGS: dict[str, Callable] = {}
_WANTS_TYPES: set[str] = set()


def lowering(*op_names: str):
    def decorate(fn: Callable) -> Callable:
        for name in op_names:
            if name in LOWERINGS:
                raise AssertionError(f"two lowerings for {name}")
            LOWERINGS[name] = fn
            if "out_types" in inspect.signature(fn).parameters:
                _WANTS_TYPES.add(name)
        return fn

    return decorate


#: the index (in its kernel) of the op being lowered; see ``anchor_attrs``
_CURRENT_OP: contextvars.ContextVar[int] = contextvars.ContextVar("braze_current_op", default=-1)


def anchor_attrs() -> dict:
    """Attributes for the TE compute that is an op's main loop nest (the
    matmul's or the conv's reduction). They become the TIR block's
    annotations, by which the schedule rules find the op's block:
    ``te.compute(..., attrs=anchor_attrs())``."""
    return {"braze.anchor": _CURRENT_OP.get()}


def lowering_op(index: int):
    """Context: lowering the kernel's op number ``index``."""
    return _OpScope(index)


class _OpScope:
    def __init__(self, index: int):
        self.index = index

    def __enter__(self):
        self.token = _CURRENT_OP.set(self.index)

    def __exit__(self, *exc):
        _CURRENT_OP.reset(self.token)


def find_lowering(op_name: str) -> Callable | None:
    _load()
    return LOWERINGS.get(op_name)


def wants_types(op_name: str) -> bool:
    return op_name in _WANTS_TYPES


def _load() -> None:
    from . import lowerings  # noqa: F401  (registers every lowering)
