"""Lowerings of the nn ops: matmul, einsum, softmax, topk, cumsum.

Convolutions: conv.py; pooling: pool.py; normalizations: norm.py.
16-bit floats compute in float32 and round once, at the end.
"""

import numpy as np
from tvm import te, tirx, topi

from ..registry import anchor_attrs, lowering
from . import fast
from .reduce import accumulate, cast, dtype, filled, reduce_over


def _shape(t: te.Tensor) -> tuple[int, ...]:
    return tuple(int(d) for d in t.shape)


@lowering("nn.matmul")
def matmul(a, b):
    """numpy's matmul: a 1-D ``a`` is a row and a 1-D ``b`` a column, whose
    dims the result drops; batch dims broadcast (a 2-D weight is shared by
    every batch). Two 8-bit integer operands sum in int32, the result's type."""
    a_shape, b_shape = _shape(a), _shape(b)
    a_rows, b_cols = len(a_shape) > 1, len(b_shape) > 1
    a_batch, b_batch = a_shape[:-2], b_shape[:-2]
    batch = tuple(np.broadcast_shapes(a_batch, b_batch))
    out_shape = batch + a_shape[-2:-1] * a_rows + b_shape[-1:] * b_cols
    integer = {dtype(a), dtype(b)} <= {"int8", "uint8"}
    out = "int32" if integer else dtype(a)
    if a_shape[-1] == 0:  # an empty sum, which TVM would leave unwritten
        return filled(out_shape, 0, out)
    k = te.reduce_axis((0, a_shape[-1]), name="k")
    acc = "int32" if integer else dtype(accumulate(a))

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

    return cast(te.compute(out_shape, at, name="matmul", attrs=anchor_attrs()), out)


@lowering("nn.einsum")
def einsum(*inputs, equation):
    wide = [accumulate(t) for t in inputs]
    return cast(topi.einsum(equation, *wide), dtype(inputs[0]))


#: max(a, b) as TVM's own reducer (te.max is NaN-aware for floats, which
#: rfactor cannot split into vector lanes; softmax does not need it)
_PLAIN_MAX = te.comm_reducer(lambda a, b: tirx.max(a, b), lambda t: tirx.min_value(t), name="plain_max")


@lowering("nn.softmax")
def softmax(x, *, axis):
    """exp(x - max) / sum, with the fast exp for f32 (fast.py: its argument
    is <= 0 here). A plain max (which rfactor vectorizes) is enough for
    NaN: a NaN element makes the sum NaN, hence the whole row, as in the
    reference; an all -inf row gives -inf - max = -inf, exp 0, 0/0 = NaN."""
    wide = accumulate(x)
    if dtype(wide) != "float32":
        return cast(topi.nn.softmax(wide, axis=axis), dtype(x))
    axis = axis % len(wide.shape)
    top = reduce_over(wide, [axis], True, _PLAIN_MAX, "softmax_max")
    shifted = te.compute(wide.shape, lambda *i: wide(*i) - top(*i[:axis], 0, *i[axis + 1:]), name="softmax_shift")
    e = fast.exp(shifted)
    total = reduce_over(e, [axis], True, te.sum, "softmax_sum")
    # one division a row, a multiply an element (within an ulp of e / total;
    # 0 * inf is NaN as 0 / 0 is)
    inverse = te.compute(total.shape, lambda *i: tirx.const(1.0, "float32") / total(*i), name="softmax_inverse")
    y = te.compute(wide.shape, lambda *i: e(*i) * inverse(*i[:axis], 0, *i[axis + 1:]), name="softmax_norm")
    return cast(y, dtype(x))


@lowering("nn.log_softmax")
def log_softmax(x, *, axis):
    return cast(topi.nn.log_softmax(accumulate(x), axis=axis), dtype(x))


@lowering("nn.topk")
def topk(x, *, k, axis, largest, sorted):
    if k == 0:  # TOPI reads k < 1 as "all"
        shape = [*x.shape[:axis], 0, *x.shape[axis + 1:]]
        return [te.compute(shape, lambda *i: tirx.const(0, x.dtype)),
                te.compute(shape, lambda *i: tirx.const(0, "int64"))]
    # TOPI sorts stably, so equal elements keep ascending index order
    keys = _sort_keys(x)
    values, indices = topi.topk(keys, k, axis, ret_type="both", is_ascend=not largest, dtype="int64")
    if keys is x or dtype(keys) == "float32" and dtype(x) in ("float16", "bfloat16"):
        return [cast(values, dtype(x)), indices]
    # the keys are another type than x: read the values back from x
    picked = te.compute(indices.shape, lambda *i: x[(*i[:axis], indices[i], *i[axis + 1:])], name="topk_values")
    return [picked, indices]


def _sort_keys(x):
    """x in a type TVM's sort takes, in the same order: it has no int16,
    unsigned other than uint8, or bfloat16 sort. 16-bit floats order exactly
    in float32; uint64 in int64 once its top bit is flipped."""
    d = dtype(x)
    if d == "uint64":
        low = tirx.const(-(2**63), "int64")
        return te.compute(x.shape, lambda *i: tirx.bitwise_xor(x(*i).astype("int64"), low), name="keys")
    wider = {"int16": "int32", "uint16": "int32", "uint32": "int64"}.get(d)
    return cast(x, wider) if wider else accumulate(x)


def _running(scan):
    def lower(x, *, axis, exclusive, reverse):
        data = topi.flip(x, axis) if reverse else x
        total = scan(accumulate(data), axis=axis, exclusive=exclusive)
        return cast(topi.flip(total, axis) if reverse else total, dtype(x))
    return lower


lowering("nn.cumsum")(_running(topi.cumsum))
lowering("nn.cumprod")(_running(topi.cumprod))
