"""Lowerings of the gathers: TOPI's take, gather_nd and gather.

ONNX indices may be negative (counting from the end of their axis), which
TOPI does not know: each lowering first wraps them (``i + size`` where
``i < 0``). Out-of-range indices are an error in ONNX (onnxruntime refuses
them); ``take`` clips them so that a bad index cannot read outside the data.
"""

from tvm import te, tirx, topi

from ..registry import lowering


def _wrapped(indices, size: int):
    """The indices, those below 0 counted from the end of a dim of ``size``."""
    def wrap(*i):
        index = indices(*i)
        return tirx.Select(index < 0, index + tirx.const(size, indices.dtype), index)
    return te.compute(indices.shape, wrap, name="T_wrap")


@lowering("tensor.gather")
def gather(data, indices, *, axis):
    return topi.take(data, _wrapped(indices, int(data.shape[axis])), axis=axis, mode="clip")


@lowering("tensor.gather_elements")
def gather_elements(data, indices, *, axis):
    return topi.gather(data, axis, _wrapped(indices, int(data.shape[axis])))


@lowering("tensor.gather_nd")
def gather_nd(data, indices, *, batch_dims):
    # TOPI wants each index tuple along the first axis of indices, ONNX has it along the last.
    depth = int(indices.shape[-1])
    sizes = [int(d) for d in data.shape[batch_dims:batch_dims + depth]]

    def tuple_entry(k, *rest):
        size = tirx.const(sizes[0], indices.dtype)
        for j, s in enumerate(sizes[1:], 1):
            size = tirx.Select(k == j, tirx.const(s, indices.dtype), size)
        index = indices(*rest, k)
        return tirx.Select(index < 0, index + size, index)

    tuples = te.compute((depth, *indices.shape[:-1]), tuple_entry, name="T_index_tuples")
    return topi.gather_nd(data, tuples, batch_dims)
