"""ONNX Resize (opsets 10 to 19) and Upsample (7, 9) -> ``tensor.resize``.

Output sizes and the per-dim scales that coordinate transforms divide by
are resolved here, in float32 as onnxruntime does, so that the IR op holds
both explicitly. Scales, sizes and roi must be compile-time constants.
"""

from __future__ import annotations

import numpy as np

from ..registry import converter
from .tensor import onnx_axes

F32 = np.float32


@converter("Upsample", since=7)
def upsample_v7(ctx, X, *, scales, mode="nearest"):
    return _legacy_resize(ctx, X, scales, mode)


@converter("Upsample", since=9)
def upsample_v9(ctx, X, scales, *, mode="nearest"):
    return _legacy_resize(ctx, X, _floats(ctx, scales, "'scales'"), mode)


@converter("Resize", since=10)
def resize_v10(ctx, X, scales, *, mode="nearest"):
    return _legacy_resize(ctx, X, _floats(ctx, scales, "'scales'"), mode)


def _legacy_resize(ctx, x, scales, mode):
    """Upsample and Resize-10 had no coordinate or rounding options: they
    meant asymmetric coordinates and onnxruntime's "simple" rounding."""
    if len(scales) != x.type.rank:
        raise ctx.error(f"scales {list(scales)} need one entry per dim of {x.type}")
    return _resize_op(ctx, x, _scaled_sizes(x.type.shape, scales), scales, mode=mode,
                      coordinate_transformation_mode="asymmetric",
                      nearest_mode="simple" if mode == "nearest" else None)


@converter("Resize", since=11)
def resize(ctx, X, roi=None, scales=None, sizes=None, *, mode="nearest",
           coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_floor",
           cubic_coeff_a=-0.75, exclude_outside=0, extrapolation_value=0.0,
           antialias=0, axes=None, keep_aspect_ratio_policy="stretch"):
    shape = X.type.shape
    axes = onnx_axes(ctx, axes if axes is not None else range(len(shape)), len(shape))
    given_scales, given_sizes = _floats(ctx, scales, "'scales'"), ctx.ints(sizes, "'sizes'") or None
    if (given_scales is None) == (given_sizes is None):
        raise ctx.error("needs exactly one of the inputs scales and sizes")
    if len(given_scales or given_sizes) != len(axes):
        raise ctx.error(f"scales or sizes need one entry per resized axis ({len(axes)})")
    if given_sizes is not None:
        out_sizes, out_scales = _from_sizes(ctx, shape, axes, given_sizes, keep_aspect_ratio_policy)
    else:
        out_scales = _on_axes(axes, given_scales, [1.0] * len(shape))
        out_sizes = _scaled_sizes(shape, out_scales)
    if antialias and mode != "nearest" and any(s < 1 for s in out_scales):
        raise ctx.error("antialiased downscaling is not supported; export with antialias=0")
    crop = coordinate_transformation_mode == "tf_crop_and_resize"  # the only mode that reads roi
    return _resize_op(ctx, X, out_sizes, out_scales, roi=_roi(ctx, roi, axes, len(shape)) if crop else None,
                      mode=mode, coordinate_transformation_mode=coordinate_transformation_mode,
                      nearest_mode=nearest_mode, cubic_coeff_a=cubic_coeff_a,
                      exclude_outside=bool(exclude_outside), extrapolation_value=extrapolation_value)


def _resize_op(ctx, x, sizes, scales, **attrs):
    """A tensor.resize, or an identity when no dim changes size: onnxruntime
    then copies the input, whatever the scales and roi say."""
    if tuple(sizes) == x.type.shape:
        return ctx.op("tensor.identity", [x])
    return ctx.op("tensor.resize", [x], sizes=tuple(sizes), scales=tuple(scales), **attrs)


def _floats(ctx, v, what: str) -> tuple[float, ...] | None:
    """A float-list input, None when omitted or empty (ONNX's "not given")."""
    if v is None:
        return None
    data = ctx.value(v, what).reshape(-1)
    return tuple(float(x) for x in data) if data.size else None


def _on_axes(axes, values, defaults) -> list:
    out = list(defaults)
    for a, v in zip(axes, values):
        out[a] = v
    return out


def _scaled_sizes(shape, scales) -> tuple[int, ...]:
    """floor(dim * scale), multiplied in float32 like onnxruntime."""
    return tuple(int(np.floor(F32(s) * F32(d))) for d, s in zip(shape, scales))


def _from_sizes(ctx, shape, axes, sizes, policy: str):
    """Output sizes and the scales they imply (out / in). With a
    keep_aspect_ratio_policy (opset 18) every resized axis takes the
    smallest ("not_larger") or largest ("not_smaller") of those scales and
    its size is rounded from it."""
    sizes = _on_axes(axes, sizes, shape)
    scales = [float(F32(n) / F32(d)) if d else 1.0 for n, d in zip(sizes, shape)]
    if policy == "stretch":
        return tuple(sizes), scales
    if policy not in ("not_larger", "not_smaller"):
        raise ctx.error(f"keep_aspect_ratio_policy '{policy}' is not stretch, not_larger or not_smaller")
    pick = min if policy == "not_larger" else max
    scale = pick(scales[a] for a in axes)
    for a in axes:
        scales[a] = scale
        sizes[a] = int(scale * shape[a] + 0.5)  # round half up
    return tuple(sizes), scales


def _roi(ctx, roi, axes, rank: int) -> tuple[float, ...]:
    """The full-rank roi (starts, then ends); empty means the whole input."""
    values = _floats(ctx, roi, "'roi'")
    if values is None:
        return ()
    if len(values) != 2 * len(axes):
        raise ctx.error(f"roi {list(values)} needs 2 x {len(axes)} entries")
    n = len(axes)
    return tuple(_on_axes(axes, values[:n], [0.0] * rank) + _on_axes(axes, values[n:], [1.0] * rank))


@converter("GridSample", since=16)
def grid_sample(ctx, X, grid, *, align_corners=0, mode="bilinear", padding_mode="zeros"):
    """Opset 16 names the modes bilinear and bicubic, opset 20 linear and cubic."""
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    if mode not in ("linear", "nearest", "cubic"):
        raise ctx.error(f"mode '{mode}' is not one of linear, nearest, cubic")
    if X.type.rank not in (4, 5):
        raise ctx.error(f"braze samples 2 or 3 spatial axes; X is {X.type}")
    if mode == "cubic" and X.type.rank != 4:
        raise ctx.error("cubic sampling of 3 spatial axes is not supported (TVM's grid_sample has it for 2)")
    return ctx.op("nn.grid_sample", [X, grid], mode=mode, padding=padding_mode, align_corners=bool(align_corners))
