"""``tensor.resize``: ONNX Resize (and Upsample) with every coordinate mode.

The reference follows onnxruntime's CPU kernel closely, because nearest
neighbour picks are decided by rounding: source coordinates are computed
in float32 with onnxruntime's formulas, one axis at a time (interpolation
is separable), and blended in float64.
"""

from __future__ import annotations

import numpy as np

from ...errors import VerifyError
from ..registry import Bool, Float, Floats, Ints, Kind, OpDef, Str, register
from ..types import FLOAT_DTYPES, TensorType

MODES = ("nearest", "linear", "cubic")
COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                    "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize")
# "simple" is the rounding of Resize-10 and Upsample, which had no nearest_mode:
# truncate when upsampling, round up when downsampling (as onnxruntime does).
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")

F32 = np.float32
# onnxruntime treats a coordinate within this of a half as a tie (round_prefer_*),
# so that float32 rounding of e.g. 14.5 does not decide the pick.
TIE = 1e-6


@register
class Resize(OpDef):
    """Resample ``x`` to the shape ``sizes`` as ONNX Resize does (and as
    onnxruntime rounds), with the scales that coordinates divide by given
    per dim in ``scales``.

    Output index ``i`` along a dim maps to a source coordinate by
    ``coordinate_transformation_mode`` (ONNX's formulas) using that dim's
    ``scales`` entry, which is the scale ONNX gave (or out/in when it gave
    sizes). ``mode`` then reads the source: ``nearest`` rounds the
    coordinate by ``nearest_mode`` (within 1e-6 of a half counts as a tie,
    as in onnxruntime); ``linear`` blends 2 neighbours per dim;
    ``cubic`` blends 4 with Keys' kernel of parameter ``cubic_coeff_a``,
    dropping (and renormalizing) out-of-range ones if ``exclude_outside``.
    Source indices clamp to the edges. A dim of scale 1 keeping its size
    is copied as is (onnxruntime skips its transform, roi included). With
    ``tf_crop_and_resize`` the coordinates are taken within ``roi`` (starts
    of every dim, then ends, normalized; empty means the whole input), and
    points falling outside the input get ``extrapolation_value``.
    """

    name = "tensor.resize"
    kind = Kind.INJECTIVE
    operands = ("x",)
    attrs = {
        "sizes": Ints(),
        "scales": Floats(),
        "roi": Floats(()),
        "mode": Str("nearest", MODES),
        "coordinate_transformation_mode": Str("half_pixel", COORDINATE_MODES),
        "nearest_mode": Str("round_prefer_floor", NEAREST_MODES),
        "cubic_coeff_a": Float(-0.75),
        "exclude_outside": Bool(False),
        "extrapolation_value": Float(0.0),
    }

    def infer(self, x: TensorType, *, sizes, scales, roi, mode, **_):
        if len(sizes) != x.rank or len(scales) != x.rank:
            raise VerifyError(f"sizes {list(sizes)} and scales {list(scales)} need one entry per dim of {x}")
        if any(s < 0 for s in sizes) or any(not s > 0 for s in scales):
            raise VerifyError(f"sizes {list(sizes)} must be >= 0 and scales {list(scales)} > 0")
        if any(n and not d for n, d in zip(sizes, x.shape)):
            raise VerifyError(f"cannot resize the empty dims of {x} to {list(sizes)}")
        if roi and len(roi) != 2 * x.rank:
            raise VerifyError(f"roi {list(roi)} needs 2 x {x.rank} entries (all starts, then all ends)")
        if mode != "nearest" and x.dtype not in FLOAT_DTYPES:
            raise VerifyError(f"{mode} resizing needs a float tensor, got {x}")
        return x.with_shape(sizes)

    def evaluate(self, x, *, sizes, scales, roi, mode, coordinate_transformation_mode, nearest_mode,
                 cubic_coeff_a, exclude_outside, extrapolation_value):
        rank = x.ndim
        roi = roi or (0.0,) * rank + (1.0,) * rank
        crop = coordinate_transformation_mode == "tf_crop_and_resize"
        out = x if mode == "nearest" else x.astype(np.float64)
        outside = np.zeros((1,) * rank, dtype=bool)
        for axis in range(rank):
            if sizes[axis] == x.shape[axis] and scales[axis] == 1:
                continue  # onnxruntime maps such an axis onto itself, whatever the mode and roi
            length = x.shape[axis]
            coords = source_coords(coordinate_transformation_mode, sizes[axis], length, scales[axis],
                                   roi[axis], roi[axis + rank])
            if mode == "nearest":
                out = np.take(out, nearest_taps(coords, length, nearest_mode, scales[axis] < 1), axis=axis)
            else:
                taps, weights = (linear_taps(coords, length) if mode == "linear"
                                 else cubic_taps(coords, length, cubic_coeff_a, exclude_outside))
                out = _blend(out, axis, taps, weights)
            if crop:
                outside = outside | _along(axis, rank, (coords < 0) | (coords > length - 1))
        if crop:
            out = np.where(outside, extrapolation_value, out)
        return out.astype(x.dtype)


