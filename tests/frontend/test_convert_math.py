"""Numerics of the math converters: reference interpreter vs onnxruntime."""

import numpy as np
import onnx
import pytest

from braze.frontend import import_onnx
from braze.ir.interpret import interpret
from onnx_check import check_against_ort, model, parse


def ints(*shape, low=-9, high=10, dtype=np.int32, nonzero=False, seed=0):
    values = np.random.default_rng(seed).integers(low, high, shape).astype(dtype)
    return np.where(values == 0, 1, values).astype(dtype) if nonzero else values


# --- binary arithmetic ---------------------------------------------------------------
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("opset", [7, 17])
def test_binary_broadcast(op, opset):
    check_against_ort(model("(float[2,3,4] a, float[3,1] b) => (float[2,3,4] y)", f"y = {op}(a, b)", opset))


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Min", "Max"])
@pytest.mark.parametrize("dtype", [("int32", np.int32), ("int64", np.int64)])
def test_binary_integers(op, dtype):
    # Div truncates toward zero: negative operands show it; a zero divisor would crash onnxruntime.
    onnx_type, np_type = dtype
    feeds = {"a": ints(3, 4, dtype=np_type), "b": ints(4, nonzero=True, dtype=np_type, seed=1)}
    check_against_ort(model(f"({onnx_type}[3,4] a, {onnx_type}[4] b) => ({onnx_type}[3,4] y)",
                            f"y = {op}(a, b)", 13), feeds)


@pytest.mark.parametrize("base, exponent", [("float", "float"), ("float", "int64"), ("int32", "int32"),
                                            ("int64", "int64"), ("int32", "float")])
def test_pow_mixed_types(base, exponent):
    # integer bases with negative or fractional exponents truncate, as in onnxruntime
    to_np = {"float": np.float32, "int32": np.int32, "int64": np.int64}
    a = ints(2, 3, low=1, high=6, dtype=to_np[base])
    b = np.array([-1, 0.5, 2], to_np[exponent]) if exponent == "float" else ints(3, low=-1, high=4,
                                                                                    dtype=to_np[exponent])
    check_against_ort(model(f"({base}[2,3] a, {exponent}[3] b) => ({base}[2,3] y)", "y = Pow(a, b)", 15),
                      {"a": a, "b": b})


def test_pow_opset7():
    a = np.abs(np.random.default_rng(0).standard_normal((2, 3))).astype(np.float32)
    check_against_ort(model("(float[2,3] a, float[1] b) => (float[2,3] y)", "y = Pow(a, b)", 7),
                      {"a": a, "b": np.array([1.7], np.float32)})


@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_integers(fmod):
    feeds = {"a": ints(3, 4), "b": ints(3, 1, nonzero=True, seed=1)}
    check_against_ort(model("(int32[3,4] a, int32[3,1] b) => (int32[3,4] y)", f"y = Mod<fmod={fmod}>(a, b)"),
                      feeds)


def test_mod_float():
    feeds = {"a": np.linspace(-5, 5, 12, dtype=np.float32).reshape(3, 4),
             "b": np.array([1.5, -2, 3, -0.7], np.float32)}
    check_against_ort(model("(float[3,4] a, float[4] b) => (float[3,4] y)", "y = Mod<fmod=1>(a, b)"), feeds)


def test_mod_float_fmod_0():
    """Since opset 28, fmod=0 is defined for floats: Python's %, the sign of b."""
    feeds = {"a": np.array([[-4.3, 7.2, 5.0, 0.0], [-0.0, 4.3, -7.2, 8.0]], np.float32),
             "b": np.array([2.1, -3.4, 8.0, -2.0], np.float32)}
    check_against_ort(model("(float[2,4] a, float[4] b) => (float[2,4] y)", "y = Mod(a, b)", 28), feeds)


# --- variadic ---------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["Sum", "Mean", "Min", "Max"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_variadic(op, n):
    shapes = ["2,3,4", "3,1", "4"][:n]
    names = [f"x{i}" for i in range(n)]
    inputs = ", ".join(f"float[{s}] {x}" for s, x in zip(shapes, names))
    check_against_ort(model(f"({inputs}) => (float[2,3,4] y)", f"y = {op}({', '.join(names)})", 13))


def test_variadic_integers():
    check_against_ort(model("(int64[2,3] a, int64[3] b, int64[1] c) => (int64[2,3] y)", "y = Max(a, b, c)", 13))


# --- where, comparisons, logic -------------------------------------------------------------
def test_where_three_way_broadcast():
    check_against_ort(model("(bool[2,1,4] c, float[3,1] a, int32[4] i) => (float[2,3,4] y)",
                            "b = Cast<to=1>(i) y = Where(c, a, b)", 16))


@pytest.mark.parametrize("op", ["Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"])
@pytest.mark.parametrize("dtype", ["float", "int64"])
def test_comparisons(op, dtype):
    # small integers make ties, so the "or equal" half is exercised too
    feeds = {"a": ints(2, 3, low=0, high=3, dtype=np.int64), "b": ints(3, low=0, high=3, dtype=np.int64, seed=1)}
    if dtype == "float":
        feeds = {k: v.astype(np.float32) for k, v in feeds.items()}
    check_against_ort(model(f"({dtype}[2,3] a, {dtype}[3] b) => (bool[2,3] y)", f"y = {op}(a, b)", 13), feeds)


