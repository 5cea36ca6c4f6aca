"""Elementwise and broadcasting math: ``math.*``.

Families are declared with one line per op (``unary``/``binary``), so each
op still appears exactly once. Activation functions live in ``activation.py``.
Binary ops broadcast their operands the numpy way and need equal element
types; comparisons and predicates return ``i1``.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import VerifyError
from ..registry import Bool, Kind, Str, broadcast_shapes, define
from ..types import DTYPES, FLOAT_DTYPES, INT_DTYPES, TensorType


# --- type inference ------------------------------------------------------------------
def _same(x: TensorType, **_) -> TensorType:
    return x


def numeric(x: TensorType, **_) -> TensorType:
    if x.dtype == "i1":
        raise VerifyError(f"needs a numeric tensor, got {x}")
    return x


def float_only(x: TensorType, **_) -> TensorType:
    if x.dtype not in FLOAT_DTYPES:
        raise VerifyError(f"needs a float tensor, got {x}")
    return x


def _bool_only(x: TensorType, **_) -> TensorType:
    if x.dtype != "i1":
        raise VerifyError(f"needs an i1 tensor, got {x}")
    return x


def _float_predicate(x: TensorType, **_) -> TensorType:
    return float_only(x).with_dtype("i1")


def _broadcast(a: TensorType, b: TensorType, **_) -> TensorType:
    if a.dtype != b.dtype:
        raise VerifyError(f"operand element types differ: {a.dtype} and {b.dtype}")
    return TensorType(broadcast_shapes(a.shape, b.shape), a.dtype)


def _int_only(x: TensorType, **_) -> TensorType:
    if x.dtype not in INT_DTYPES:
        raise VerifyError(f"needs an integer tensor, got {x}")
    return x


def _int_broadcast(a: TensorType, b: TensorType, **_) -> TensorType:
    return _int_only(_broadcast(a, b))


def _shift(x: np.ndarray, y: np.ndarray, left: bool) -> np.ndarray:
    """ONNX BitShift: C's shifts, wrapping; a count outside [0, width) gives the sign's fill."""
    bits = x.dtype.itemsize * 8
    count = y.astype(np.int64)
    outside = (count < 0) | (count >= bits)
    safe = np.where(outside, 0, count).astype(x.dtype)
    with np.errstate(over="ignore"):
        shifted = np.left_shift(x, safe) if left else np.right_shift(x, safe)
    fill = np.zeros_like(x) if left or x.dtype.kind == "u" else np.where(x < 0, -1, 0).astype(x.dtype)
    return np.where(outside, fill, shifted).astype(x.dtype)


def _compare(a: TensorType, b: TensorType, **_) -> TensorType:
    return _broadcast(a, b).with_dtype("i1")


def _logical(a: TensorType, b: TensorType, **_) -> TensorType:
    return _bool_only(_broadcast(a, b))


def _where(cond: TensorType, lhs: TensorType, rhs: TensorType, **_) -> TensorType:
    if cond.dtype != "i1":
        raise VerifyError(f"condition must be an i1 tensor, got {cond}")
    return _broadcast(lhs, rhs).with_shape(broadcast_shapes(cond.shape, lhs.shape, rhs.shape))


def _cast(x: TensorType, *, to: str) -> TensorType:
    return x.with_dtype(to)


def _bitcast(x: TensorType, *, to: str) -> TensorType:
    width = {"i1": 8}.get(x.dtype, np.dtype(DTYPES[x.dtype]).itemsize * 8)
    if np.dtype(DTYPES[to]).itemsize * 8 != width:
        raise VerifyError(f"bitcast keeps the bits: {x.dtype} has {width}, {to} has "
                          f"{np.dtype(DTYPES[to]).itemsize * 8}")
    return x.with_dtype(to)


def unary(name: str, fn, infer=_same, attrs=None, doc: str = ""):
    return define(name, Kind.ELEMWISE, ("x",), infer, fn, attrs, doc)


def binary(name: str, fn, infer=_broadcast, attrs=None, doc: str = ""):
    return define(name, Kind.BROADCAST, ("lhs", "rhs"), infer, fn, attrs, doc)


# --- references that numpy does not spell the ONNX way ---------------------------------
def _is_int(x: np.ndarray) -> bool:
    return np.issubdtype(x.dtype, np.integer)


def _div(a, b):
    if not _is_int(a):
        return np.divide(a, b)
    # Integer division truncates toward zero (C, onnxruntime); numpy floors.
    q = np.floor_divide(a, b)
    return q + ((q * b != a) & ((a < 0) != (b < 0))).astype(q.dtype)


def _pow(base, exponent):
    if not _is_int(base):
        return np.power(base, exponent)
    # onnxruntime computes integer powers with std::pow in double and truncates
    # (so 2 ** -1 == 0); numpy refuses negative integer exponents.
    return np.power(base.astype(np.float64), exponent.astype(np.float64)).astype(base.dtype)


def _mod(a, b, *, fmod):
    return np.fmod(a, b) if fmod else np.mod(a, b)


def in_f64(fn):
    """A float reference computed in f64 and rounded to the tensor's own type
    once, so that a formula of several steps does not round at each."""
    def reference(x, **attrs):
        return np.asarray(fn(x.astype(np.float64), **attrs)).astype(x.dtype)
    return reference


_ERF = np.frompyfunc(math.erf, 1, 1)


def erf64(x: np.ndarray) -> np.ndarray:
    """erf of a float64 array. numpy has none; libm's is accurate to an ulp of f64."""
    return np.asarray(_ERF(x), np.float64)


