"""The lowering table: one TVM compute per IR op, usually a single TOPI call.

A lowering takes the operands as TE tensors and the op's attributes (defaults
filled in) as keywords, and returns the result tensor(s)::

    @lowering("math.add")
    def add(lhs, rhs):
        return topi.add(lhs, rhs)

A lowering that needs the result types declares a keyword ``out_types``.
"""

from __future__ import annotations

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


def find_lowering(op_name: str) -> Callable | None:
    _load()
    return LOWERINGS.get(op_name)


def wants_types(op_name: str) -> bool:
    return op_name in _WANTS_TYPES


def _load() -> None:
    from . import lowerings  # noqa: F401  (registers every lowering)
