"""ONNX convolution and pooling converters: Conv, ConvTranspose, MaxPool,
AveragePool, GlobalAveragePool, GlobalMaxPool.

ONNX lets these omit kernel_shape, strides, pads and dilations, and choose
pads with auto_pad; the converters resolve all of it, so that the IR's
attributes are explicit and full length.
"""

from __future__ import annotations

from ..registry import converter
from .nn import refuse_extra_outputs

SAME = ("SAME_UPPER", "SAME_LOWER")


def _spatial_rank(ctx, X) -> int:
    nd = X.type.rank - 2
    if nd < 1:
        raise ctx.error(f"needs an input of rank 3 or more (N, C, spatial...), got {X.type}")
    return nd


def _full(ctx, name: str, value, n: int, default: int) -> tuple[int, ...]:
    """An int-list attribute with ``n`` values, ``default`` ones when omitted."""
    if value is None:
        return (default,) * n
    if len(value) != n:
        raise ctx.error(f"'{name}' has {len(value)} values, but the input's spatial dims need {n}")
    return tuple(value)


def _kernel(ctx, kernel_shape, W) -> tuple[int, ...]:
    kernel = W.type.shape[2:]
    if kernel_shape is not None and tuple(kernel_shape) != kernel:
        raise ctx.error(f"kernel_shape {list(kernel_shape)} does not match the weight {W.type}")
    return kernel


def _window(ctx, X, kernel, auto_pad, strides, pads, dilations) -> dict:
    """Explicit strides, pads (ONNX order) and dilations of a sliding window."""
    nd = _spatial_rank(ctx, X)
    kernel = _full(ctx, "kernel_shape", kernel, nd, 1)
    strides = _full(ctx, "strides", strides, nd, 1)
    dilations = _full(ctx, "dilations", dilations, nd, 1)
    if auto_pad == "NOTSET":
        pads = _full(ctx, "pads", pads, 2 * nd, 0)
    elif auto_pad == "VALID":
        pads = (0,) * (2 * nd)
    elif auto_pad in SAME:
        pads = _same_pads(X.type.shape[2:], kernel, strides, dilations, auto_pad)
    else:
        raise ctx.error(f"auto_pad '{auto_pad}' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER")
    return {"strides": strides, "pads": pads, "dilations": dilations}


def _same_pads(spatial, kernel, strides, dilations, auto_pad) -> tuple[int, ...]:
    """Pads that make out = ceil(in / stride); the odd one goes at the end
    for SAME_UPPER, at the beginning for SAME_LOWER."""
    begins, ends = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilations):
        total = max(0, (-(-size // s) - 1) * s + d * (k - 1) + 1 - size)
        small, large = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else large)
        ends.append(large if auto_pad == "SAME_UPPER" else small)
    return (*begins, *ends)


@converter("Conv")
def conv(ctx, X, W, B=None, *, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None, pads=None,
         strides=None, pad_value=0):
    """``pad_value``: an integer conv's padding (a quantized input's zero point; converters/quant.py)."""
    window = _window(ctx, X, _kernel(ctx, kernel_shape, W), auto_pad, strides, pads, dilations)
    extra = {"pad_value": pad_value} if pad_value else {}
    return ctx.op("nn.conv", [v for v in (X, W, B) if v is not None], group=group, **window, **extra)


@converter("ConvTranspose")
def conv_transpose(ctx, X, W, B=None, *, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None,
                   output_padding=None, output_shape=None, pads=None, strides=None):
    nd = _spatial_rank(ctx, X)
    kernel = _kernel(ctx, kernel_shape, W)
    output_padding = _full(ctx, "output_padding", output_padding, nd, 0)
    window = _window(ctx, X, kernel, "NOTSET" if auto_pad in SAME else auto_pad, strides, pads, dilations)
    if output_shape is not None:  # an output larger than the convolution's grows at the end, like output_padding
        full = _full_sizes(X.type.shape[2:], kernel, window, output_padding)
        output_padding = tuple(p + max(0, t - f) for p, t, f in zip(output_padding, output_shape[-nd:], full))
    if output_shape is not None or auto_pad in SAME:
        window["pads"] = _crop_pads(ctx, X.type.shape[2:], kernel, window, output_padding, output_shape, auto_pad)
    return ctx.op("nn.conv_transpose", [v for v in (X, W, B) if v is not None], group=group,
                  output_padding=output_padding, **window)


def _full_sizes(spatial, kernel, window, output_padding) -> list[int]:
    """The uncropped output size of a transposed conv."""
    return [s * (i - 1) + d * (k - 1) + 1 + p
            for i, k, s, d, p in zip(spatial, kernel, window["strides"], window["dilations"], output_padding)]


def _crop_pads(ctx, spatial, kernel, window, output_padding, output_shape, auto_pad) -> tuple[int, ...]:
    """Pads that crop a transposed conv to ``output_shape``, by default to
    in * stride (never below zero, as in onnxruntime); the odd one goes at
    the end for SAME_UPPER and at the beginning otherwise (ONNX's rule)."""
    full = _full_sizes(spatial, kernel, window, output_padding)
    if output_shape is None:
        target = [i * s for i, s in zip(spatial, window["strides"])]
    else:
        target = output_shape[-len(spatial):]
    begins, ends = [], []
    for total in (max(0, f - t) for f, t in zip(full, target)):
        small, large = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else large)
        ends.append(large if auto_pad == "SAME_UPPER" else small)
    return (*begins, *ends)


@converter("MaxPool")
def max_pool(ctx, X, *, kernel_shape, auto_pad="NOTSET", ceil_mode=0, dilations=None, pads=None,
             storage_order=0, strides=None):
    # storage_order only orders the Indices output, which braze does not produce
    refuse_extra_outputs(ctx, "Indices")
    window = _window(ctx, X, kernel_shape, auto_pad, strides, pads, dilations)
    return ctx.op("nn.max_pool", [X], kernel=kernel_shape, ceil_mode=bool(ceil_mode), **window)


@converter("AveragePool")
def average_pool(ctx, X, *, kernel_shape, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0, dilations=None,
                 pads=None, strides=None):
    window = _window(ctx, X, kernel_shape, auto_pad, strides, pads, dilations)
    return ctx.op("nn.avg_pool", [X], kernel=kernel_shape, ceil_mode=bool(ceil_mode),
                  count_include_pad=bool(count_include_pad), **window)


@converter("GlobalAveragePool")
def global_average_pool(ctx, X):
    return ctx.op("reduce.mean", [X], axes=tuple(range(2, 2 + _spatial_rank(ctx, X))), keepdims=True)


@converter("GlobalMaxPool")
def global_max_pool(ctx, X):
    return ctx.op("reduce.max", [X], axes=tuple(range(2, 2 + _spatial_rank(ctx, X))), keepdims=True)
