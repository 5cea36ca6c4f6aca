"""ONNX elementwise, comparison, logic and cast converters.

Activation functions with attributes are in ``activation.py``.
"""

from __future__ import annotations

import numpy as np
import onnx

from ...ir.types import FLOAT_DTYPES
from ..importer import onnx_dtype
from ..registry import converter

# Binary ops that, before opset 7, broadcast only when asked (``broadcast``/``axis``).
BINARY = {
    "Add": "math.add", "Sub": "math.sub", "Mul": "math.mul", "Div": "math.div",
    "Equal": "math.equal", "Greater": "math.greater", "Less": "math.less",
    "And": "math.and", "Or": "math.or", "Xor": "math.xor",
}
COMPARE_12 = {"GreaterOrEqual": "math.greater_equal", "LessOrEqual": "math.less_equal"}
UNARY = {
    "Neg": "math.neg", "Abs": "math.abs", "Sign": "math.sign", "Sqrt": "math.sqrt",
    "Reciprocal": "math.reciprocal", "Exp": "math.exp", "Log": "math.log", "Sin": "math.sin",
    "Cos": "math.cos", "Tanh": "math.tanh", "Erf": "math.erf", "Sigmoid": "math.sigmoid",
    "Floor": "math.floor", "Ceil": "math.ceil", "Round": "math.round", "Not": "math.not",
    "IsNaN": "math.isnan", "Relu": "math.relu", "HardSwish": "math.hard_swish",
    "Softplus": "math.softplus", "Softsign": "math.softsign", "Tan": "math.tan", "Asin": "math.asin",
    "Acos": "math.acos", "Atan": "math.atan", "Sinh": "math.sinh", "Cosh": "math.cosh", "Asinh": "math.asinh",
    "Acosh": "math.acosh", "Atanh": "math.atanh",
}
BITWISE_18 = {"BitwiseAnd": "math.bitwise_and", "BitwiseOr": "math.bitwise_or", "BitwiseXor": "math.bitwise_xor"}
# Variadic ops, folded left to right into chains of binary ops.
VARIADIC = {"Sum": "math.add", "Min": "math.min", "Max": "math.max"}


def _binary(op: str):
    def convert(ctx, A, B):
        return ctx.op(op, [A, B])
    return convert


def _legacy_binary(op: str):
    def convert(ctx, A, B, *, broadcast=0, axis=None):
        return ctx.op(op, [A, _legacy_broadcast(ctx, A, B, broadcast, axis)])
    return convert


def _legacy_broadcast(ctx, A, B, broadcast: int, axis: int | None):
    """B reshaped so that numpy broadcasting gives the pre-opset-7 meaning:
    B's dims line up with A's starting at ``axis`` (by default, A's last ones)."""
    a, b = A.type.shape, B.type.shape
    if not broadcast:
        if a != b:
            raise ctx.error(f"inputs of shapes {list(a)} and {list(b)} differ, but broadcast=0 "
                            "needs equal shapes; set broadcast=1 or re-export the model at opset >= 7")
        return B
    if B.type.size == 1:  # a scalar in any rank broadcasts everywhere
        return B if len(b) <= len(a) else ctx.op("tensor.reshape", [B], shape=())
    start = len(a) - len(b) if axis is None else axis + len(a) if axis < 0 else axis
    window = a[start:start + len(b)] if start >= 0 else ()
    if len(window) != len(b) or any(d not in (w, 1) for w, d in zip(window, b)):
        raise ctx.error(f"input B of shape {list(b)} does not match the dims of A {list(a)} "
                        f"starting at axis {start}")
    trailing = len(a) - start - len(b)
    return B if trailing == 0 else ctx.op("tensor.reshape", [B], shape=b + (1,) * trailing)


def _unary(op: str):
    def convert(ctx, X):
        return ctx.op(op, [X])
    return convert


def _variadic(op: str):
    def convert(ctx, *inputs):
        return _chain(ctx, op, inputs)
    return convert


def _chain(ctx, op: str, inputs):
    out = inputs[0]
    for x in inputs[1:]:
        out = ctx.op(op, [out, x])
    return out


