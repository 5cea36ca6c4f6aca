"""Normalizations: ``nn.layer_norm``, ``nn.batch_norm``, ``nn.instance_norm``
and ``nn.lrn`` (inference forms only)."""

from __future__ import annotations

import numpy as np

from ...errors import VerifyError
from ..registry import Float, Int, Kind, OpDef, broadcast_shapes, register
from ..types import FLOAT_DTYPES, TensorType
from .nn import check_axis, wide


def _float(x: TensorType) -> None:
    if x.dtype not in FLOAT_DTYPES:
        raise VerifyError(f"needs a float tensor, got {x}")


def _per_channel(x: TensorType, same_dtype: bool, **params: TensorType) -> None:
    """Checks that each parameter is a float vector with one value per channel
    (of x's element type when ``same_dtype``)."""
    if x.rank < 2:
        raise VerifyError(f"needs an input of rank 2 or more (N, C, ...), got {x}")
    for name, t in params.items():
        if t.shape != (x.shape[1],) or t.dtype not in FLOAT_DTYPES or same_dtype and t.dtype != x.dtype:
            raise VerifyError(f"'{name}' must be {TensorType((x.shape[1],), x.dtype)}"
                              f"{'' if same_dtype else ' (or another float type)'}, got {t}")


def _channel_vector(v: np.ndarray, rank: int) -> np.ndarray:
    """A (C,) vector shaped to broadcast over (N, C, ...)."""
    return wide(v).reshape(-1, *[1] * (rank - 2))


def _normalize(x: np.ndarray, axes: tuple[int, ...], epsilon: float) -> np.ndarray:
    """(x - mean) / sqrt(var + epsilon) over ``axes``, in float64."""
    x = wide(x)
    mean = x.mean(axis=axes, keepdims=True)
    var = np.square(x - mean).mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + epsilon)


@register
class LayerNorm(OpDef):
    """Normalizes over dims ``axis`` .. rank-1, then ``* scale + bias``
    (each broadcast to those trailing dims)."""

    name = "nn.layer_norm"
    kind = Kind.REDUCE
    operands = ("x", "scale", "bias?")
    attrs = {"axis": Int(), "epsilon": Float(1e-5)}

    def infer(self, x, scale, bias=None, *, axis, epsilon):
        _float(x)
        check_axis(x, axis)
        normalized = x.shape[axis:]
        for name, t in (("scale", scale), ("bias", bias)):
            if t is not None and (t.dtype != x.dtype or broadcast_shapes(normalized, t.shape) != normalized):
                raise VerifyError(f"'{name}' {t} must be a {x.dtype} tensor that broadcasts to the "
                                  f"normalized dims {list(normalized)}")
        return x

    def evaluate(self, x, scale, bias=None, *, axis, epsilon):
        y = _normalize(x, tuple(range(axis, x.ndim)), epsilon) * wide(scale)
        if bias is not None:
            y = y + wide(bias)
        return y.astype(x.dtype)


@register
class BatchNorm(OpDef):
    """Inference batch normalization over channel dim 1:
    ``(x - mean) / sqrt(var + epsilon) * scale + bias`` with (C,) parameters."""

    name = "nn.batch_norm"
    kind = Kind.BROADCAST
    operands = ("x", "scale", "bias", "mean", "var")
    attrs = {"epsilon": Float(1e-5)}

    def infer(self, x, scale, bias, mean, var, *, epsilon):
        _float(x)
        _per_channel(x, same_dtype=False, scale=scale, bias=bias, mean=mean, var=var)
        return x

    def evaluate(self, x, scale, bias, mean, var, *, epsilon):
        scale, bias, mean, var = (_channel_vector(v, x.ndim) for v in (scale, bias, mean, var))
        return ((wide(x) - mean) / np.sqrt(var + epsilon) * scale + bias).astype(x.dtype)


@register
class InstanceNorm(OpDef):
    """Normalizes each (n, c) over the spatial dims, then ``* scale + bias``
    with (C,) parameters."""

    name = "nn.instance_norm"
    kind = Kind.REDUCE
    operands = ("x", "scale", "bias")
    attrs = {"epsilon": Float(1e-5)}

    def infer(self, x, scale, bias, *, epsilon):
        _float(x)
        if x.rank < 3:
            raise VerifyError(f"needs an input of rank 3 or more (N, C, spatial...), got {x}")
        _per_channel(x, same_dtype=True, scale=scale, bias=bias)
        return x

    def evaluate(self, x, scale, bias, *, epsilon):
        y = _normalize(x, tuple(range(2, x.ndim)), epsilon)
        return (y * _channel_vector(scale, x.ndim) + _channel_vector(bias, x.ndim)).astype(x.dtype)


@register
class LRN(OpDef):
    """Local response normalization across channels (ONNX LRN):
    ``x / (bias + alpha / size * sum of x^2 over channels
    [c - (size-1)//2, c + ceil((size-1)/2)]) ** beta``."""

    name = "nn.lrn"
    kind = Kind.OPAQUE
    operands = ("x",)
    attrs = {"size": Int(), "alpha": Float(1e-4), "beta": Float(0.75), "bias": Float(1.0)}

    def infer(self, x, *, size, alpha, beta, bias):
        _float(x)
        if x.rank < 3 or size < 1:
            raise VerifyError(f"needs an input of rank 3 or more (N, C, spatial...) and size >= 1, "
                              f"got {x} and size={size}")
        return x

    def evaluate(self, x, *, size, alpha, beta, bias):
        channels, before = x.shape[1], (size - 1) // 2
        widths = [(0, 0), (before, size - 1 - before)] + [(0, 0)] * (x.ndim - 2)
        squares = np.pad(np.square(wide(x)), widths)
        window_sum = sum(squares[:, i:i + channels] for i in range(size))
        return (wide(x) / (bias + alpha / size * window_sum) ** beta).astype(x.dtype)
