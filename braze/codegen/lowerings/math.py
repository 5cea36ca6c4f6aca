"""Lowerings of the math ops (elementwise and broadcasting).

TOPI where its semantics are ONNX's; a custom compute where they are not:
TVM's ``min``/``max`` drop a NaN operand (they lower to ``a < b ? a : b``),
``topi.sign`` maps NaN to 0, TVM's ``tanh`` on CPU is ``(1 - e^-2x) / (1 +
e^-2x)``, which loses all relative accuracy near 0, and TVM's simplifier folds
``x - x`` to 0 and ``x == x`` to true, which is wrong for NaN and inf.

Half-precision float functions are evaluated in f32 and rounded once
(``in_f32``): TVM has no f16 ``erf``, and rounding each step of a formula to
f16 would be far less accurate than the f64 references.
"""

import numpy as np
from tvm import te, tirx, topi

from ..kernel import TVM_DTYPES
from ..registry import lowering
from . import fast

HALF = ("float16", "bfloat16")


# --- helpers (the activations use them too) ---------------------------------------------------------
def is_float(t) -> bool:
    return str(t.dtype).startswith(("float", "bfloat"))


def const(value, dtype):
    return tirx.const(value, str(dtype))


def in_f32(fn, *tensors):
    """``fn(*tensors)`` for float tensors, computed in f32 when they are f16/bf16."""
    dtype = str(tensors[0].dtype)
    if dtype not in HALF:
        return fn(*tensors)
    return topi.cast(fn(*[topi.cast(t, "float32") for t in tensors]), dtype)


def elementwise(fn, *tensors, name="T_elemwise"):
    """One compute applying the scalar function ``fn`` to the elements of
    ``tensors``, broadcast the numpy way."""
    shapes = [tuple(int(d) for d in t.shape) for t in tensors]
    shape = np.broadcast_shapes(*shapes)

    def element(t, t_shape, index):
        index = index[len(index) - len(t_shape):]
        return t(*[0 if d == 1 else i for d, i in zip(t_shape, index)])

    return te.compute(shape, lambda *i: fn(*[element(t, s, i) for t, s in zip(tensors, shapes)]), name=name)


def libm(name: str, x):
    """A C math library call (``tanhf`` for f32, ``tanh`` for f64)."""
    dtype = str(x.ty)
    return tirx.call_pure_extern(dtype, name + ("f" if dtype == "float32" else ""), x)


def _non_finite_nan(x):
    """0 where x is finite, NaN where it is NaN or inf: ``x - x`` without the simplifier's fold."""
    return elementwise(lambda v: tirx.Select(tirx.isfinite(v), const(0, v.ty), const(np.nan, v.ty)), x)


# --- binary arithmetic ----------------------------------------------------------------------------------
@lowering("math.add")
def add(lhs, rhs):
    return topi.add(lhs, rhs)


@lowering("math.sub")
def sub(lhs, rhs):
    if lhs.same_as(rhs) and is_float(lhs):
        return _non_finite_nan(lhs)
    return topi.subtract(lhs, rhs)


@lowering("math.mul")
def mul(lhs, rhs):
    return topi.multiply(lhs, rhs)


@lowering("math.div")
def div(lhs, rhs):
    # On integers topi.divide is TVM's `div`, which truncates toward zero as ONNX does.
    return topi.divide(lhs, rhs)


def _immediate(t) -> float | None:
    """The number a tensor holds everywhere when it is an immediate (a
    one-value constant the kernel took into its code), else None."""
    op = t.op
    body = getattr(op, "body", None)
    if body is not None and len(body) == 1 and isinstance(body[0], (tirx.FloatImm, tirx.IntImm)):
        return float(body[0].value)
    return None


#: constant exponents computed as products, where ``topi.power`` calls libm's
#: ``powf`` per element (and TVM warns at every ``pow(x, y)`` with y >= 3:
#: GPT-2's tanh GELU has ``x ** 3``). Each product rounds, so the result may
#: differ from ``powf``'s in the last bit or two.
_PRODUCT_POWERS = (2.0, 3.0, 4.0)


