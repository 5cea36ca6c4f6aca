"""ONNX convolution and pooling converters: Conv, ConvTranspose, MaxPool,
AveragePool, GlobalAveragePool, GlobalMaxPool, LpPool, MaxUnpool, Col2Im, DeformConv.

ONNX lets these omit kernel_shape, strides, pads and dilations, and choose
pads with auto_pad; the converters resolve all of it, so that the IR's
attributes are explicit and full length.
"""

from __future__ import annotations

import numpy as np

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


@converter("LpPool", since=2)
def lp_pool(ctx, X, *, kernel_shape, auto_pad="NOTSET", ceil_mode=0, dilations=None, p=2, pads=None, strides=None):
    """(sum over the window of |x|^p)^(1/p): an average pool of |x|^p that
    counts the padding (zeros, which add nothing), times the window's size."""
    import math

    window = _window(ctx, X, kernel_shape, auto_pad, strides, pads, dilations)
    dtype = X.type.np_dtype
    powered = ctx.op("math.abs", [X])
    if p != 1:
        powered = ctx.op("math.pow", [powered, ctx.const(np.array(p, dtype))])
    mean = ctx.op("nn.avg_pool", [powered], kernel=kernel_shape, ceil_mode=bool(ceil_mode), count_include_pad=True,
                  **window)
    total = ctx.op("math.mul", [mean, ctx.const(np.array(math.prod(kernel_shape), dtype))])
    if p == 1:
        return total
    if p == 2:
        return ctx.op("math.sqrt", [total])
    return ctx.op("math.pow", [total, ctx.const(np.array(1.0 / p, dtype))])


@converter("MaxUnpool", since=9)
def max_unpool(ctx, X, I, output_shape=None, *, kernel_shape, pads=None, strides=None):  # noqa: E741
    """Zeros with each value of X at its index in I (MaxPool's flat indices
    into the whole output): a 1-D scatter."""

    spatial = len(kernel_shape)
    strides = tuple(strides or (1,) * spatial)
    pads = tuple(pads or (0,) * (2 * spatial))
    shape = X.type.shape[:2] + tuple((d - 1) * s - pads[k] - pads[k + spatial] + kernel_shape[k]
                                     for k, (d, s) in enumerate(zip(X.type.shape[2:], strides)))
    flat = [ctx.op("tensor.reshape", [v], shape=(v.type.size,)) for v in (I, X)]
    zeros = ctx.const(np.zeros(int(np.prod(shape)), X.type.np_dtype))
    out = ctx.op("tensor.scatter_elements", [zeros, flat[0], flat[1]], axis=0)
    out = ctx.op("tensor.reshape", [out], shape=shape)
    if output_shape is None:
        return out
    # a larger output_shape keeps the indices of the inferred shape: zeros after its end, as onnx's reference
    wanted = ctx.ints(output_shape, "'output_shape'")
    if len(wanted) != len(shape) or any(w < d for w, d in zip(wanted, shape)):
        raise ctx.error(f"output_shape {list(wanted)} is smaller than the unpooled shape {list(shape)}")
    if tuple(wanted) == shape:
        return out
    return ctx.op("tensor.pad", [out], pads=(0,) * len(shape) + tuple(w - d for w, d in zip(wanted, shape)),
                  mode="constant", value=0.0)