def source_coords(mode: str, out_len: int, in_len: int, scale: float, roi_start: float, roi_end: float):
    """The float32 source coordinate of each output index along one dim,
    by onnxruntime's formulas (its operation order and precision)."""
    x = np.arange(out_len, dtype=F32)
    scale, length, resized, half = F32(scale), F32(in_len), F32(out_len), F32(0.5)
    if mode == "asymmetric":
        return x / scale
    if mode == "half_pixel":
        return (x + half) / scale - half
    if mode == "pytorch_half_pixel":
        return (x + half) / scale - half if out_len > 1 else np.zeros_like(x)
    if mode == "tf_half_pixel_for_nn":
        return (x + half) / scale
    if mode == "align_corners":
        return x * (length - 1) / (resized - 1) if out_len > 1 else np.zeros_like(x)
    if mode == "half_pixel_symmetric":  # partly in double, as onnxruntime writes it
        adjustment = resized / (scale * length)
        offset = length / 2 * (1 - adjustment)
        return (np.float64(offset) + (x.astype(np.float64) + 0.5) / np.float64(scale) - 0.5).astype(F32)
    start, end = F32(roi_start), F32(roi_end)  # tf_crop_and_resize
    if out_len > 1:
        return start * (length - 1) + x * (end - start) * (length - 1) / (resized - 1)
    return np.full_like(x, 0.5 * float(start + end) * float(length - 1))


def nearest_taps(coords, length: int, nearest_mode: str, downsampling: bool):
    """Source index of each output index; coordinates below 0 all clamp to
    0, so rounding only has to be right for non-negative ones."""
    floor, ceil = np.floor(coords), np.ceil(coords)
    frac = coords - floor
    tie = np.abs(frac - 0.5) <= TIE
    if nearest_mode == "round_prefer_floor":
        picked = np.where((frac > 0.5) & ~tie, ceil, floor)
    elif nearest_mode == "round_prefer_ceil":
        picked = np.where((frac >= 0.5) | tie, ceil, floor)
    elif nearest_mode == "ceil" or nearest_mode == "simple" and downsampling:
        picked = ceil
    else:
        picked = floor
    return np.clip(picked, 0, length - 1).astype(np.intp)


def linear_taps(coords, length: int):
    """Two neighbours and their weights; the coordinate clamps to the input."""
    x = np.clip(coords, 0, length - 1)
    lo = np.minimum(np.floor(x), length - 1)
    hi = np.minimum(lo + 1, length - 1)
    w_lo, w_hi = np.abs(hi - x), np.abs(x - lo)
    edge = lo == hi  # at the last index both neighbours are the same pixel
    w_lo, w_hi = np.where(edge, F32(0.5), w_lo), np.where(edge, F32(0.5), w_hi)
    return np.stack([lo, hi], axis=1).astype(np.intp), np.stack([w_lo, w_hi], axis=1)


def cubic_taps(coords, length: int, a: float, exclude_outside: bool):
    """Four neighbours (floor - 1 .. floor + 2) and Keys' cubic weights."""
    base = np.floor(coords)
    s = coords - base
    a = F32(a)

    def near(t):  # the kernel for distances |t| <= 1
        return ((a + 2) * t - (a + 3)) * t * t + 1

    def far(t):  # and for 1 < |t| < 2
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a

    weights = np.stack([far(s + 1), near(s), near(1 - s), far(2 - s)], axis=1)
    taps = base.astype(np.intp)[:, None] + np.arange(-1, 3)
    if exclude_outside:
        weights = np.where((taps < 0) | (taps >= length), F32(0), weights)
        weights = weights / weights.sum(axis=1, keepdims=True)
    return np.clip(taps, 0, length - 1), weights


def _along(axis: int, rank: int, v):
    """A 1-D array shaped to broadcast along ``axis`` of a rank-``rank`` array."""
    return v.reshape((1,) * axis + (-1,) + (1,) * (rank - axis - 1))


def _blend(x, axis: int, taps, weights):
    """sum_k weights[:, k] * x[taps[:, k]] along ``axis``."""
    gathered = np.take(x, taps, axis=axis)  # the axis becomes (out, k)
    w = weights.astype(np.float64).reshape((1,) * axis + weights.shape + (1,) * (x.ndim - axis - 1))
    return (gathered * w).sum(axis=axis + 1)


