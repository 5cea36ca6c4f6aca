"""Lowerings of the data-movement ops (``tensor.*``; gathers are in
gather.py, ``tensor.resize`` in resize.py).

All TOPI, except ``tensor.shape``: a compute of constants, as its value is
known from the operand's type alone.
"""

import numpy as np
from tvm import te, tirx, topi

from ..registry import lowering


def _dims(t) -> list[int]:
    return [int(d) for d in t.shape]


@lowering("tensor.reshape")
def reshape(x, *, shape):
    return topi.reshape(x, shape)


@lowering("tensor.transpose")
def transpose(x, *, perm):
    return topi.transpose(x, perm)


@lowering("tensor.identity")
def identity(x):
    return topi.identity(x)


@lowering("tensor.concat")
def concat(*inputs, axis):
    return topi.concatenate(inputs, axis)


@lowering("tensor.split")
def split(x, *, axis, sizes):
    # Slices rather than topi.split, which refuses empty parts.
    begins = np.cumsum((0,) + tuple(sizes)).tolist()
    return [topi.strided_slice(x, [b], [b + n], [1], axes=[axis]) for b, n in zip(begins, sizes)]


@lowering("tensor.slice")
def slice_(x, *, starts, ends, steps):
    # TOPI refuses an end before the start (an empty slice), and reads an end
    # of -1 as the last index where a negative step means "through index 0".
    ends = [max(e, s) if st > 0 else min(e, s) for s, e, st in zip(starts, ends, steps)]
    ends = [e if e >= 0 else -d - 1 for e, d in zip(ends, _dims(x))]
    return topi.strided_slice(x, starts, ends, steps)


@lowering("tensor.broadcast_to")
def broadcast_to(x, *, shape):
    return topi.broadcast_to(x, shape)


@lowering("tensor.tile")
def tile(x, *, repeats):
    # One axis per stage: LLVM (seen with mcpu=znver5) miscompiles a single
    # loop nest that wraps two or more indices with `%` (e.g. repeats
    # [1, 3, 4, 1] of a 2x3x4x5 tensor), as topi.tile writes it.
    for axis, r in enumerate(repeats):
        if r != 1:
            x = topi.tile(x, [r if a == axis else 1 for a in range(len(repeats))])
    return x if any(r != 1 for r in repeats) else topi.identity(x)


@lowering("tensor.pad")
def pad(x, *, pads, mode, value):
    rank = x.ndim
    begins, ends = pads[:rank], pads[rank:]
    if any(p < 0 for p in pads):  # crop first
        x = topi.strided_slice(x, [-min(b, 0) for b in begins], [d + min(e, 0) for d, e in zip(_dims(x), ends)])
    before, after = [max(b, 0) for b in begins], [max(e, 0) for e in ends]
    if mode == "constant":
        dtype = str(x.dtype)
        if not dtype.startswith(("float", "bfloat")):
            value = np.array(value).astype(dtype).item()  # truncated (or made bool) as numpy casts it
        return topi.nn.pad(x, before, after, tirx.const(value, dtype), name="T_pad")
    padder = {"reflect": topi.nn.reflect_pad, "edge": topi.nn.replicate_pad, "wrap": topi.nn.circular_pad}[mode]
    return padder(x, before, after, name="T_pad")


@lowering("tensor.shape")
def shape(x, *, start, end):
    dims = _dims(x)[start:end]

    def dim(i):
        value = tirx.const(0, "int64")
        for k, d in enumerate(dims):
            value = tirx.Select(i == k, tirx.const(d, "int64"), value)
        return value

    return te.compute((len(dims),), dim, name="T_shape")
