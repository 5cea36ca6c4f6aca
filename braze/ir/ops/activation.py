"""Activation functions: ``math.*`` ops with a formula of several steps.

Float formulas are evaluated in f64 and rounded once (``in_f64``), so the
references are accurate to the rounding of the tensor's own type.
"""

from __future__ import annotations

import numpy as np

from ...errors import VerifyError
from ..registry import Float, Kind, Str, broadcast_shapes, define
from ..types import TensorType
from .math import erf64, float_only, in_f64, numeric, unary

_SQRT_2_OVER_PI = float(np.sqrt(2 / np.pi))


def _clip(x, *, min, max):  # noqa: A002  (the attribute names)
    return np.minimum(np.maximum(x, _bound(min, x.dtype)), _bound(max, x.dtype))


def _bound(v: float, dtype: np.dtype) -> np.ndarray:
    """A clip bound as a scalar of ``dtype``. An integer bound saturates to the
    type's range: an i64 bound near 2**63 is not exact as a float attribute."""
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        v = info.min if v < info.min else info.max if v > info.max else int(v)
    return np.asarray(v, dtype)


def _gelu(x, *, approximate):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x**3)))
    return 0.5 * x * (1 + erf64(x / np.sqrt(2)))


def _prelu_type(x: TensorType, slope: TensorType) -> TensorType:
    if x.dtype != slope.dtype:
        raise VerifyError(f"operand element types differ: {x.dtype} and {slope.dtype}")
    if broadcast_shapes(x.shape, slope.shape) != x.shape:
        raise VerifyError(f"slope {slope} must broadcast to the shape of x {x}")
    return x


unary("math.relu", lambda x: np.maximum(x, np.zeros((), x.dtype)), numeric, doc="max(x, 0).")
unary("math.leaky_relu", in_f64(lambda x, *, alpha: np.where(x < 0, alpha * x, x)), float_only,
      {"alpha": Float(0.01)}, doc="x if x >= 0 else alpha * x.")
unary("math.elu", in_f64(lambda x, *, alpha: np.where(x < 0, alpha * np.expm1(x), x)), float_only,
      {"alpha": Float(1.0)}, doc="x if x >= 0 else alpha * (e ** x - 1).")
unary("math.selu", in_f64(lambda x, *, alpha, gamma: gamma * np.where(x > 0, x, alpha * np.expm1(x))),
      float_only, {"alpha": Float(1.67326319217681884765625), "gamma": Float(1.05070102214813232421875)},
      doc="gamma * (x if x > 0 else alpha * (e ** x - 1)).")
unary("math.clip", _clip, numeric, {"min": Float(float("-inf")), "max": Float(float("inf"))},
      doc="min(max(x, min), max); integer tensors too (bounds saturate to the type's range).")
unary("math.hard_sigmoid", in_f64(lambda x, *, alpha, beta: np.clip(alpha * x + beta, 0, 1)), float_only,
      {"alpha": Float(0.2), "beta": Float(0.5)}, doc="max(0, min(1, alpha * x + beta)).")
unary("math.hard_swish", in_f64(lambda x: x * np.clip(x / 6 + 0.5, 0, 1)), float_only,
      doc="x * max(0, min(1, x / 6 + 1 / 2)).")
unary("math.softplus", in_f64(lambda x: np.logaddexp(0, x)), float_only, doc="log(1 + e ** x).")
unary("math.softsign", in_f64(lambda x: x / (1 + np.abs(x))), float_only, doc="x / (1 + |x|).")
unary("math.gelu", in_f64(_gelu), float_only, {"approximate": Str("none", choices=("none", "tanh"))},
      doc="x * Phi(x) = x / 2 * (1 + erf(x / sqrt(2))); with approximate=tanh, "
          "x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3))).")

define("math.prelu", Kind.BROADCAST, ("x", "slope"), _prelu_type,
       lambda x, slope: np.where(x < 0, x * slope, x),
       doc="x if x >= 0 else slope * x; slope broadcasts to the shape of x (ONNX PRelu).")
