"""ONNX quantization converters: QuantizeLinear, DequantizeLinear,
DynamicQuantizeLinear, QLinearMatMul, QLinearConv, MatMulInteger, ConvInteger.

Each becomes ops braze has, with ONNX's reference semantics:

* quantize and dequantize: ``quant.quantize`` and ``quant.dequantize``
  (ir/ops/quant.py), their scale and zero point shaped to broadcast;
* integer matmuls: ``nn.matmul`` of the 8-bit operands themselves (exact
  int32 sums), less the zero points' terms
  (``za * colsum(B) + rowsum(A) * zb - K * za * zb``), so that a kernel
  multiplies 8-bit values; integer convs: operands cast to i32 and their
  zero points subtracted there, then ``nn.conv`` in i32, which is exact;
* requantize (QLinear*): the i32 sum times ``x_scale * w_scale / y_scale``
  in f64, as the reference computes it, then quantize.

Quantized types are int8, uint8, int16 and uint16; 4-bit, 2-bit and float
(8, 6, 4-bit) types are refused by name. Folding DQ -> op -> Q into integer kernels is a
pass's job (passes/quant.py), not the importer's.
"""

from __future__ import annotations

import math

import numpy as np
import onnx

from ...errors import OnnxImportError
from ...ir.ops.nn import INT8_DTYPES
from ...ir.ops.quant import RANGES
from ...ir.types import DTYPES, FLOAT_DTYPES
from ..importer import onnx_dtype
from ..registry import converter
from .conv import conv
from .reduce import onnx_axis



# --- types -------------------------------------------------------------------------------
def _onnx_name(dtype: str) -> str:
    """The ONNX name of an IR dtype ("ui8" -> "UINT8"), for messages."""
    return onnx.TensorProto.DataType.Name(onnx.helper.np_dtype_to_tensor_dtype(DTYPES[dtype]))


def _refused(ctx, name: str):
    return ctx.error(f"quantized type {name} is not supported; braze quantizes to INT8, UINT8, INT16 "
                     "and UINT16 (not to 4-bit, 2-bit, float8 or float4 types)")


def _quantized_type(ctx, zero_point, output_dtype: int) -> str:
    """Quantize's output type: the zero point's, else ``output_dtype``'s, else uint8."""
    dtype = None
    if output_dtype:
        try:
            dtype = onnx_dtype(output_dtype, "output_dtype")
        except OnnxImportError:  # a type braze has no dtype for (int4, float8 ...)
            name = onnx.helper.tensor_dtype_to_string(output_dtype).removeprefix("TensorProto.")
            raise _refused(ctx, name) from None
    if zero_point is not None:
        if dtype is not None and dtype != zero_point.type.dtype:
            raise ctx.error(f"output_dtype {_onnx_name(dtype)} differs from the zero point's type "
                            f"{_onnx_name(zero_point.type.dtype)}")
        dtype = zero_point.type.dtype
    dtype = dtype or "ui8"
    if dtype not in RANGES:
        raise _refused(ctx, _onnx_name(dtype))
    return dtype


def _attr_type(ctx, onnx_type: int, name: str) -> str:
    """The IR dtype a type attribute names (an OnnxImportError naming the type if none)."""
    return onnx_dtype(onnx_type, f"node {ctx.node_name} ({ctx.op_type}): attribute '{name}'")


def _as(ctx, v, dtype: str):
    return v if v.type.dtype == dtype else ctx.op("math.cast", [v], to=dtype)


# --- scale and zero point layouts ---------------------------------------------------------
def _along(ctx, v, x, axis: int, block_size: int):
    """A scale or zero point shaped to broadcast against ``x``: a scalar
    (per tensor), a vector along ``axis`` (per axis), or blocks of
    ``block_size`` along ``axis``, each element repeated over its block."""
    t, shape = v.type, x.type.shape
    if t.size == 1:
        return v if t.rank == 0 else ctx.op("tensor.reshape", [v], shape=())
    axis = onnx_axis(ctx, axis, x.type.rank)
    if not block_size:
        if t.shape != (shape[axis],):
            raise ctx.error(f"a per-axis scale or zero point must be 1-D of length {shape[axis]} "
                            f"(dim {axis} of {x.type}), got {t}")
        return ctx.op("tensor.reshape", [v], shape=_on_axis(shape[axis], axis, x.type.rank))
    return _blocks(ctx, v, x, axis, block_size)


def _on_axis(size: int, axis: int, rank: int) -> tuple[int, ...]:
    return (1,) * axis + (size,) + (1,) * (rank - axis - 1)


