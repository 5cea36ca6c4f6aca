"""Lowerings of ``quant.quantize`` and ``quant.dequantize``: one elementwise
compute each, with the arithmetic of their references (ir/ops/quant.py)."""

from tvm import tirx

from ...ir.ops.quant import RANGES
from ..kernel import TVM_DTYPES
from ..registry import lowering
from .math import elementwise


@lowering("quant.dequantize")
def dequantize(x, scale, zero_point=None, *, dtype):
    out = TVM_DTYPES[dtype]

    def f(v, s, z=None):
        y = v.astype("float32")
        if z is not None:
            y = y - z.astype("float32")
        return (y * s.astype("float32")).astype(out)

    return elementwise(f, *[t for t in (x, scale, zero_point) if t is not None], name="dequantize")


@lowering("quant.quantize")
def quantize(x, scale, zero_point=None, *, dtype, compute, reciprocal=False):
    c, out = TVM_DTYPES[compute], TVM_DTYPES[dtype]
    wide = "float64" if compute == "f64" else "float32"
    lo, hi = RANGES[dtype]

    def f(v, s, z=None):
        if c in ("float16", "bfloat16"):  # divided in f32, rounded to the compute type once
            q = (v.astype("float32") / s.astype("float32")).astype(c).astype("float32")
        elif reciprocal:
            q = v.astype(c) * (tirx.const(1, c) / s.astype(c))
        else:
            q = v.astype(c) / s.astype(c)
        q = tirx.round(q).astype(wide)
        if z is not None:
            q = q + z.astype(wide)
        q = tirx.max(tirx.min(q, tirx.const(hi, wide)), tirx.const(lo, wide))
        return q.astype(out)

    return elementwise(f, *[t for t in (x, scale, zero_point) if t is not None], name="quantize")
