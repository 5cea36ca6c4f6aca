"""ONNX activation converters whose behaviour depends on attributes or inputs.

The attribute-free activations (Relu, Sigmoid, HardSwish, ...) are table
entries in ``math.py``.
"""

from __future__ import annotations

import numpy as np

from ..registry import converter


@converter("LeakyRelu")
def leaky_relu(ctx, X, *, alpha=0.01):
    return ctx.op("math.leaky_relu", [X], alpha=alpha)


@converter("Elu")
def elu(ctx, X, *, alpha=1.0):
    return ctx.op("math.elu", [X], alpha=alpha)


@converter("Selu")
def selu(ctx, X, *, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875):
    return ctx.op("math.selu", [X], alpha=alpha, gamma=gamma)


@converter("HardSigmoid")
def hard_sigmoid(ctx, X, *, alpha=0.2, beta=0.5):
    return ctx.op("math.hard_sigmoid", [X], alpha=alpha, beta=beta)


@converter("Gelu", since=20)
def gelu(ctx, X, *, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise ctx.error(f"approximate='{approximate}' is not an ONNX Gelu mode; use 'none' or 'tanh'")
    return ctx.op("math.gelu", [X], approximate=approximate)


@converter("PRelu")
def prelu(ctx, X, slope):
    return ctx.op("math.prelu", [X, slope])


def _open_bounds(x) -> tuple[float, float]:
    """An omitted bound is the type's finite limit, as in onnxruntime: an
    infinite input is clipped to -FLT_MAX/FLT_MAX, not kept infinite."""
    dtype = x.type.np_dtype
    info = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype)
    return float(info.min), float(info.max)


@converter("Clip", since=1)
def clip_attributes(ctx, input, *, min=None, max=None):  # noqa: A002
    low, high = _open_bounds(input)
    return ctx.op("math.clip", [input], min=low if min is None else min, max=high if max is None else max)


@converter("Clip", since=11)
def clip(ctx, input, min=None, max=None):  # noqa: A002  (ONNX's input names)
    """Since opset 11 the bounds are inputs; braze needs them at compile time."""
    low, high = _open_bounds(input)
    low = ctx.scalar(min, low, "'min'")
    high = ctx.scalar(max, high, "'max'")
    return ctx.op("math.clip", [input], min=float(low), max=float(high))