for _onnx, _ir in BINARY.items():
    converter(_onnx, since=1)(_legacy_binary(_ir))
    converter(_onnx, since=7)(_binary(_ir))
converter("Pow", since=1)(_legacy_binary("math.pow"))  # since 7: pow_ below
for _onnx, _ir in COMPARE_12.items():
    converter(_onnx, since=12)(_binary(_ir))
for _onnx, _ir in UNARY.items():
    converter(_onnx)(_unary(_ir))
for _onnx, _ir in BITWISE_18.items():
    converter(_onnx, since=18)(_binary(_ir))
converter("BitwiseNot", since=18)(_unary("math.bitwise_not"))


@converter("BitShift", since=11)
def bit_shift(ctx, X, Y, *, direction):
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.error(f"direction must be 'LEFT' or 'RIGHT', got {direction!r}")
    return ctx.op("math.shift_left" if direction == "LEFT" else "math.shift_right", [X, Y])
for _onnx, _ir in VARIADIC.items():
    converter(_onnx)(_variadic(_ir))


@converter("Mean")
def mean(ctx, *inputs):
    total = _chain(ctx, "math.add", inputs)
    if len(inputs) == 1:
        return total
    return ctx.op("math.div", [total, ctx.const(np.array(len(inputs), total.type.np_dtype))])


@converter("Pow", since=7)
def pow_(ctx, X, Y):
    base = X.type.dtype
    if base in FLOAT_DTYPES or Y.type.dtype not in FLOAT_DTYPES:
        return ctx.op("math.pow", [X, _cast(ctx, Y, base)])
    # An integer base with a float exponent: onnxruntime computes std::pow in
    # double and truncates (4 ** 0.5 == 2), so casting the exponent would be wrong.
    wide = ctx.op("math.pow", [_cast(ctx, X, "f64"), _cast(ctx, Y, "f64")])
    return ctx.op("math.cast", [wide], to=base)


def _cast(ctx, v, dtype: str):
    return v if v.type.dtype == dtype else ctx.op("math.cast", [v], to=dtype)


@converter("Mod", since=10)
def mod_10(ctx, A, B, *, fmod=0):
    if not fmod and A.type.dtype in FLOAT_DTYPES:
        raise ctx.error("Mod of float tensors needs fmod=1 (ONNX leaves fmod=0 undefined for floats "
                        "before opset 28)")
    return mod(ctx, A, B, fmod=fmod)


@converter("Mod", since=28)
def mod(ctx, A, B, *, fmod=0):
    """Since opset 28, fmod=0 on floats is Python's % (the sign of B)."""
    return ctx.op("math.mod", [A, B], fmod=bool(fmod))


@converter("Where", since=9)
def where(ctx, condition, X, Y):
    return ctx.op("math.where", [condition, X, Y])


@converter("IsInf", since=10)
def isinf(ctx, X, *, detect_negative=1, detect_positive=1):
    return ctx.op("math.isinf", [X], detect_positive=bool(detect_positive),
                  detect_negative=bool(detect_negative))


# ``saturate`` and ``round_mode`` only concern float8 types, which braze does not support.
@converter("Cast")
def cast(ctx, input, *, to, saturate=1, round_mode="up"):
    if isinstance(to, str):  # opset 1 names the type ("FLOAT") instead of numbering it
        if to not in onnx.TensorProto.DataType.keys():
            raise ctx.error(f"attribute 'to' names no ONNX type: '{to}'")
        to = onnx.TensorProto.DataType.Value(to)
    return _cast(ctx, input, onnx_dtype(to, f"node {ctx.node_name} (Cast): attribute 'to'"))


@converter("CastLike", since=15)
def cast_like(ctx, input, target_type, *, saturate=1, round_mode="up"):
    return _cast(ctx, input, target_type.type.dtype)


@converter("BitCast", since=26)
def bitcast(ctx, input, *, to):  # noqa: A002  (ONNX's input name)
    dtype = onnx_dtype(to, f"node {ctx.node_name} (BitCast): attribute 'to'")
    return ctx.op("math.bitcast", [input], to=dtype)
