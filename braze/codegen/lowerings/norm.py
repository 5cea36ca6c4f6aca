"""Lowerings of the normalizations: ``nn.layer_norm``, ``nn.batch_norm``,
``nn.instance_norm`` and ``nn.lrn``.

Mean and variance are two passes (the mean, then the mean of squared
deviations), as in the references: TOPI's ``layer_norm`` takes E[x^2] - E[x]^2,
which cancels catastrophically when the mean is large against the spread.
16-bit floats compute in float32.
"""

from math import prod

from tvm import te, tirx, topi

from ..registry import lowering
from .reduce import accumulate, cast, dtype

_WIDTH = {"float16": 1, "bfloat16": 1, "float32": 2, "float64": 3}


def _normalize(x, axes, epsilon):
    """(x - mean) / sqrt(var + epsilon) over ``axes``, in x's type."""
    count = float(prod(int(x.shape[a]) for a in axes))
    mean = topi.divide(topi.sum(x, axis=axes, keepdims=True), count)
    centered = topi.subtract(x, mean)
    var = topi.divide(topi.sum(topi.multiply(centered, centered), axis=axes, keepdims=True), count)
    return topi.divide(centered, topi.sqrt(topi.add(var, epsilon)))


def _channel(v, rank, to):
    """A (C,) vector in type ``to``, shaped to broadcast over (N, C, ...)."""
    return topi.reshape(cast(v, to), (int(v.shape[0]), *[1] * (rank - 2)))


@lowering("nn.layer_norm")
def layer_norm(x, scale, bias=None, *, axis, epsilon):
    # scale and bias broadcast to the trailing (normalized) dims: numpy broadcasting
    wide = accumulate(x)
    y = topi.multiply(_normalize(wide, list(range(axis, len(x.shape))), epsilon), cast(scale, dtype(wide)))
    if bias is not None:
        y = topi.add(y, cast(bias, dtype(wide)))
    return cast(y, dtype(x))


@lowering("nn.batch_norm")
def batch_norm(x, scale, bias, mean, var, *, epsilon):
    # the parameters may have another float type: compute in the widest
    wide = max([dtype(t) for t in (x, scale, bias, mean, var)] + ["float32"], key=_WIDTH.get)
    rank = len(x.shape)
    scale, bias, mean, var = (_channel(v, rank, wide) for v in (scale, bias, mean, var))
    centered = topi.subtract(cast(x, wide), mean)
    y = topi.add(topi.multiply(topi.divide(centered, topi.sqrt(topi.add(var, epsilon))), scale), bias)
    return cast(y, dtype(x))


@lowering("nn.instance_norm")
def instance_norm(x, scale, bias, *, epsilon):
    wide, rank = accumulate(x), len(x.shape)
    y = _normalize(wide, list(range(2, rank)), epsilon)
    y = topi.add(topi.multiply(y, _channel(scale, rank, dtype(wide))), _channel(bias, rank, dtype(wide)))
    return cast(y, dtype(x))


@lowering("nn.lrn")
def lrn(x, *, size, alpha, beta, bias):
    """ONNX's window over channels is [c - (size-1)//2, c + ceil((size-1)/2)],
    which differs from TOPI's lrn for even sizes."""
    wide = accumulate(x)
    channels, before = int(x.shape[1]), (size - 1) // 2
    r = te.reduce_axis((0, size), name="r")

    def window_sum(n, c, *s):
        # te.sum's ``where`` is lost by te.create_prim_func: guard the read instead
        j = c - before + r
        square = tirx.if_then_else(tirx.all(j >= 0, j < channels), wide[(n, j, *s)] * wide[(n, j, *s)],
                                   tirx.const(0, wide.dtype))
        return te.sum(square, axis=r)

    squares = te.compute(x.shape, window_sum, name="lrn_sum")
    scaled = topi.add(topi.multiply(squares, alpha / size), bias)
    return cast(topi.divide(wide, topi.power(scaled, beta)), dtype(x))