def _product_power(rhs, x) -> float | None:
    """The exponent, when ``x ** rhs`` is one of _PRODUCT_POWERS with no broadcast of x."""
    if len(rhs.shape) > len(x.shape) or any(int(d) != 1 for d in rhs.shape):
        return None
    n = _immediate(rhs)
    return n if n in _PRODUCT_POWERS else None


def _product(n: float):
    def power(v, _):
        square = v * v
        return square * square if n == 4.0 else square * v if n == 3.0 else square

    return lambda x, rhs: elementwise(power, x, rhs, name="T_power")


@lowering("math.pow")
def pow_(lhs, rhs):
    if is_float(lhs):
        n = _product_power(rhs, lhs)
        return in_f32(topi.power if n is None else _product(n), lhs, rhs)
    # Integer powers: in f64, truncated back (2 ** -1 == 0), as onnxruntime does.
    f64 = "float64"
    return elementwise(lambda a, b: tirx.pow(a.astype(f64), b.astype(f64)).astype(str(lhs.dtype)), lhs, rhs)


@lowering("math.mod")
def mod(lhs, rhs, *, fmod):
    if not is_float(lhs):
        return topi.mod(lhs, rhs) if fmod else topi.floor_mod(lhs, rhs)  # C's % / Python's %
    if fmod:
        return topi.mod(lhs, rhs)  # C's fmod on floats
    # in f32 for 16-bit floats: LLVM has no f16 copysign
    return in_f32(lambda a, b: elementwise(_python_fmod, a, b), lhs, rhs)


def _python_fmod(a, b):
    """Python's % on floats, numpy's way: fmod, moved to the sign of b."""
    r = tirx.truncmod(a, b)  # C's fmod on floats
    zero = const(0, r.ty)
    wrong_sign = tirx.any(tirx.all(r < zero, b > zero), tirx.all(r > zero, b < zero))
    return tirx.Select(wrong_sign, r + b, tirx.Select(r == zero, tirx.copysign(zero, b), r))


@lowering("math.min")
def min_(lhs, rhs):
    if not is_float(lhs):
        return topi.minimum(lhs, rhs)
    return elementwise(lambda a, b: tirx.Select(tirx.any(a < b, fast.is_nan(a)), a, b), lhs, rhs)


@lowering("math.max")
def max_(lhs, rhs):
    if not is_float(lhs):
        return topi.maximum(lhs, rhs)
    return elementwise(lambda a, b: tirx.Select(tirx.any(a > b, fast.is_nan(a)), a, b), lhs, rhs)


@lowering("math.where")
def where(cond, lhs, rhs):
    return topi.where(cond, lhs, rhs)


# --- comparisons and logic --------------------------------------------------------------------------------
def _comparison(topi_fn, reflexive: bool):
    """A comparison; ``reflexive``: true of x with itself unless x is NaN."""
    def lower(lhs, rhs):
        if lhs.same_as(rhs) and is_float(lhs) and reflexive:
            return elementwise(lambda v: tirx.Not(fast.is_nan(v)), lhs)  # not folded to true, as x == x would be
        if str(lhs.dtype) == "bool":  # LLVM cannot compare i1 values the way TVM emits them
            lhs, rhs = topi.cast(lhs, "int8"), topi.cast(rhs, "int8")
        return topi_fn(lhs, rhs)
    return lower


lowering("math.equal")(_comparison(topi.equal, True))
lowering("math.greater")(_comparison(topi.greater, False))
lowering("math.less")(_comparison(topi.less, False))
lowering("math.greater_equal")(_comparison(topi.greater_equal, True))
lowering("math.less_equal")(_comparison(topi.less_equal, True))


@lowering("math.and")
def and_(lhs, rhs):
    return topi.logical_and(lhs, rhs)


@lowering("math.or")
def or_(lhs, rhs):
    return topi.logical_or(lhs, rhs)


@lowering("math.xor")
def xor(lhs, rhs):
    return topi.logical_xor(lhs, rhs)


@lowering("math.not")
def not_(x):
    return topi.logical_not(x)


# --- unary ------------------------------------------------------------------------------------------------
@lowering("math.neg")
def neg(x):
    return topi.negative(x)


