"""Fast forms of exp, sigmoid, tanh and erf for f32, as vectorizable
polynomials (TOPI's ``fast_exp``, ``fast_tanh``, ``fast_erf``).

LLVM turns ``exp``/``tanh``/``erf`` into one scalar libm call per element,
which costs more than the matmul or conv they follow; the polynomial forms
vectorize. Measured against float64 over [-30, 30]: relative error at most
1.1e-6 (exp), 3.2e-7 (tanh), 3.7e-7 (erf) — a few float32 ulps. Where the
exact result is 0 or overflows, the fast exp clamps its argument to about
[-88.4, 88.4]: ``fast.exp`` flushes arguments below -88.37 to 0 (so
``exp(-inf)`` is 0) and is used only where the argument is bounded above
(softmax); inside sigmoid, ``sigmoid(-1000)`` gives ~4e-39 instead of 0. NaN stays NaN.
f64 keeps the exact functions.
"""

from tvm import te, tirx, topi

#: (integer type of the same width, exponent-all-ones pattern) per float type
_NAN_BITS = {"float16": ("int16", 0x7C00), "float32": ("int32", 0x7F800000), "float64": ("int64", 0x7FF0000000000000)}


def is_nan(v):
    """``v`` is NaN, as a test TVM vectorizes: its bits, sign cleared, above
    infinity's. (TVM's loop vectorizer scalarizes ``tirx.isnan``: a whole
    epilogue that tests for NaN -- a GELU after a matmul, a NaN-keeping
    max -- then ran one element at a time; ``x != x`` is folded to false.)"""
    ty = str(v.ty)
    if ty == "bfloat16":  # TVM computes bfloat16 in float32 (its bits are not an int16 to LLVM)
        v, ty = v.astype("float32"), "float32"
    if ty not in _NAN_BITS:
        return tirx.isnan(v)
    itype, inf = _NAN_BITS[ty]
    mask = (1 << (int(itype[3:]) - 1)) - 1
    return (tirx.reinterpret(itype, v) & tirx.const(mask, itype)) > tirx.const(inf, itype)


def _keep_nan(x: te.Tensor, y: te.Tensor) -> te.Tensor:
    return te.compute(x.shape, lambda *i: tirx.Select(is_nan(x(*i)), x(*i), y(*i)), name="keep_nan")


def exp(x: te.Tensor) -> te.Tensor:
    """Below -88.37 (where e^x is under the smallest normal float, -inf
    included) the result is 0 rather than the clamped polynomial's ~6e-39."""
    if str(x.dtype) != "float32":
        return topi.exp(x)
    y = topi.fast_exp(x)
    low, zero = tirx.const(-88.37, "float32"), tirx.const(0, "float32")
    flushed = te.compute(x.shape, lambda *i: tirx.Select(x(*i) < low, zero, y(*i)), name="exp_flush")
    return _keep_nan(x, flushed)


def sigmoid(x: te.Tensor) -> te.Tensor:
    if str(x.dtype) != "float32":
        return topi.sigmoid(x)
    one = tirx.const(1, "float32")
    e = topi.fast_exp(topi.negative(x))
    return _keep_nan(x, te.compute(x.shape, lambda *i: one / (one + e(*i)), name="sigmoid"))


def tanh(x: te.Tensor) -> te.Tensor:
    assert str(x.dtype) == "float32"
    return _keep_nan(x, topi.fast_tanh(x))


def erf(x: te.Tensor) -> te.Tensor:
    assert str(x.dtype) == "float32"
    return _keep_nan(x, topi.fast_erf(x))


def erf_or_exact(x: te.Tensor) -> te.Tensor:
    return erf(x) if str(x.dtype) == "float32" else topi.erf(x)
