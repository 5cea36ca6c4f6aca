"""Reductions: ``reduce.*``.

``axes`` is always explicit: sorted, non-negative, unique and never empty
(the importer expands ONNX's "all axes" and drops no-op reductions).
"""

from __future__ import annotations

import numpy as np

from ...errors import VerifyError
from ..registry import Bool, Int, Ints, Kind, OpDef, register
from ..types import FLOAT_DTYPES, INT_DTYPES, TensorType
from .nn import check_axis, wide


def _reduced_shape(x: TensorType, axes, keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    return tuple(d for i, d in enumerate(x.shape) if i not in axes)


def _lowest(dtype: np.dtype, largest: bool):
    """The value every element beats in a max (``largest``) or a min: what
    a reduction over no element gives (ONNX: -inf for ReduceMax of floats)."""
    if dtype == np.bool_:
        return not largest
    if dtype.kind == "f":
        return -np.inf if largest else np.inf
    info = np.iinfo(dtype)
    return info.min if largest else info.max


class _Reduce(OpDef):
    kind = Kind.REDUCE
    operands = ("x",)
    attrs = {"axes": Ints(), "keepdims": Bool(True)}
    #: element types the reduction accepts
    dtypes = FLOAT_DTYPES | INT_DTYPES

    def infer(self, x, *, axes, keepdims):
        if not axes or list(axes) != sorted(set(axes)) or axes[0] < 0 or axes[-1] >= x.rank:
            raise VerifyError(f"axes {list(axes)} must be sorted, unique, non-empty and in [0, {x.rank})")
        if x.dtype not in self.dtypes:
            raise VerifyError(f"does not take {x.dtype} tensors")
        return x.with_shape(_reduced_shape(x, axes, keepdims))

    def evaluate(self, x, *, axes, keepdims):
        return np.asarray(self.reduce(wide(x), axes, keepdims)).astype(x.dtype)

    @staticmethod
    def reduce(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
        raise NotImplementedError


@register
class Sum(_Reduce):
    """Sum over ``axes``."""

    name = "reduce.sum"

    @staticmethod
    def reduce(x, axes, keepdims):
        return np.sum(x, axis=axes, keepdims=keepdims, dtype=x.dtype)


@register
class Mean(_Reduce):
    """Arithmetic mean over ``axes``."""

    name = "reduce.mean"

    @staticmethod
    def reduce(x, axes, keepdims):
        return np.mean(x, axis=axes, keepdims=keepdims)


@register
class Max(_Reduce):
    """Maximum over ``axes``."""

    name = "reduce.max"
    dtypes = _Reduce.dtypes | {"i1"}

    @staticmethod
    def reduce(x, axes, keepdims):
        return np.max(x, axis=axes, keepdims=keepdims, initial=_lowest(x.dtype, True))


@register
class Min(_Reduce):
    """Minimum over ``axes``."""

    name = "reduce.min"
    dtypes = _Reduce.dtypes | {"i1"}

    @staticmethod
    def reduce(x, axes, keepdims):
        return np.min(x, axis=axes, keepdims=keepdims, initial=_lowest(x.dtype, False))


@register
class Prod(_Reduce):
    """Product over ``axes``."""

    name = "reduce.prod"

    @staticmethod
    def reduce(x, axes, keepdims):
        return np.prod(x, axis=axes, keepdims=keepdims, dtype=x.dtype)


@register
class L2(_Reduce):
    """Euclidean norm, sqrt(sum(x^2)), over ``axes``."""

    name = "reduce.l2"

    @staticmethod
    def reduce(x, axes, keepdims):
        return np.sqrt(np.sum(np.square(x), axis=axes, keepdims=keepdims))


class _ArgReduce(OpDef):
    kind = Kind.REDUCE
    operands = ("x",)
    attrs = {"axis": Int(), "keepdims": Bool(True), "select_last_index": Bool(False)}

    def infer(self, x, *, axis, keepdims, select_last_index):
        check_axis(x, axis)
        if x.shape[axis] == 0:
            raise VerifyError(f"axis {axis} of {x} is empty")
        return TensorType(_reduced_shape(x, (axis,), keepdims), "i64")

    def evaluate(self, x, *, axis, keepdims, select_last_index):
        if select_last_index:  # the first hit in the reversed axis is the last one
            index = x.shape[axis] - 1 - self.arg(np.flip(x, axis), axis)
        else:
            index = self.arg(x, axis)
        return (np.expand_dims(index, axis) if keepdims else index).astype(np.int64)

    @staticmethod
    def arg(x: np.ndarray, axis: int) -> np.ndarray:
        raise NotImplementedError


@register
class ArgMax(_ArgReduce):
    """i64 index of the maximum along ``axis`` (the first one among equals,
    or the last with ``select_last_index``)."""

    name = "reduce.argmax"
    arg = staticmethod(np.argmax)


@register
class ArgMin(_ArgReduce):
    """i64 index of the minimum along ``axis`` (the first one among equals,
    or the last with ``select_last_index``)."""

    name = "reduce.argmin"
    arg = staticmethod(np.argmin)
