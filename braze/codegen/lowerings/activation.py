"""Lowerings of the activation functions (``math.*`` ops defined in ir/ops/activation.py).

Mostly one custom compute each: TOPI's relu and clip drop NaN (TVM's max/min
lower to ``a > b ? a : b``), its softplus returns 0 instead of e^x below
x = -17, and its prelu takes a 1-D slope only. Clamps are written as selects
on ``x < lo`` and ``x > hi``, which keep NaN, as onnxruntime does.

Formulas are evaluated in the tensor's own float type as onnxruntime does
(f16/bf16 in f32, see ``in_f32``), so they round at each step where the f64
references round once: within a few ulps, with absolute errors of ~1e-7 where
a formula cancels (``e^x - 1`` near 0, ``1 + erf(x)`` for x < -3), as in
onnxruntime.
"""

import math

import numpy as np
from tvm import tirx, topi

from ..registry import lowering
from . import fast
from .math import const, elementwise, in_f32, is_float, libm


def _clamp(v, lo, hi):
    """min(max(v, lo), hi) that keeps NaN; ``None`` bounds are left open."""
    if lo is not None:
        v = tirx.Select(v < lo, lo, v)
    if hi is not None:
        v = tirx.Select(v > hi, hi, v)
    return v


@lowering("math.relu")
def relu(x):
    return elementwise(lambda v: tirx.Select(v < const(0, v.ty), const(0, v.ty), v), x)


@lowering("math.leaky_relu")
def leaky_relu(x, *, alpha):
    return in_f32(lambda v: topi.nn.leaky_relu(v, alpha), x)  # x > 0 ? x : x * alpha


@lowering("math.elu")
def elu(x, *, alpha):
    def f(v):
        return tirx.Select(v < const(0, v.ty), const(alpha, v.ty) * (tirx.exp(v) - const(1, v.ty)), v)
    return in_f32(lambda t: elementwise(f, t), x)


@lowering("math.selu")
def selu(x, *, alpha, gamma):
    def f(v):
        negative = const(alpha, v.ty) * (tirx.exp(v) - const(1, v.ty))
        return const(gamma, v.ty) * tirx.Select(v > const(0, v.ty), v, negative)
    return in_f32(lambda t: elementwise(f, t), x)


@lowering("math.clip")
def clip(x, *, min, max):  # noqa: A002  (the attribute names)
    lo, hi = _bound(min, x), _bound(max, x)
    return elementwise(lambda v: _clamp(v, lo, hi), x)


def _bound(v: float, x):
    """A bound as a constant of x's type, or None if it clips nothing. An
    integer bound saturates to the type's range (as the reference's ``_bound``)."""
    if math.isinf(v):
        return None
    if not is_float(x):
        info = np.iinfo(str(x.dtype))
        v = info.min if v < info.min else info.max if v > info.max else int(v)
    return const(v, x.dtype)


@lowering("math.hard_sigmoid")
def hard_sigmoid(x, *, alpha, beta):
    def f(v):
        return _clamp(const(alpha, v.ty) * v + const(beta, v.ty), const(0, v.ty), const(1, v.ty))
    return in_f32(lambda t: elementwise(f, t), x)


@lowering("math.hard_swish")
def hard_swish(x):
    def f(v):
        gate = _clamp(v / const(6, v.ty) + const(0.5, v.ty), const(0, v.ty), const(1, v.ty))
        return v * gate
    return in_f32(lambda t: elementwise(f, t), x)


@lowering("math.softplus")
def softplus(x):
    # max(x, 0) + log1p(e^-|x|): no overflow for large x, no underflow to 0 for small.
    def f(v):
        zero = const(0, v.ty)
        return tirx.Select(v > zero, v, zero) + tirx.log1p(tirx.exp(-tirx.abs(v)))
    return in_f32(lambda t: elementwise(f, t), x)


@lowering("math.softsign")
def softsign(x):
    return in_f32(lambda t: elementwise(lambda v: v / (const(1, v.ty) + tirx.abs(v)), t), x)


@lowering("math.gelu")
def gelu(x, *, approximate):
    """0.5 x (1 + erf(x / sqrt 2)), or with tanh's approximation; f32 uses
    the fast erf/tanh (fast.py), f64 the exact ones."""
    def exact(t):
        if approximate == "tanh":
            return elementwise(lambda v: const(0.5, v.ty) * v * (const(1, v.ty) + libm("tanh", _tanh_arg(v))), t)
        return elementwise(lambda v: const(0.5, v.ty) * v * (const(1, v.ty) + tirx.erf(v * const(math.sqrt(0.5),
                                                                                              v.ty))), t)

    def quick(t):
        if approximate == "tanh":
            inner = fast.tanh(elementwise(_tanh_arg, t))
        else:
            inner = fast.erf(elementwise(lambda v: v * const(math.sqrt(0.5), v.ty), t))
        return elementwise(lambda v, g: const(0.5, v.ty) * v * (const(1, v.ty) + g), t, inner)

    return exact(x) if str(x.dtype) == "float64" else in_f32(quick, x)


def _tanh_arg(v):
    return const(math.sqrt(2 / math.pi), v.ty) * (v + const(0.044715, v.ty) * v * v * v)


@lowering("math.prelu")
def prelu(x, slope):
    def f(v, s):
        return tirx.Select(v < const(0, v.ty), v * s, v)
    return in_f32(lambda a, b: elementwise(f, a, b), x, slope)
