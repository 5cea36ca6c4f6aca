"""Elementwise and broadcasting math: ``math.*``.

Families are declared with one line per op (``unary``/``binary``), so each
op still appears exactly once.
"""

from __future__ import annotations

import numpy as np

from ...errors import VerifyError
from ..registry import Kind, broadcast_shapes, define
from ..types import FLOAT_DTYPES, TensorType


def _same(x: TensorType, **_) -> TensorType:
    return x


def _float_only(x: TensorType, **_) -> TensorType:
    if x.dtype not in FLOAT_DTYPES:
        raise VerifyError(f"needs a float tensor, got {x}")
    return x


def _broadcast(a: TensorType, b: TensorType, **_) -> TensorType:
    if a.dtype != b.dtype:
        raise VerifyError(f"operand element types differ: {a.dtype} and {b.dtype}")
    return TensorType(broadcast_shapes(a.shape, b.shape), a.dtype)


def unary(name: str, fn, infer=_same, attrs=None, doc: str = ""):
    return define(name, Kind.ELEMWISE, ("x",), infer, fn, attrs, doc)


def binary(name: str, fn, infer=_broadcast, doc: str = ""):
    return define(name, Kind.BROADCAST, ("lhs", "rhs"), infer, fn, None, doc)


binary("math.add", np.add)
binary("math.sub", np.subtract)
binary("math.mul", np.multiply)

unary("math.relu", lambda x: np.maximum(x, np.zeros((), x.dtype)))
unary("math.exp", np.exp, _float_only)