def _isinf(x, *, detect_positive, detect_negative):
    return (x == np.inf) & detect_positive | (x == -np.inf) & detect_negative


# --- binary arithmetic ---------------------------------------------------------------
binary("math.add", np.add, doc="lhs + rhs, broadcast.")
binary("math.sub", np.subtract, doc="lhs - rhs, broadcast.")
binary("math.mul", np.multiply, doc="lhs * rhs, broadcast.")
binary("math.div", _div, doc="lhs / rhs, broadcast; integer division truncates toward zero (like C).")
binary("math.pow", _pow,
       doc="lhs ** rhs, broadcast; integer powers are computed in f64 and truncated (2 ** -1 == 0).")
binary("math.mod", _mod, attrs={"fmod": Bool(False)},
       doc="Remainder, broadcast: with the sign of rhs (Python's %), or of lhs when fmod (C's fmod).")
binary("math.min", np.minimum, doc="Elementwise minimum, broadcast; NaN wins.")
binary("math.max", np.maximum, doc="Elementwise maximum, broadcast; NaN wins.")

define("math.where", Kind.BROADCAST, ("cond", "lhs", "rhs"), _where, np.where,
       doc="lhs where cond (i1) is true, else rhs; all three broadcast together.")

# --- comparisons and logic: i1 results ------------------------------------------------------
binary("math.equal", np.equal, _compare, doc="lhs == rhs -> i1, broadcast.")
binary("math.greater", np.greater, _compare, doc="lhs > rhs -> i1, broadcast.")
binary("math.less", np.less, _compare, doc="lhs < rhs -> i1, broadcast.")
binary("math.greater_equal", np.greater_equal, _compare, doc="lhs >= rhs -> i1, broadcast.")
binary("math.less_equal", np.less_equal, _compare, doc="lhs <= rhs -> i1, broadcast.")
binary("math.and", np.logical_and, _logical, doc="Logical and of i1 tensors, broadcast.")
binary("math.or", np.logical_or, _logical, doc="Logical or of i1 tensors, broadcast.")
binary("math.xor", np.logical_xor, _logical, doc="Logical exclusive or of i1 tensors, broadcast.")
unary("math.not", np.logical_not, _bool_only, doc="Logical not of an i1 tensor.")