@register
class GridSample(OpDef):
    """``x`` [N, C, *spatial] sampled at the points of ``grid`` [N, *out,
    r] (ONNX GridSample): the last axis of grid holds normalized
    coordinates in [-1, 1], x first; 2 or 3 spatial axes. ``mode`` linear,
    nearest or cubic (cubic: 2 spatial axes only), ``padding`` zeros,
    border or reflection for points outside."""

    name = "nn.grid_sample"
    kind = Kind.OPAQUE
    operands = ("x", "grid")
    attrs = {"mode": Str("linear", choices=("linear", "nearest", "cubic")),
             "padding": Str("zeros", choices=("zeros", "border", "reflection")), "align_corners": Bool(False)}

    def infer(self, x: TensorType, grid: TensorType, *, mode, padding, align_corners):
        spatial = x.rank - 2
        if spatial not in (2, 3) or grid.rank != x.rank or grid.shape[-1] != spatial or grid.shape[0] != x.shape[0]:
            raise VerifyError(f"x {x} needs 2 or 3 spatial axes and grid {grid} the shape [N, *out, {spatial}]")
        if mode == "cubic" and spatial != 2:
            raise VerifyError("cubic sampling has 2 spatial axes only")
        if x.dtype not in FLOAT_DTYPES or grid.dtype not in FLOAT_DTYPES:
            raise VerifyError(f"x {x} and grid {grid} must be floating point")
        return x.with_shape(x.shape[:2] + grid.shape[1:-1])

    def evaluate(self, x, grid, *, mode, padding, align_corners):
        spatial = x.shape[2:]
        out = np.zeros(x.shape[:2] + grid.shape[1:-1], np.float64)
        bounds = [(0.0, d - 1.0) if align_corners else (-0.5, d - 0.5) for d in spatial]
        for n in range(x.shape[0]):
            for point in np.ndindex(*grid.shape[1:-1]):
                g = grid[(n, *point)][::-1].astype(np.float64)  # (z,) y, x: the spatial axes' order
                at = [((v + 1) / 2 * (d - 1)) if align_corners else (((v + 1) * d - 1) / 2)
                      for v, d in zip(g, spatial)]
                if padding == "border":
                    at = [min(max(a, 0.0), d - 1.0) for a, d in zip(at, spatial)]
                elif padding == "reflection":
                    at = [_reflect(a, *b) for a, b in zip(at, bounds)]
                out[(n, slice(None), *point)] = _sample(x[n], at, mode, padding, bounds)
        return out.astype(x.dtype)


def _reflect(a: float, low: float, high: float) -> float:
    """``a`` folded back into [low, high] by reflection at its ends."""
    span = high - low
    if span <= 0:
        return low
    if a < low:
        turns, rest = divmod(low - a, span)
        return low + rest if turns % 2 == 0 else high - rest
    if a > high:
        turns, rest = divmod(a - high, span)
        return high - rest if turns % 2 == 0 else low + rest
    return a


def _sample(image, at: list[float], mode: str, padding: str, bounds) -> np.ndarray:
    """The channels of ``image`` [C, *spatial] at the point ``at``."""
    spatial = image.shape[1:]

    def pixel(index):
        index = list(index)
        for k, (i, d) in enumerate(zip(index, spatial)):
            if 0 <= i < d:
                continue
            if padding == "zeros":
                return np.zeros(image.shape[0])
            if padding == "reflection":
                i = int(round(_reflect(i, *bounds[k])))
            index[k] = min(max(i, 0), d - 1)
        return image[(slice(None), *index)].astype(np.float64)

    if mode == "nearest":
        return pixel([int(np.rint(a)) for a in at])
    if mode == "linear":
        base = [int(np.floor(a)) for a in at]
        total = np.zeros(image.shape[0])
        for corner in np.ndindex(*(2,) * len(at)):
            weight = np.prod([(a - b) if c else (1 - (a - b)) for a, b, c in zip(at, base, corner)])
            total += weight * pixel([b + c for b, c in zip(base, corner)])
        return total
    # cubic (2 spatial axes): Keys' kernel with a = -0.75, as onnx and PyTorch
    base = [int(np.floor(a)) for a in at]
    weights = [_cubic_weights(a - b) for a, b in zip(at, base)]
    total = np.zeros(image.shape[0])
    for i in range(4):
        for j in range(4):
            total += weights[0][i] * weights[1][j] * pixel([base[0] - 1 + i, base[1] - 1 + j])
    return total


def _cubic_weights(t: float, a: float = -0.75) -> list[float]:
    def near(d):
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]