@converter("Col2Im", since=18)
def col2im(ctx, input, image_shape, block_shape, *, dilations=None, pads=None, strides=None):  # noqa: A002
    """The columns [N, C x prod(block), L] summed back into the image [N, C,
    *image_shape] (the inverse of im2col; overlapping blocks add up): a
    scatter-add along a flattened padded image, its indices fixed at
    compile time."""
    image = ctx.ints(image_shape, "'image_shape'")
    block = ctx.ints(block_shape, "'block_shape'")
    n = len(image)
    dilations = tuple(dilations or (1,) * n)
    strides = tuple(strides or (1,) * n)
    pads = tuple(pads or (0,) * (2 * n))
    padded = [image[k] + pads[k] + pads[k + n] for k in range(n)]
    counts = [(padded[k] - (dilations[k] * (block[k] - 1) + 1)) // strides[k] + 1 for k in range(n)]
    batch, rows, length = input.type.shape
    kernel = int(np.prod(block))
    if rows % kernel or length != int(np.prod(counts)):
        raise ctx.error(f"input {input.type} does not hold C x {kernel} rows of {int(np.prod(counts))} blocks")
    channels = rows // kernel
    # target[k, l]: the padded image position block offset k of block l lands on
    offsets = np.stack(np.meshgrid(*[np.arange(b) * d for b, d in zip(block, dilations)], indexing="ij"), -1)
    starts = np.stack(np.meshgrid(*[np.arange(c) * s for c, s in zip(counts, strides)], indexing="ij"), -1)
    points = offsets.reshape(-1, 1, n) + starts.reshape(1, -1, n)  # [kernel, L, n]
    target = np.ravel_multi_index(tuple(points[..., k] for k in range(n)), padded)  # [kernel, L]
    area = int(np.prod(padded))
    index = (np.arange(channels).reshape(channels, 1, 1) * area + target[None]).reshape(1, -1)
    index = np.broadcast_to(index, (batch, rows * length)).astype(np.int64)
    zeros = ctx.const(np.zeros((batch, channels * area), input.type.np_dtype))
    flat = ctx.op("tensor.reshape", [input], shape=(batch, rows * length))
    out = ctx.op("tensor.scatter_elements", [zeros, ctx.const(index), flat], axis=1, reduction="add")
    out = ctx.op("tensor.reshape", [out], shape=(batch, channels, *padded))
    if any(pads):
        out = ctx.op("tensor.slice", [out], starts=(0, 0) + pads[:n], ends=(batch, channels) + tuple(
            p - e for p, e in zip(padded, pads[n:])), steps=(1,) * (n + 2))
    return out


@converter("DeformConv", since=19)
def deform_conv(ctx, X, W, offset, B=None, mask=None, *, dilations=None, group=1, kernel_shape=None,
                offset_group=1, pads=None, strides=None):
    """A 2-D convolution whose taps read X at learned offsets: each tap's
    samples come from ``nn.grid_sample`` (bilinear, zeros outside), times
    the mask, then one matmul per group with the weights."""
    if X.type.rank != 4:
        raise ctx.error(f"braze supports 2-D DeformConv; X is {X.type}")
    n, c, h, w = X.type.shape
    oc, cg, kh, kw = W.type.shape
    dh, dw = dilations or (1, 1)
    sh, sw = strides or (1, 1)
    top, left = (pads or (0, 0, 0, 0))[:2]
    oh, ow = offset.type.shape[2:]
    taps, per = kh * kw, c // offset_group
    dtype = X.type.np_dtype
    # base sampling positions [taps, oh, ow] (y and x), before the offsets
    ty, tx = np.meshgrid(np.arange(kh) * dh, np.arange(kw) * dw, indexing="ij")
    base_y = (np.arange(oh) * sh - top)[None, :, None] + ty.reshape(taps, 1, 1)
    base_x = (np.arange(ow) * sw - left)[None, None, :] + tx.reshape(taps, 1, 1)
    base_y, base_x = (np.broadcast_to(b, (taps, oh, ow)) for b in (base_y, base_x))
    off = ctx.op("tensor.reshape", [offset], shape=(n, offset_group, taps, 2, oh, ow))
    if mask is not None:
        mask = ctx.op("tensor.reshape", [mask], shape=(n, offset_group, 1, taps, oh, ow))
    columns = []
    for g in range(offset_group):
        coords = []
        for k, (base, size) in enumerate(((base_x, w), (base_y, h))):  # grid_sample wants x first
            part = ctx.op("tensor.slice", [off], starts=(0, g, 0, 1 - k, 0, 0), ends=(n, g + 1, taps, 2 - k, oh, ow),
                          steps=(1,) * 6)
            part = ctx.op("tensor.reshape", [part], shape=(n, taps, oh, ow, 1))
            at = ctx.op("math.add", [part, ctx.const(base.reshape(1, taps, oh, ow, 1).astype(dtype))])
            # pixel -> grid_sample's normalized coordinate (align_corners=0): (2 p + 1) / size - 1
            coords.append(ctx.op("math.sub", [ctx.op("math.div", [ctx.op("math.add", [
                ctx.op("math.mul", [at, ctx.const(np.array(2, dtype))]), ctx.const(np.array(1, dtype))]),
                ctx.const(np.array(size, dtype))]), ctx.const(np.array(1, dtype))]))
        grid = ctx.op("tensor.reshape", [ctx.op("tensor.concat", coords, axis=4)], shape=(n, taps * oh, ow, 2))
        xg = ctx.op("tensor.slice", [X], starts=(0, g * per, 0, 0), ends=(n, (g + 1) * per, h, w), steps=(1,) * 4)
        sampled = ctx.op("nn.grid_sample", [xg, grid], mode="linear", padding="zeros", align_corners=False)
        sampled = ctx.op("tensor.reshape", [sampled], shape=(n, 1, per, taps, oh, ow))
        if mask is not None:
            m = ctx.op("tensor.slice", [mask], starts=(0, g, 0, 0, 0, 0), ends=(n, g + 1, 1, taps, oh, ow),
                       steps=(1,) * 6)
            sampled = ctx.op("math.mul", [sampled, m])
        columns.append(ctx.op("tensor.reshape", [sampled], shape=(n, per, taps, oh * ow)))
    cols = columns[0] if len(columns) == 1 else ctx.op("tensor.concat", columns, axis=1)  # [n, c, taps, L]
    outs = []
    for g in range(group):
        part = ctx.op("tensor.slice", [cols], starts=(0, g * cg, 0, 0), ends=(n, (g + 1) * cg, taps, oh * ow),
                      steps=(1,) * 4)
        part = ctx.op("tensor.reshape", [part], shape=(n, cg * taps, oh * ow))
        per_group = oc // group
        wg = ctx.op("tensor.slice", [W], starts=(g * per_group, 0, 0, 0), ends=((g + 1) * per_group, cg, kh, kw),
                    steps=(1,) * 4)
        wg = ctx.op("tensor.reshape", [wg], shape=(oc // group, cg * taps))
        outs.append(ctx.op("nn.matmul", [wg, part]))
    y = outs[0] if len(outs) == 1 else ctx.op("tensor.concat", outs, axis=1)
    if B is not None:
        y = ctx.op("math.add", [y, ctx.op("tensor.reshape", [B], shape=(oc, 1))])
    return ctx.op("tensor.reshape", [y], shape=(n, oc, oh, ow))