# --- bitwise: integer tensors -----------------------------------------------------------------
binary("math.bitwise_and", np.bitwise_and, _int_broadcast, doc="Bitwise and of integer tensors, broadcast.")
binary("math.bitwise_or", np.bitwise_or, _int_broadcast, doc="Bitwise or of integer tensors, broadcast.")
binary("math.bitwise_xor", np.bitwise_xor, _int_broadcast, doc="Bitwise exclusive or of integer tensors, broadcast.")
unary("math.bitwise_not", np.invert, _int_only, doc="Bitwise not of an integer tensor.")
binary("math.shift_left", lambda x, y: _shift(x, y, True), _int_broadcast,
       doc="lhs shifted left by rhs bits (bits past the top dropped), broadcast; a shift below 0 or of "
           "the width or more gives 0.")
binary("math.shift_right", lambda x, y: _shift(x, y, False), _int_broadcast,
       doc="lhs shifted right by rhs bits (arithmetic for signed types), broadcast; a shift below 0 or of "
           "the width or more gives what the sign alone does: -1 for a negative lhs, else 0.")

# --- unary -----------------------------------------------------------------------------
unary("math.neg", np.negative, numeric, doc="-x.")
unary("math.abs", np.abs, numeric, doc="|x|.")
unary("math.sign", np.sign, numeric, doc="-1, 0 or 1 by the sign of x (NaN stays NaN).")
unary("math.sqrt", np.sqrt, float_only, doc="Square root.")
unary("math.reciprocal", np.reciprocal, float_only, doc="1 / x.")
unary("math.exp", np.exp, float_only, doc="e ** x.")
unary("math.log", np.log, float_only, doc="Natural logarithm.")
unary("math.sin", np.sin, float_only, doc="Sine (radians).")
unary("math.cos", np.cos, float_only, doc="Cosine (radians).")
unary("math.tanh", np.tanh, float_only, doc="Hyperbolic tangent.")
unary("math.erf", in_f64(erf64), float_only, doc="The Gauss error function.")
unary("math.tan", np.tan, float_only, doc="Tangent (radians).")
unary("math.asin", np.arcsin, float_only, doc="Inverse sine.")
unary("math.acos", np.arccos, float_only, doc="Inverse cosine.")
unary("math.atan", np.arctan, float_only, doc="Inverse tangent.")
unary("math.sinh", np.sinh, float_only, doc="Hyperbolic sine.")
unary("math.cosh", np.cosh, float_only, doc="Hyperbolic cosine.")
unary("math.asinh", np.arcsinh, float_only, doc="Inverse hyperbolic sine.")
unary("math.acosh", np.arccosh, float_only, doc="Inverse hyperbolic cosine.")
unary("math.atanh", np.arctanh, float_only, doc="Inverse hyperbolic tangent.")
unary("math.sigmoid", in_f64(lambda x: 1 / (1 + np.exp(-x))), float_only, doc="1 / (1 + e ** -x).")
unary("math.floor", np.floor, float_only, doc="Round toward -inf.")
unary("math.ceil", np.ceil, float_only, doc="Round toward +inf.")
unary("math.round", np.round, float_only, doc="Round to the nearest integer, halves to even.")
unary("math.isnan", np.isnan, _float_predicate, doc="x is NaN -> i1.")
unary("math.isinf", _isinf, _float_predicate,
      {"detect_positive": Bool(True), "detect_negative": Bool(True)},
      doc="x is +inf (if detect_positive) or -inf (if detect_negative) -> i1.")
unary("math.bitcast", lambda x, *, to: np.ascontiguousarray(x).view(DTYPES[to]), _bitcast,
      {"to": Str(choices=DTYPES)}, doc="The same bits read as the element type `to`, of the same width.")
unary("math.cast", lambda x, *, to: x.astype(DTYPES[to]), _cast, {"to": Str(choices=DTYPES)},
      doc="Convert to the element type `to` (an IR dtype name); float to int truncates, "
          "nonzero (and NaN) to i1 is true.")
