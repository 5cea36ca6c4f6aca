"""Quantization: ``quant.quantize`` and ``quant.dequantize``.

ONNX's QuantizeLinear and DequantizeLinear, elementwise: ``scale`` and
``zero_point`` broadcast against ``x`` (a scalar for per-tensor, a tensor of
x's rank with one dim of x's size for per-axis; blocked scales are repeated
to x's shape by the importer). Both are kept as ops rather than decomposed
so that the ``fold-quant`` pass (passes/quant.py) can see a dequantize
feeding a conv or matmul and compute that product on the integers.

- ``quant.dequantize(x, scale, zero_point?) {dtype}``: ``(x - zero_point) *
  scale`` computed in f32, rounded once to ``dtype``.
- ``quant.quantize(x, scale, zero_point?) {dtype, compute, reciprocal}``:
  ``saturate(round_half_even(x / scale) + zero_point)``, dividing in
  ``compute`` (a float type), adding the zero point in f32 (f64 where
  ``compute`` is f64), clipped to ``dtype``'s range. ``reciprocal``
  multiplies by ``1 / scale`` instead, as the requantize of onnxruntime's
  fused int8 kernels does (the fold-quant pass sets it).
"""

from __future__ import annotations

import numpy as np

from ...errors import VerifyError
from ..registry import Bool, Kind, OpDef, Str, broadcast_shapes, register
from ..types import DTYPES, FLOAT_DTYPES, TensorType

#: quantized element types -> (lowest, highest) value
RANGES = {"i8": (-128, 127), "ui8": (0, 255), "i16": (-32768, 32767), "ui16": (0, 65535)}


def _check_params(x: TensorType, scale: TensorType, zero_point: TensorType | None, quantized: str) -> None:
    if scale.dtype not in FLOAT_DTYPES:
        raise VerifyError(f"scale must be a float tensor, got {scale}")
    if zero_point is not None and zero_point.dtype != quantized:
        raise VerifyError(f"zero point {zero_point} must have the quantized type {quantized}")
    for p in (scale, zero_point):
        if p is not None and broadcast_shapes(x.shape, p.shape) != x.shape:
            raise VerifyError(f"{p} does not broadcast to {x}")


def axis_of(param: TensorType, rank: int) -> int | None:
    """The axis a scale or zero point varies along: None for one value (per
    tensor), -1 when it varies along several (blocked)."""
    shape = (1,) * (rank - param.rank) + tuple(param.shape)
    axes = [a for a, d in enumerate(shape) if d != 1]
    return None if not axes else axes[0] if len(axes) == 1 else -1


@register
class Dequantize(OpDef):
    """``(x - zero_point) * scale`` in f32, rounded to ``dtype``; x is
    8- or 16-bit or i32, scale and zero point broadcast to x."""

    name = "quant.dequantize"
    kind = Kind.BROADCAST
    operands = ("x", "scale", "zero_point?")
    attrs = {"dtype": Str()}

    def infer(self, x, scale, zero_point=None, *, dtype):
        if x.dtype not in (*RANGES, "i32"):
            raise VerifyError(f"x must be int8, uint8, int16, uint16 or int32, got {x}")
        if dtype not in FLOAT_DTYPES:
            raise VerifyError(f"dtype must be a float type, got {dtype}")
        _check_params(x, scale, zero_point, x.dtype)
        return x.with_dtype(dtype)

    def evaluate(self, x, scale, zero_point=None, *, dtype):
        y = x.astype(np.float32)
        if zero_point is not None:
            y = y - zero_point.astype(np.float32)
        return (y * scale.astype(np.float32)).astype(DTYPES[dtype])


@register
class Quantize(OpDef):
    """``saturate(round_half_even(x / scale) + zero_point)`` to ``dtype``,
    dividing in ``compute``; with ``reciprocal``, multiplying by ``1 / scale``
    (a value within an ulp of a rounding tie may move by one step)."""

    name = "quant.quantize"
    kind = Kind.BROADCAST
    operands = ("x", "scale", "zero_point?")
    attrs = {"dtype": Str(), "compute": Str("f32"), "reciprocal": Bool(False)}

    def infer(self, x, scale, zero_point=None, *, dtype, compute, reciprocal=False):
        if dtype not in RANGES:
            raise VerifyError(f"dtype must be one of {', '.join(RANGES)}, got {dtype}")
        if compute not in FLOAT_DTYPES:
            raise VerifyError(f"compute must be a float type, got {compute}")
        if x.dtype not in FLOAT_DTYPES and x.dtype != "i32":
            raise VerifyError(f"x must be a float or int32 tensor, got {x}")
        _check_params(x, scale, zero_point, dtype)
        return x.with_dtype(dtype)

    def evaluate(self, x, scale, zero_point=None, *, dtype, compute, reciprocal=False):
        c = DTYPES[compute]
        if reciprocal:
            q = np.rint(x.astype(c) * (np.ones((), c) / scale.astype(c)))
        else:
            q = np.rint(x.astype(c) / scale.astype(c))
        wide = np.float64 if compute == "f64" else np.float32
        q = q.astype(wide)
        if zero_point is not None:
            q = q + zero_point.astype(wide)
        lo, hi = RANGES[dtype]
        return np.clip(q, lo, hi).astype(DTYPES[dtype])
