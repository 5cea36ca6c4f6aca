"""Gathers and scatters: ``tensor.gather``, ``tensor.gather_nd``, ``tensor.gather_elements``,
``tensor.scatter_elements``, ``tensor.scatter_nd``.

As in ONNX, an index may be negative (counting from the end of its axis,
``-s <= i < s``); the references and every lowering must wrap it.
"""

from __future__ import annotations

import numpy as np

from ...errors import VerifyError
from ..registry import Int, Kind, OpDef, Str, register
from ..types import TensorType

INDEX_DTYPES = ("i32", "i64")


def _check_indices(indices: TensorType) -> None:
    if indices.dtype not in INDEX_DTYPES:
        raise VerifyError(f"indices must be i32 or i64, got {indices}")


def _check_axis(axis: int, data: TensorType) -> None:
    if not 0 <= axis < data.rank:
        raise VerifyError(f"axis {axis} is out of range for {data}")


def _wrap(indices: np.ndarray, size) -> np.ndarray:
    """Negative indices counted from the end; out-of-range ones stay out of
    range so that numpy's indexing reports them."""
    return np.where(indices < 0, indices + size, indices)


@register
class Gather(OpDef):
    """``data`` indexed along ``axis`` by ``indices`` (which may be negative):
    the result's shape is ``data.shape[:axis] + indices.shape +
    data.shape[axis+1:]`` (ONNX Gather)."""

    name = "tensor.gather"
    kind = Kind.INJECTIVE
    operands = ("data", "indices")
    attrs = {"axis": Int(0)}

    def infer(self, data: TensorType, indices: TensorType, *, axis):
        _check_indices(indices)
        _check_axis(axis, data)
        return data.with_shape(data.shape[:axis] + indices.shape + data.shape[axis + 1:])

    def evaluate(self, data, indices, *, axis):
        return np.take(data, _wrap(indices, data.shape[axis]), axis=axis)


@register
class GatherND(OpDef):
    """Slices of ``data`` addressed by the last dim of ``indices`` (index
    tuples into the dims after the first ``batch_dims``, which ``data`` and
    ``indices`` share). Indices may be negative. Result shape:
    ``indices.shape[:-1] + data.shape[batch_dims + indices.shape[-1]:]``
    (ONNX GatherND)."""

    name = "tensor.gather_nd"
    kind = Kind.INJECTIVE
    operands = ("data", "indices")
    attrs = {"batch_dims": Int(0)}

    def infer(self, data: TensorType, indices: TensorType, *, batch_dims):
        _check_indices(indices)
        if indices.rank < 1 or not 0 <= batch_dims < min(data.rank, indices.rank):
            raise VerifyError(f"batch_dims {batch_dims} must be below the ranks of {data} and {indices}")
        if data.shape[:batch_dims] != indices.shape[:batch_dims]:
            raise VerifyError(f"{data} and {indices} differ in their first {batch_dims} (batch) dims")
        depth = indices.shape[-1]
        if not 1 <= depth <= data.rank - batch_dims:
            raise VerifyError(f"index tuples of length {depth} do not fit {data} after {batch_dims} batch dims")
        return data.with_shape(indices.shape[:-1] + data.shape[batch_dims + depth:])

    def evaluate(self, data, indices, *, batch_dims):
        batch = data.shape[:batch_dims]
        depth = indices.shape[-1]
        flat_data = data.reshape((-1,) + data.shape[batch_dims:])  # (B, ...)
        flat_idx = indices.reshape((flat_data.shape[0], -1, depth))  # (B, M, depth)
        rows = np.arange(flat_data.shape[0])[:, None]
        tuples = [_wrap(flat_idx[..., k], data.shape[batch_dims + k]) for k in range(depth)]
        out = flat_data[(rows, *tuples)]  # (B, M, remaining dims)
        return out.reshape(batch + indices.shape[batch_dims:-1] + data.shape[batch_dims + depth:])