@lowering("math.abs")
def abs_(x):
    return topi.abs(x)


@lowering("math.sign")
def sign(x):
    def f(v):  # v itself where it is neither > 0 nor < 0: keeps 0, and NaN (which topi.sign makes 0)
        one = const(1, v.ty)
        return tirx.Select(v > 0, one, tirx.Select(v < 0, -one, v))
    return elementwise(f, x)


def _float_unary(topi_fn):
    def lower(x):
        return in_f32(topi_fn, x)
    return lower


for _name, _fn in [("sqrt", topi.sqrt), ("exp", topi.exp), ("log", topi.log), ("sin", topi.sin),
                   ("cos", topi.cos), ("erf", fast.erf_or_exact), ("sigmoid", fast.sigmoid), ("floor", topi.floor),
                   ("ceil", topi.ceil), ("round", topi.round)]:  # topi.round ties to even, as ONNX
    lowering(f"math.{_name}")(_float_unary(_fn))
for _name in ("tan", "asin", "acos", "atan", "asinh", "acosh", "atanh"):
    lowering(f"math.{_name}")(_float_unary(getattr(topi, _name)))


def _libm_unary(name: str):
    """The C library's function: TVM's LLVM code generator has no sinh or cosh intrinsic."""
    def lower(x):
        return in_f32(lambda v: elementwise(lambda e: libm(name, e), v), x)
    return lower


for _name in ("sinh", "cosh"):
    lowering(f"math.{_name}")(_libm_unary(_name))
for _name, _fn in [("bitwise_and", topi.bitwise_and), ("bitwise_or", topi.bitwise_or),
                   ("bitwise_xor", topi.bitwise_xor)]:
    lowering(f"math.{_name}")(_fn)
lowering("math.bitwise_not")(topi.bitwise_not)


def _shift(left: bool):
    """ONNX BitShift (ir/ops/math.py ``_shift``): a count outside [0, width) gives the sign's fill."""
    def lower(x, y):
        dtype = str(x.dtype)
        bits = int(dtype.removeprefix("u").removeprefix("int"))

        def f(v, n):
            count = n.astype("int64")
            outside = tirx.Or(count < 0, count >= bits)
            safe = tirx.Select(outside, const(0, dtype), n)
            shifted = (v << safe) if left else (v >> safe)
            if left or dtype.startswith("u"):
                fill = const(0, dtype)
            else:
                fill = tirx.Select(v < const(0, dtype), const(-1, dtype), const(0, dtype))
            return tirx.Select(outside, fill, shifted)

        return elementwise(f, x, y, name="shift")
    return lower


lowering("math.shift_left")(_shift(True))
lowering("math.shift_right")(_shift(False))


@lowering("math.reciprocal")
def reciprocal(x):
    return in_f32(lambda t: topi.divide(const(1, t.dtype), t), x)


@lowering("math.tanh")
def tanh(x):
    if str(x.dtype) == "float64":
        return elementwise(lambda v: libm("tanh", v), x)
    return in_f32(fast.tanh, x)


@lowering("math.isnan")
def isnan(x):
    if is_float(x):
        return elementwise(fast.is_nan, x)
    return topi.isnan(x)


@lowering("math.isinf")
def isinf(x, *, detect_positive, detect_negative):
    if detect_positive and detect_negative:
        return topi.isinf(x)
    if not (detect_positive or detect_negative):
        return elementwise(lambda v: tirx.const(False, "bool"), x)
    inf = float("inf") if detect_positive else float("-inf")
    return elementwise(lambda v: v == const(inf, v.ty), x)


@lowering("math.bitcast")
def bitcast(x, *, to):
    dtype = TVM_DTYPES[to]
    if str(x.dtype) == "bool":  # stored as one byte; its bits are 0 or 1
        return topi.cast(x, dtype)
    return te.compute(x.shape, lambda *i: tirx.reinterpret(dtype, x(*i)), name="T_bitcast")


@lowering("math.cast")
def cast(x, *, to):
    # Float to int truncates toward zero; anything to bool is `!= 0` (NaN is true).
    return topi.cast(x, TVM_DTYPES[to])