def _blocks(ctx, v, x, axis: int, block: int):
    """``v`` (x's shape with dim ``axis`` in blocks) repeated ``block``
    times along ``axis`` and cut to x's shape."""
    shape, blocks = x.type.shape, v.type.shape
    if block < 1:
        raise ctx.error(f"block_size must be positive, got {block}")
    expected = shape[:axis] + (math.ceil(shape[axis] / block),) + shape[axis + 1:]
    if blocks != expected:
        raise ctx.error(f"a blocked scale or zero point for {x.type} with block_size {block} on axis {axis} "
                        f"must have shape {list(expected)}, got {v.type}")
    outer, inner = shape[:axis + 1], shape[axis + 1:]
    repeated = ctx.op("tensor.broadcast_to", [ctx.op("tensor.reshape", [v], shape=(*blocks[:axis + 1], 1, *inner))],
                      shape=(*blocks[:axis + 1], block, *inner))
    full = ctx.op("tensor.reshape", [repeated], shape=(*outer[:axis], blocks[axis] * block, *inner))
    if blocks[axis] * block == shape[axis]:
        return full
    # the last block is partial: keep the first dim-size elements
    return ctx.op("tensor.slice", [full], starts=(0,) * len(shape), ends=shape, steps=(1,) * len(shape))


def _per_row(ctx, v, rows: int):
    """A 1-D per-row scale or zero point of a matrix as a column (rows, 1)."""
    if v is None or v.type.rank != 1 or v.type.size == 1:
        return v
    if v.type.shape != (rows,):
        raise ctx.error(f"a per-row scale or zero point must have {rows} elements, got {v.type}")
    return ctx.op("tensor.reshape", [v], shape=(rows, 1))


# --- the arithmetic --------------------------------------------------------------------------
def _saturate(ctx, y, dtype: str):
    """Float ``y`` (already integral) clipped to ``dtype``'s range and cast to it."""
    lo, hi = RANGES[dtype]
    return ctx.op("math.cast", [ctx.op("math.clip", [y], min=float(lo), max=float(hi))], to=dtype)


def quantize(ctx, x, scale, zero_point, dtype: str, compute: str):
    """``quant.quantize``: saturate(round_half_even(x / scale) + zero_point),
    dividing in ``compute`` (a float type); scale and zero point broadcast against x."""
    return ctx.op("quant.quantize", [x, scale] + ([zero_point] if zero_point is not None else []), dtype=dtype,
                  compute=compute)


def dequantize(ctx, x, scale, zero_point, dtype: str):
    """``quant.dequantize``: (x - zero_point) * scale in f32, rounded once to ``dtype``."""
    return ctx.op("quant.dequantize", [x, scale] + ([zero_point] if zero_point is not None else []), dtype=dtype)


def _centered(ctx, q, zero_point):
    """q - zero_point in i32 (exact for 8- and 16-bit values)."""
    q = _as(ctx, q, "i32")
    return q if zero_point is None else ctx.op("math.sub", [q, _as(ctx, zero_point, "i32")])


def _requantize(ctx, acc, multiplier, zero_point, dtype: str):
    """An i32 sum as quantized ``dtype``: acc * multiplier + zero_point in
    f64 (the reference's precision), rounded half to even and saturated."""
    y = ctx.op("math.mul", [_as(ctx, acc, "f64"), _as(ctx, multiplier, "f64")])
    if zero_point is not None:
        y = ctx.op("math.add", [y, _as(ctx, zero_point, "f64")])
    return _saturate(ctx, ctx.op("math.round", [y]), dtype)


def _output_type(zero_point, x) -> str:
    """A QLinear op's output type: its zero point's, else its input's."""
    return (x if zero_point is None else zero_point).type.dtype


def _integer_type(ctx, v, what: str) -> None:
    if v.type.dtype not in INT8_DTYPES:
        raise ctx.error(f"{what} must be int8 or uint8, got {v.type}")


# --- QuantizeLinear and DequantizeLinear ------------------------------------------------------
@converter("QuantizeLinear", since=10)
def quantize_linear(ctx, x, y_scale, y_zero_point=None, *, axis=1, saturate=1, block_size=0, output_dtype=0,
                    precision=0):
    # saturate only concerns float8 outputs, which are refused
    dtype = _quantized_type(ctx, y_zero_point, output_dtype)
    compute = _attr_type(ctx, precision, "precision") if precision else y_scale.type.dtype
    compute = compute if compute in FLOAT_DTYPES else "f64"  # an int32 scale divides as the reference does
    zero_point = None if y_zero_point is None else _along(ctx, y_zero_point, x, axis, block_size)
    return quantize(ctx, x, _along(ctx, y_scale, x, axis, block_size), zero_point, dtype, compute)