@register
class GatherElements(OpDef):
    """``out[i][j][k] = data[indices[i][j][k]][j][k]`` for ``axis`` 0 (and
    likewise for other axes); ``indices`` has the result's shape and may be
    negative (ONNX GatherElements, numpy's take_along_axis)."""

    name = "tensor.gather_elements"
    kind = Kind.INJECTIVE
    operands = ("data", "indices")
    attrs = {"axis": Int(0)}

    def infer(self, data: TensorType, indices: TensorType, *, axis):
        _check_indices(indices)
        _check_axis(axis, data)
        if indices.rank != data.rank or any(
                i > d for k, (i, d) in enumerate(zip(indices.shape, data.shape)) if k != axis):
            raise VerifyError(f"{indices} must have the rank of {data} and no larger dims outside axis {axis}")
        return data.with_shape(indices.shape)

    def evaluate(self, data, indices, *, axis):
        # take_along_axis needs equal dims off the axis; ONNX allows smaller ones.
        data = data[tuple(slice(None) if k == axis else slice(0, n) for k, n in enumerate(indices.shape))]
        return np.take_along_axis(data, _wrap(indices, data.shape[axis]), axis=axis)


_REDUCTIONS = ("none", "add", "mul", "max", "min")
_NP_REDUCE = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


@register
class ScatterElements(OpDef):
    """``data`` with ``updates`` written at ``indices`` along ``axis`` (ONNX
    ScatterElements): ``out[..., indices[i, j], ...] = updates[i, j]`` for
    axis 1; ``reduction`` combines an update with what is there (``none``
    replaces; with duplicate indices the last update wins, as onnxruntime)."""

    name = "tensor.scatter_elements"
    kind = Kind.OPAQUE
    operands = ("data", "indices", "updates")
    attrs = {"axis": Int(0), "reduction": Str("none", choices=_REDUCTIONS)}

    def infer(self, data: TensorType, indices: TensorType, updates: TensorType, *, axis, reduction):
        _check_indices(indices)
        _check_axis(axis, data)
        if indices.shape != updates.shape or indices.rank != data.rank:
            raise VerifyError(f"indices {indices} and updates {updates} need one shape, of the rank of {data}")
        if updates.dtype != data.dtype:
            raise VerifyError(f"updates {updates} must have the element type of {data}")
        return data

    def evaluate(self, data, indices, updates, *, axis, reduction):
        out = np.array(data, copy=True)
        indices = np.where(indices < 0, indices + data.shape[axis], indices)
        for pos in np.ndindex(*indices.shape):
            at = pos[:axis] + (int(indices[pos]),) + pos[axis + 1:]
            out[at] = updates[pos] if reduction == "none" else _NP_REDUCE[reduction](out[at], updates[pos])
        return out


@register
class ScatterND(OpDef):
    """``data`` with slices of ``updates`` written at the index tuples along
    the last axis of ``indices`` (ONNX ScatterND), combined by ``reduction``."""

    name = "tensor.scatter_nd"
    kind = Kind.OPAQUE
    operands = ("data", "indices", "updates")
    attrs = {"reduction": Str("none", choices=_REDUCTIONS)}

    def infer(self, data: TensorType, indices: TensorType, updates: TensorType, *, reduction):
        _check_indices(indices)
        depth = indices.shape[-1] if indices.rank else 0
        if indices.rank < 1 or depth > data.rank:
            raise VerifyError(f"indices {indices} must end in an axis of at most {data.rank} (the rank of {data})")
        if updates.shape != indices.shape[:-1] + data.shape[depth:]:
            raise VerifyError(f"updates {updates} must have the shape "
                              f"{list(indices.shape[:-1] + data.shape[depth:])}")
        if updates.dtype != data.dtype:
            raise VerifyError(f"updates {updates} must have the element type of {data}")
        return data

    def evaluate(self, data, indices, updates, *, reduction):
        out = np.array(data, copy=True)
        for pos in np.ndindex(*indices.shape[:-1]):
            at = tuple(int(i) + (data.shape[k] if i < 0 else 0) for k, i in enumerate(indices[pos]))
            out[at] = updates[pos] if reduction == "none" else _NP_REDUCE[reduction](out[at], updates[pos])
        return out
