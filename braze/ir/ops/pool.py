"""Pooling: ``nn.max_pool`` and ``nn.avg_pool`` (N-d, NC + spatial).

Like the convolutions, attributes are explicit and full length; ``pads`` is
in ONNX order (all begins, then all ends).
"""

from __future__ import annotations

import numpy as np

from ...errors import VerifyError
from ..registry import Bool, Ints, Kind, OpDef, register
from ..types import FLOAT_DTYPES, TensorType
from .conv import WINDOW_ATTRS, check_window, pad_spatial, window_out_shape, window_span, windows
from .nn import wide


def _pool_shape(x: TensorType, kernel, strides, pads, dilations, ceil_mode) -> TensorType:
    check_window(x, kernel, strides, pads, dilations)
    out = window_out_shape(x.shape[2:], kernel, strides, pads, dilations, ceil_mode)
    return x.with_shape((*x.shape[:2], *out))


def _padded(x: np.ndarray, pads, out, kernel, strides, dilations, value) -> np.ndarray:
    """``x`` padded by ``pads`` and, at the ends, by the extra room that the
    windows ``ceil_mode`` adds reach into."""
    spatial, nd = x.shape[2:], len(kernel)
    room = [max(0, (out[i] - 1) * strides[i] + window_span(kernel[i], dilations[i])
                - spatial[i] - pads[i] - pads[nd + i]) for i in range(nd)]
    return pad_spatial(pad_spatial(x, pads, value), (0,) * nd + tuple(room), value)


@register
class MaxPool(OpDef):
    """Max over each (dilated) window; padding (``pads``: all begins, then
    all ends) never wins. With ``ceil_mode`` the last partial window along a
    dim counts when it starts inside the input or its begin padding."""

    name = "nn.max_pool"
    kind = Kind.ANCHOR
    operands = ("x",)
    attrs = {"kernel": Ints(), **WINDOW_ATTRS, "ceil_mode": Bool(False)}

    def infer(self, x, *, kernel, strides, pads, dilations, ceil_mode):
        if x.dtype == "i1":
            raise VerifyError(f"needs a numeric tensor, got {x}")
        return _pool_shape(x, kernel, strides, pads, dilations, ceil_mode)

    def evaluate(self, x, *, kernel, strides, pads, dilations, ceil_mode):
        out = window_out_shape(x.shape[2:], kernel, strides, pads, dilations, ceil_mode)
        data = wide(x)
        lowest = -np.inf if data.dtype.kind == "f" else np.iinfo(data.dtype).min
        padded = _padded(data, pads, out, kernel, strides, dilations, lowest)
        taps = tuple(range(-len(kernel), 0))
        return windows(padded, kernel, strides, dilations, out).max(axis=taps).astype(x.dtype)


@register
class AvgPool(OpDef):
    """Mean over each (dilated) window (``pads``: all begins, then all
    ends). The divisor counts the window's elements inside the input, or
    with ``count_include_pad`` also those in ``pads`` (never the extra room
    that ``ceil_mode`` adds)."""

    name = "nn.avg_pool"
    kind = Kind.ANCHOR
    operands = ("x",)
    attrs = {"kernel": Ints(), **WINDOW_ATTRS, "ceil_mode": Bool(False), "count_include_pad": Bool(False)}

    def infer(self, x, *, kernel, strides, pads, dilations, ceil_mode, count_include_pad):
        if x.dtype not in FLOAT_DTYPES:
            raise VerifyError(f"needs a float tensor, got {x}")
        return _pool_shape(x, kernel, strides, pads, dilations, ceil_mode)

    def evaluate(self, x, *, kernel, strides, pads, dilations, ceil_mode, count_include_pad):
        spatial = x.shape[2:]
        out = window_out_shape(spatial, kernel, strides, pads, dilations, ceil_mode)
        taps = tuple(range(-len(kernel), 0))
        padded = _padded(wide(x), pads, out, kernel, strides, dilations, 0.0)
        sums = windows(padded, kernel, strides, dilations, out).sum(axis=taps)
        # the divisor: how many counted positions each window covers
        counted = pad_spatial(np.ones((1, 1, *spatial)), pads, 1.0 if count_include_pad else 0.0)
        counted = _padded(counted, (0,) * len(pads), out, kernel, strides, dilations, 0.0)
        counts = windows(counted, kernel, strides, dilations, out).sum(axis=taps)
        return (sums / counts).astype(x.dtype)