@converter("DequantizeLinear", since=10)
def dequantize_linear(ctx, x, x_scale, x_zero_point=None, *, axis=1, block_size=0, output_dtype=0):
    if x.type.dtype not in (*RANGES, "i32"):
        raise _refused(ctx, _onnx_name(x.type.dtype))
    if x_zero_point is not None and x_zero_point.type.dtype != x.type.dtype:
        raise ctx.error(f"the zero point {x_zero_point.type} must have the type of x {x.type}")
    dtype = _attr_type(ctx, output_dtype, "output_dtype") if output_dtype else x_scale.type.dtype
    zero_point = None if x_zero_point is None else _along(ctx, x_zero_point, x, axis, block_size)
    return dequantize(ctx, x, _along(ctx, x_scale, x, axis, block_size), zero_point, dtype)


@converter("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear(ctx, x):
    """uint8 with scale = (max(0, max x) - min(0, min x)) / 255 (1 / 255
    for an all-zero x) and zero point = saturate(round(-min / scale))."""
    zero = ctx.const(np.float32(0))
    high, low = _whole(ctx, "reduce.max", x), _whole(ctx, "reduce.min", x)
    high, low = ctx.op("math.max", [high, zero]), ctx.op("math.min", [low, zero])
    span = ctx.op("math.sub", [high, low])
    span = ctx.op("math.where", [ctx.op("math.equal", [high, low]), ctx.const(np.float32(1)), span])
    scale = ctx.op("math.div", [span, ctx.const(np.float32(255))])
    shift = ctx.op("math.clip", [ctx.op("math.sub", [zero, ctx.op("math.div", [low, scale])])], min=0.0, max=255.0)
    zero_point = ctx.op("math.cast", [ctx.op("math.round", [shift])], to="ui8")
    return quantize(ctx, x, scale, zero_point, "ui8", "f32"), scale, zero_point


def _whole(ctx, reduce: str, x):
    """``reduce`` over every element of ``x``, in two steps where x has rows:
    along each row first (rows in parallel, each one vectorized), then over
    the rows' results; one reduction to a single value would run on one core."""
    if x.type.rank == 0:
        return x
    if x.type.rank > 1:
        x = ctx.op(reduce, [x], axes=(x.type.rank - 1,), keepdims=False)
    return ctx.op(reduce, [x], axes=tuple(range(x.type.rank)), keepdims=False)


# --- integer products -----------------------------------------------------------------------------
@converter("MatMulInteger", since=10)
def matmul_integer(ctx, A, B, a_zero_point=None, b_zero_point=None):
    """A @ B in i32, less the zero points (a per row of A, b per column of B)."""
    _integer_type(ctx, A, "A")
    _integer_type(ctx, B, "B")
    za, zb = (None if _is_zero(ctx, z) else z for z in (a_zero_point, b_zero_point))
    if A.type.rank < 2 or B.type.rank < 2:  # a vector: the operands centered in i32
        rows = A.type.shape[-2] if A.type.rank > 1 else 1
        return ctx.op("nn.matmul", [_centered(ctx, A, _per_row(ctx, za, rows)), _centered(ctx, B, zb)])
    return integer_matmul(ctx, A, B, _per_row(ctx, za, A.type.shape[-2]), zb)


def integer_matmul(ctx, a, b, za, zb):
    """sum_k (a - za)(b - zb) for 8-bit ``a`` [.., M, K] and ``b`` [.., K, N]
    as ``a @ b`` on the 8-bit values (exact in i32) less ``za * colsum(b)``
    and ``rowsum(a) * zb``, plus ``K * za * zb``; ``za`` broadcasts as a
    column (per row of a), ``zb`` as a row (per column of b), either None."""
    acc = ctx.op("nn.matmul", [a, b])
    k = a.type.shape[-1]
    if za is not None:
        colsum = ctx.op("reduce.sum", [_as(ctx, b, "i32")], axes=(b.type.rank - 2,), keepdims=True)
        acc = ctx.op("math.sub", [acc, ctx.op("math.mul", [_as(ctx, za, "i32"), colsum])])
    if zb is not None:
        rowsum = ctx.op("reduce.sum", [_as(ctx, a, "i32")], axes=(a.type.rank - 1,), keepdims=True)
        acc = ctx.op("math.sub", [acc, ctx.op("math.mul", [rowsum, _as(ctx, zb, "i32")])])
    if za is not None and zb is not None:
        both = ctx.op("math.mul", [ctx.op("math.mul", [_as(ctx, za, "i32"), _as(ctx, zb, "i32")]),
                                   ctx.const(np.int32(k))])
        acc = ctx.op("math.add", [acc, both])
    return acc


def _is_zero(ctx, v) -> bool:
    """Whether ``v`` is absent or a constant of zeros."""
    data = ctx.maybe_value(v)
    return v is None or (data is not None and not data.any())


def _per_channel(ctx, v, channels: int, rank: int, axis: int):
    """A 1-D per-output-channel scale or zero point, shaped to broadcast
    along ``axis`` of a tensor of ``rank``."""
    if v is None or v.type.size == 1 or v.type.rank != 1:
        return v
    if v.type.shape != (channels,):
        raise ctx.error(f"a per-channel scale or zero point must have {channels} elements, got {v.type}")
    return ctx.op("tensor.reshape", [v], shape=_on_axis(channels, axis, rank))


def _integer_conv(ctx, x, x_zero_point, w, w_zero_point, bias, window: dict):
    _integer_type(ctx, x, "x")
    _integer_type(ctx, w, "w")
    if x_zero_point is not None and x_zero_point.type.size != 1:
        raise ctx.error(f"the input's zero point must be a scalar (per tensor), got {x_zero_point.type}")
    channels = w.type.shape[0]
    weight, zx = ctx.maybe_value(w), ctx.maybe_value(x_zero_point) if x_zero_point is not None else np.uint8(0)
    if x.type.dtype == "ui8" and w.type.dtype == "i8" and weight is not None and zx is not None \
            and _is_zero(ctx, w_zero_point):
        # the 8-bit operands themselves (an int8 kernel), the padding holding
        # zx, less zx * sum(w) a channel (a constant)
        zx = int(np.asarray(zx).reshape(()))
        acc = conv(ctx, x, w, None, **window, pad_value=zx)
        if zx:
            sums = weight.astype(np.int64).reshape(channels, -1).sum(axis=1) * zx
            acc = ctx.op("math.sub", [acc, ctx.const(sums.astype(np.int32).reshape(_on_axis(channels, 0,
                                                                                            acc.type.rank - 1)))])
        if bias is not None:
            acc = ctx.op("math.add", [acc, ctx.op("tensor.reshape", [bias],
                                                  shape=_on_axis(channels, 0, acc.type.rank - 1))])
        return acc
    wz = _per_channel(ctx, w_zero_point, channels, w.type.rank, 0)
    xc, wc = _centered(ctx, x, x_zero_point), _centered(ctx, w, wz)
    return conv(ctx, xc, wc, bias, **window)


@converter("ConvInteger", since=10)
def conv_integer(ctx, x, w, x_zero_point=None, w_zero_point=None, *, auto_pad="NOTSET", dilations=None, group=1,
                 kernel_shape=None, pads=None, strides=None):
    window = dict(auto_pad=auto_pad, dilations=dilations, group=group, kernel_shape=kernel_shape, pads=pads,
                  strides=strides)
    return _integer_conv(ctx, x, x_zero_point, w, w_zero_point, None, window)


@converter("QLinearMatMul", since=10)
def qlinear_matmul(ctx, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
    """Per tensor, or per row of a (and y) and per column of b."""
    rows = a.type.shape[-2] if a.type.rank > 1 else 1
    acc = matmul_integer(ctx, a, b, a_zero_point, b_zero_point)
    multiplier = ctx.op("math.div", [ctx.op("math.mul", [_per_row(ctx, a_scale, rows), b_scale]),
                                     _per_row(ctx, y_scale, rows)])
    zero_point = _per_row(ctx, y_zero_point, rows)
    return _requantize(ctx, acc, multiplier, zero_point, _output_type(y_zero_point, a))


@converter("QLinearConv", since=10)
def qlinear_conv(ctx, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point=None, B=None, *,
                 auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None, pads=None, strides=None):
    """Per tensor, or per output channel for the weight's scale and zero point."""
    if B is not None and B.type.dtype != "i32":
        raise ctx.error(f"the bias must be int32, got {B.type}")
    window = dict(auto_pad=auto_pad, dilations=dilations, group=group, kernel_shape=kernel_shape, pads=pads,
                  strides=strides)
    acc = _integer_conv(ctx, x, x_zero_point, w, w_zero_point, B, window)
    w_scale = _per_channel(ctx, w_scale, w.type.shape[0], acc.type.rank, 1)
    multiplier = ctx.op("math.div", [ctx.op("math.mul", [x_scale, w_scale]), y_scale])
    return _requantize(ctx, acc, multiplier, y_zero_point, _output_type(y_zero_point, x))
