"""Lowerings of the gathers (TOPI's take, gather_nd and gather) and the scatters
(TOPI's scatter_elements and scatter_nd, whose kernels are opaque TOPI loops).

ONNX indices may be negative (counting from the end of their axis), which
TOPI does not know: each lowering first wraps them (``i + size`` where
``i < 0``). Out-of-range indices are an error in ONNX (onnxruntime refuses
them, the references raise); the lowerings clamp them into the axis, so that
a bad index cannot read outside the data.
"""

from tvm import te, tirx, topi

from ..registry import lowering


def _wrap(index, size):
    """``index`` (an expression of the indices' dtype) counted from the end
    of a dim of ``size`` when negative."""
    return tirx.Select(index < 0, index + size, index)


def _in_range(index, size):
    return tirx.max(tirx.min(_wrap(index, size), size - 1), 0)


def _indices(indices, size: int, clamp: bool = True):
    size = tirx.const(size, indices.dtype)
    fn = _in_range if clamp else _wrap
    return te.compute(indices.shape, lambda *i: fn(indices(*i), size), name="T_indices")


@lowering("tensor.gather")
def gather(data, indices, *, axis):
    return topi.take(data, _indices(indices, int(data.shape[axis]), clamp=False), axis=axis, mode="clip")


@lowering("tensor.gather_elements")
def gather_elements(data, indices, *, axis):
    return topi.gather(data, axis, _indices(indices, int(data.shape[axis])))


def _index_tuples(indices, sizes: list[int]):
    """ONNX's index tuples (along the last axis of ``indices``) as TOPI's
    gather_nd/scatter_nd want them (along the first), each entry wrapped
    and clamped into the dim of ``sizes`` it indexes."""
    def tuple_entry(k, *rest):
        size = tirx.const(sizes[0], indices.dtype)
        for j, s in enumerate(sizes[1:], 1):
            size = tirx.Select(k == j, tirx.const(s, indices.dtype), size)
        return _in_range(indices(*rest, k), size)

    return te.compute((len(sizes), *indices.shape[:-1]), tuple_entry, name="T_index_tuples")


@lowering("tensor.gather_nd")
def gather_nd(data, indices, *, batch_dims):
    depth = int(indices.shape[-1])
    tuples = _index_tuples(indices, [int(d) for d in data.shape[batch_dims:batch_dims + depth]])
    return topi.gather_nd(data, tuples, batch_dims)


_TOPI_REDUCTION = {"none": "update", "add": "add", "mul": "mul", "max": "max", "min": "min"}


@lowering("tensor.scatter_elements")
def scatter_elements(data, indices, updates, *, axis, reduction):
    return topi.scatter_elements(data, _indices(indices, int(data.shape[axis])), updates, axis,
                                 _TOPI_REDUCTION[reduction])


@lowering("tensor.scatter_nd")
def scatter_nd(data, indices, updates, *, reduction):
    tuples = _index_tuples(indices, [int(d) for d in data.shape[:int(indices.shape[-1])]])
    return topi.scatter_nd(data, tuples, updates, _TOPI_REDUCTION[reduction])
