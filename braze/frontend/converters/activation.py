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


def _scalar_like(ctx, x, value):
    """``value`` as a scalar constant of x's element type."""
    return ctx.const(np.array(value, x.type.np_dtype))


@converter("Celu", since=12)
def celu(ctx, X, *, alpha=1.0):
    """x where x > 0, else alpha * (exp(x / alpha) - 1)."""
    a = _scalar_like(ctx, X, alpha)
    negative = ctx.op("math.mul", [a, ctx.op("math.sub", [ctx.op("math.exp", [ctx.op("math.div", [X, a])]),
                                                          _scalar_like(ctx, X, 1)])])
    return ctx.op("math.where", [ctx.op("math.greater", [X, _scalar_like(ctx, X, 0)]), X, negative])


@converter("Shrink", since=9)
def shrink(ctx, input, *, bias=0.0, lambd=0.5):  # noqa: A002  (ONNX's input name)
    """x - bias where x > lambd, x + bias where x < -lambd, else 0."""
    lam, b, zero = (_scalar_like(ctx, input, v) for v in (lambd, bias, 0))
    inner = ctx.op("math.where", [ctx.op("math.less", [input, ctx.op("math.neg", [lam])]),
                                  ctx.op("math.add", [input, b]), zero])
    return ctx.op("math.where", [ctx.op("math.greater", [input, lam]), ctx.op("math.sub", [input, b]), inner])


@converter("ThresholdedRelu", since=10)
def thresholded_relu(ctx, X, *, alpha=1.0):
    """x where x > alpha, else 0."""
    return ctx.op("math.where", [ctx.op("math.greater", [X, _scalar_like(ctx, X, alpha)]), X,
                                 _scalar_like(ctx, X, 0)])