def test_equal_bool():
    check_against_ort(model("(bool[2,3] a, bool[3] b) => (bool[2,3] y)", "y = Equal(a, b)", 13))


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logic(op):
    check_against_ort(model("(bool[2,3] a, bool[2,1] b) => (bool[2,3] y, bool[2,3] z)",
                            f"y = {op}(a, b) z = Not(y)"))


# --- unary -----------------------------------------------------------------------------
FLOAT_UNARY = ["Neg", "Abs", "Reciprocal", "Exp", "Erf", "Tanh", "Sigmoid", "Relu", "Floor", "Ceil", "Sign",
               "Sin", "Cos", "Softplus", "Softsign", "HardSwish"]


@pytest.mark.parametrize("op", FLOAT_UNARY)
def test_unary(op):
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32) * 3
    check_against_ort(model("(float[3,4] x) => (float[3,4] y)", f"y = {op}(x)"), {"x": x}, atol=1e-6)


@pytest.mark.parametrize("op", ["Sigmoid", "Tanh", "Exp", "Floor", "Abs", "Sign"])
@pytest.mark.parametrize("dtype, np_type, tol", [("float16", np.float16, 1e-3), ("double", np.float64, 1e-7)])
def test_unary_other_floats(op, dtype, np_type, tol):
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np_type) * 3
    check_against_ort(model(f"({dtype}[3,4] x) => ({dtype}[3,4] y)", f"y = {op}(x)"), {"x": x}, rtol=tol, atol=tol)


@pytest.mark.parametrize("op", ["Sqrt", "Log"])
def test_unary_positive(op):
    x = np.random.default_rng(0).uniform(0.01, 10, (3, 4)).astype(np.float32)
    check_against_ort(model("(float[3,4] x) => (float[3,4] y)", f"y = {op}(x)"), {"x": x})


def test_round_half_to_even():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -3.7], np.float32)
    check_against_ort(model("(float[8] x) => (float[8] y)", "y = Round(x)"), {"x": x})


@pytest.mark.parametrize("op", ["Neg", "Abs", "Sign", "Relu"])
def test_unary_integers(op):
    check_against_ort(model("(int32[3,4] x) => (int32[3,4] y)", f"y = {op}(x)", 14), {"x": ints(3, 4)})


@pytest.mark.parametrize("attrs", ["", "<detect_negative=0>", "<detect_positive=0>"])
def test_isinf_isnan(attrs):
    x = np.array([1.0, np.inf, -np.inf, np.nan, 0.0, -2.0], np.float32)
    check_against_ort(model("(float[6] x) => (bool[6] y, bool[6] z)", f"y = IsInf{attrs}(x) z = IsNaN(x)", 13),
                      {"x": x})


# --- cast --------------------------------------------------------------------------------
@pytest.mark.parametrize("source, target", [("float", "int32"), ("float", "bool"), ("float", "float16"),
                                            ("int64", "float"), ("bool", "float"), ("int32", "uint8"),
                                            ("float", "float")])
@pytest.mark.parametrize("opset", [6, 13, 19])
def test_cast(source, target, opset):
    to = onnx.TensorProto.DataType.Value(target.upper())
    check_against_ort(model(f"({source}[2,3] x) => ({target}[2,3] y)", f"y = Cast<to={to}>(x)", opset))


def test_cast_like():
    check_against_ort(model("(float[2,3] x, int64[1] t) => (int64[2,3] y)", "y = CastLike(x, t)", 15))


# --- before opset 7: broadcasting only when asked ----------------------------------------------
@pytest.mark.parametrize("b_shape, attrs, reshaped", [
    ((4,), "<broadcast=1>", (4,)),
    ((3, 4), "<broadcast=1>", (3, 4)),
    ((3,), "<broadcast=1, axis=1>", (3, 1)),
    ((2, 3), "<broadcast=1, axis=0>", (2, 3, 1)),
    ((3,), "<broadcast=1, axis=-2>", (3, 1)),
    ((1, 1), "<broadcast=1>", ()),
    ((2, 3, 4), "", (2, 3, 4)),
])
@pytest.mark.parametrize("op, fn", [("Add", np.add), ("Mul", np.multiply), ("Greater", np.greater)])
def test_legacy_broadcast(b_shape, attrs, reshaped, op, fn):
    # onnxruntime runs no model below opset 7, so numpy is the reference here
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    out = "bool" if op == "Greater" else "float"
    text = model(f"(float[2,3,4] a, float[{','.join(map(str, b_shape))}] b) => ({out}[2,3,4] y)",
                 f"y = {op}{attrs}(a, b)", 6)
    got = interpret(import_onnx(parse(text)), {"a": a, "b": b})["y"]
    np.testing.assert_array_equal(got, fn(a, b.reshape(reshaped)))
