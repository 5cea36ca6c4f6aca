"""Convolutions: ``nn.conv`` and ``nn.conv_transpose`` (N-d, NC + spatial).

Attributes are always explicit and full length (the importer resolves ONNX's
auto_pad and omitted attributes): ``pads`` holds all begins, then all ends,
in ONNX order. The window helpers here are shared with the pooling ops.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ...errors import VerifyError
from ..registry import Int, Ints, Kind, OpDef, register
from ..types import FLOAT_DTYPES, TensorType
from .nn import INT8_DTYPES, product_dtype, wide

WINDOW_ATTRS = {"strides": Ints(), "pads": Ints(), "dilations": Ints()}
#: nn.conv's element types: floats, and i32 for the quantized convs (ONNX
#: ConvInteger, QLinearConv), summed exactly in i32 (wrapping as C does);
#: besides, two 8-bit integer operands give an i32 result (``product_dtype``)
CONV_DTYPES = FLOAT_DTYPES | {"i32"}
#: an integer conv's attribute: the value its spatial padding holds (a
#: quantized input's zero point, which stands for real 0)
CONV_ATTRS = {"group": Int(1), "pad_value": Int(0)}


# --- window helpers, shared with pool.py ----------------------------------------------
def is_depthwise(group: int, channels: int, out_channels: int, per_group: int) -> bool:
    """A depthwise conv: one input channel per group (``per_group``, the
    weight's second dim) and one output channel per input channel (no
    channel multiplier), the form the blocked layout keeps."""
    return group > 1 and group == channels == out_channels and per_group == 1


def check_window(x: TensorType, kernel, strides, pads, dilations) -> int:
    """The number of spatial dims of ``x``; raises VerifyError on attributes
    that do not fit them."""
    nd = x.rank - 2
    if nd < 1:
        raise VerifyError(f"needs an input of rank 3 or more (N, C, spatial...), got {x}")
    for name, value, n in (("kernel", kernel, nd), ("strides", strides, nd),
                           ("dilations", dilations, nd), ("pads", pads, 2 * nd)):
        if len(value) != n:
            raise VerifyError(f"'{name}' must have {n} values for {nd} spatial dims, got {list(value)}")
    if min(kernel) < 1 or min(strides) < 1 or min(dilations) < 1 or min(pads) < 0:
        raise VerifyError("kernel, strides and dilations must be positive and pads non-negative")
    return nd


def window_span(kernel: int, dilation: int) -> int:
    return dilation * (kernel - 1) + 1


def window_out_size(size: int, kernel: int, stride: int, dilation: int, pad_begin: int, pad_end: int,
                    ceil_mode: bool = False) -> int:
    """Output size along one spatial dim (ONNX/onnxruntime rules)."""
    room = size + pad_begin + pad_end - window_span(kernel, dilation)
    if room < 0:
        raise VerifyError(f"window (kernel {kernel}, dilation {dilation}) is larger than the padded input "
                          f"({size} + {pad_begin} + {pad_end})")
    if not ceil_mode:
        return room // stride + 1
    out = -(-room // stride) + 1
    # the last window must start inside the input or its begin padding
    return out - 1 if (out - 1) * stride >= size + pad_begin else out


def window_out_shape(spatial, kernel, strides, pads, dilations, ceil_mode: bool = False) -> list[int]:
    nd = len(spatial)
    return [window_out_size(spatial[i], kernel[i], strides[i], dilations[i], pads[i], pads[nd + i], ceil_mode)
            for i in range(nd)]


def pad_spatial(x: np.ndarray, pads, value) -> np.ndarray:
    """``x`` padded on its spatial dims by ONNX-ordered ``pads``."""
    nd = len(pads) // 2
    widths = [(0, 0)] * (x.ndim - nd) + list(zip(pads[:nd], pads[nd:]))
    return np.pad(x, widths, constant_values=value)


def windows(x: np.ndarray, kernel, strides, dilations, out_shape) -> np.ndarray:
    """A view ``(N, C, *out_shape, *kernel)`` of the windows of a padded input."""
    nd = len(kernel)
    spans = [window_span(k, d) for k, d in zip(kernel, dilations)]
    view = sliding_window_view(x, spans, axis=tuple(range(2, 2 + nd)))
    starts = tuple(slice(0, o * s, s) for o, s in zip(out_shape, strides))
    taps = tuple(slice(None, None, d) for d in dilations)
    return view[(slice(None), slice(None)) + starts + taps]


def _check_operands(x: TensorType, w: TensorType, bias: TensorType | None, channels: int,
                    dtypes=FLOAT_DTYPES, pad_value: int = 0) -> str:
    """The result's element type, after checking the operands'."""
    integer = x.dtype in INT8_DTYPES and w.dtype in INT8_DTYPES and dtypes is CONV_DTYPES
    if not integer and (x.dtype not in dtypes or w.dtype != x.dtype):
        raise VerifyError(f"needs input and weight of one element type among {', '.join(sorted(dtypes))}, "
                          f"or two 8-bit integer types, got {x} and {w}")
    if w.rank != x.rank:
        raise VerifyError(f"weight {w} must have the input's rank {x.rank}")
    result = product_dtype(x, w) if integer else x.dtype
    if bias is not None and (bias.shape != (channels,) or bias.dtype != result):
        raise VerifyError(f"bias must be {TensorType((channels,), result)}, got {bias}")
    if pad_value and not integer:
        raise VerifyError(f"pad_value {pad_value} needs 8-bit integer operands, got {x} and {w}")
    return result


@register
class Conv(OpDef):
    """Grouped N-d convolution (cross-correlation, ONNX Conv): ``x`` is
    (N, C, *spatial), ``w`` is (M, C/group, *kernel), optional ``bias`` (M,);
    the result is (N, M, *out) with out = (in + pads - dilation*(k-1) - 1) // stride + 1.
    ``pads`` lists all begins, then all ends. 8-bit integer x and w (either
    signedness) give exact int32 sums, the padding holding ``pad_value``."""

    name = "nn.conv"
    contraction = "conv"
    kind = Kind.ANCHOR
    operands = ("x", "w", "bias?")
    attrs = {**WINDOW_ATTRS, **CONV_ATTRS}

    def infer(self, x, w, bias=None, *, strides, pads, dilations, group, pad_value=0):
        kernel = w.shape[2:]
        check_window(x, kernel, strides, pads, dilations)
        result = _check_operands(x, w, bias, w.shape[0], CONV_DTYPES, pad_value)
        if group < 1 or x.shape[1] != w.shape[1] * group or w.shape[0] % group:
            raise VerifyError(f"input {x} and weight {w} do not fit group={group} "
                              "(need C == weight.shape[1] * group and M divisible by group)")
        out = window_out_shape(x.shape[2:], kernel, strides, pads, dilations)
        return TensorType((x.shape[0], w.shape[0], *out), result)

    def evaluate(self, x, w, bias=None, *, strides, pads, dilations, group, pad_value=0):
        (n, c), (m, kernel) = x.shape[:2], (w.shape[0], w.shape[2:])
        out = window_out_shape(x.shape[2:], kernel, strides, pads, dilations)
        integer = x.dtype.itemsize == w.dtype.itemsize == 1 and x.dtype.kind in "iu" and w.dtype.kind in "iu"
        if integer:
            x, w = x.astype(np.int32), w.astype(np.int32)
        cols = windows(pad_spatial(wide(x), pads, pad_value), kernel, strides, dilations, out)
        # im2col: (N, group, out positions, C/group * kernel) @ (group, C/group * kernel, M/group)
        cols = cols.reshape(n, group, c // group, math.prod(out), math.prod(kernel)).transpose(0, 1, 3, 2, 4)
        cols = cols.reshape(n, group, math.prod(out), -1)
        weights = wide(w).reshape(group, m // group, -1).transpose(0, 2, 1)
        y = (cols @ weights).transpose(0, 1, 3, 2).reshape(n, m, *out)
        if bias is not None:
            y = y + wide(bias).reshape(m, *[1] * len(out))
        return y.astype(x.dtype)


@register
class ConvTranspose(OpDef):
    """Grouped N-d transposed convolution (ONNX ConvTranspose): ``x`` is
    (N, C, *spatial), ``w`` is (C, M/group, *kernel), optional ``bias`` (M,);
    out = stride*(in-1) + output_padding + dilation*(k-1) + 1 - pad_begin - pad_end
    (``pads`` lists all begins, then all ends, and crops the output)."""

    name = "nn.conv_transpose"
    contraction = "conv"
    kind = Kind.ANCHOR
    operands = ("x", "w", "bias?")
    attrs = {**WINDOW_ATTRS, "group": Int(1), "output_padding": Ints()}

    def infer(self, x, w, bias=None, *, strides, pads, dilations, group, output_padding):
        kernel = w.shape[2:]
        nd = check_window(x, kernel, strides, pads, dilations)
        _check_operands(x, w, bias, w.shape[1] * group)
        if group < 1 or x.shape[1] != w.shape[0] or w.shape[0] % group:
            raise VerifyError(f"input {x} and weight {w} do not fit group={group} "
                              "(need C == weight.shape[0], divisible by group)")
        if len(output_padding) != nd or not all(0 <= p < max(s, d) for p, s, d in
                                                zip(output_padding, strides, dilations)):
            raise VerifyError(f"output_padding {list(output_padding)} must have {nd} values, "
                              "each non-negative and smaller than its stride or dilation")
        full = _full_size(x.shape[2:], kernel, strides, dilations, output_padding)
        out = [full[i] - pads[i] - pads[nd + i] for i in range(nd)]
        if min(out) < 1:
            raise VerifyError(f"pads {list(pads)} leave no output (uncropped size {full})")
        return x.with_shape((x.shape[0], w.shape[1] * group, *out))

    def evaluate(self, x, w, bias=None, *, strides, pads, dilations, group, output_padding):
        (n, c), spatial, kernel = x.shape[:2], x.shape[2:], w.shape[2:]
        nd, mg = len(spatial), w.shape[1]
        full = _full_size(spatial, kernel, strides, dilations, output_padding)
        xg = wide(x).reshape(n, group, c // group, *spatial)
        wg = wide(w).reshape(group, c // group, mg, *kernel)
        y = np.zeros((n, group, mg, *full))
        # each kernel tap scatters the whole input, strided, into the output
        for tap in itertools.product(*map(range, kernel)):
            contribution = np.einsum("ngc...,gcm->ngm...", xg, wg[(slice(None),) * 3 + tap])
            region = tuple(slice(t * d, t * d + s * (i - 1) + 1, s)
                           for t, d, s, i in zip(tap, dilations, strides, spatial))
            y[(slice(None),) * 3 + region] += contribution
        crop = tuple(slice(pads[i], full[i] - pads[nd + i]) for i in range(nd))
        y = y.reshape(n, group * mg, *full)[(slice(None), slice(None)) + crop]
        if bias is not None:
            y = y + wide(bias).reshape(-1, *[1] * nd)
        return y.astype(x.dtype)


def _full_size(spatial, kernel, strides, dilations, output_padding) -> list[int]:
    """Uncropped transposed-conv output size per spatial dim."""
    return [s * (i - 1) + window_span(k, d) + p
            for i, k, s, d, p in zip(spatial, kernel, strides, dilations, output_padding)]
