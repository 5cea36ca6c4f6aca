"""Lowerings of the nn ops: matmul, einsum, softmax, topk, cumsum.

Convolutions: conv.py; pooling: pool.py; normalizations: norm.py.
16-bit floats compute in float32 and round once, at the end.
"""

import numpy as np
from tvm import te, tirx, topi

from ..registry import lowering
from .reduce import accumulate, cast, dtype


def _shape(t: te.Tensor) -> tuple[int, ...]:
    return tuple(int(d) for d in t.shape)


@lowering("nn.matmul")
def matmul(a, b):
    """numpy's matmul: a 1-D ``a`` is a row and a 1-D ``b`` a column, whose
    dims the result drops; batch dims broadcast (a 2-D weight is shared by
    every batch)."""
    a_shape, b_shape = _shape(a), _shape(b)
    a_rows, b_cols = len(a_shape) > 1, len(b_shape) > 1
    a_batch, b_batch = a_shape[:-2], b_shape[:-2]
    batch = tuple(np.broadcast_shapes(a_batch, b_batch))
    out_shape = batch + a_shape[-2:-1] * a_rows + b_shape[-1:] * b_cols
    k = te.reduce_axis((0, a_shape[-1]), name="k")
    acc = dtype(accumulate(a))

    def batch_index(own, index):  # right-aligned, size-1 dims broadcast
        skip = len(batch) - len(own)
        return [0 if d == 1 else index[skip + i] for i, d in enumerate(own)]

    def at(*index):
        outer, rest = index[:len(batch)], list(index[len(batch):])
        i = [rest.pop(0)] if a_rows else []
        j = [rest.pop(0)] if b_cols else []
        lhs = a[(*batch_index(a_batch, outer), *i, k)]
        rhs = b[(*batch_index(b_batch, outer), k, *j)]
        return te.sum(lhs.astype(acc) * rhs.astype(acc), axis=k)

    return cast(te.compute(out_shape, at, name="matmul"), dtype(a))


@lowering("nn.einsum")
def einsum(*inputs, equation):
    wide = [accumulate(t) for t in inputs]
    return cast(topi.einsum(equation, *wide), dtype(inputs[0]))


@lowering("nn.softmax")
def softmax(x, *, axis):
    return cast(topi.nn.softmax(accumulate(x), axis=axis), dtype(x))


@lowering("nn.log_softmax")
def log_softmax(x, *, axis):
    return cast(topi.nn.log_softmax(accumulate(x), axis=axis), dtype(x))


@lowering("nn.topk")
def topk(x, *, k, axis, largest, sorted):
    if k == 0:  # TOPI reads k < 1 as "all"
        shape = [*x.shape[:axis], 0, *x.shape[axis + 1:]]
        return [te.compute(shape, lambda *i: tirx.const(0, x.dtype)),
                te.compute(shape, lambda *i: tirx.const(0, "int64"))]
    # TOPI sorts stably, so equal elements keep ascending index order; its
    # sort has no bfloat16, and 16-bit floats order exactly in float32
    values, indices = topi.topk(accumulate(x), k, axis, ret_type="both", is_ascend=not largest, dtype="int64")
    return [cast(values, dtype(x)), indices]


@lowering("nn.cumsum")
def cumsum(x, *, axis, exclusive, reverse):
    data = topi.flip(x, axis) if reverse else x
    total = topi.cumsum(accumulate(data), axis=axis, exclusive=exclusive)
    return cast(topi.flip(total, axis) if reverse else total, dtype(x))
