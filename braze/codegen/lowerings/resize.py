"""Lowering of ``tensor.resize``: one compute with onnxruntime's coordinate math.

Not ``topi.image.resize*``: TOPI maps coordinates with in/out as the scale
(ONNX divides by the scale it was given, which differs when sizes were
rounded), multiplies by that ratio instead of dividing by the scale, rounds
``floor``/``ceil`` with a 1e-5 nudge and ties without onnxruntime's 1e-6
window, has no ``simple`` rounding (Resize-10, Upsample), and resizes only
the spatial dims of fixed layouts. Nearest picks decide whole pixels, so
this compute follows the reference (braze/ir/ops/resize.py) step by step:
float32 source coordinates by the same formulas in the same order, the same
rounding and clamping, and the product of per-dim taps for linear (2 per
dim) and cubic (4 per dim) blending, accumulated in float32 (float64 for
f64 data) where the reference blends in float64 — a difference of a few
float32 roundings.
"""

import itertools

import numpy as np
from tvm import te, tirx

from ..registry import lowering

F32 = np.float32
TIE = 1e-6  # as the reference: within this of a half counts as a tie


def f32(value):
    return tirx.const(float(F32(value)), "float32")


@lowering("tensor.resize")
def resize(x, *, sizes, scales, roi, mode, coordinate_transformation_mode, nearest_mode, cubic_coeff_a,
           exclude_outside, extrapolation_value):
    rank, dims = x.ndim, [int(d) for d in x.shape]
    roi = roi or (0.0,) * rank + (1.0,) * rank
    crop = coordinate_transformation_mode == "tf_crop_and_resize"
    dtype = str(x.dtype)
    acc = "float64" if dtype == "float64" else "float32"
    # onnxruntime copies a dim of scale 1 that keeps its size, whatever the mode and roi
    resized = [not (sizes[a] == dims[a] and scales[a] == 1) for a in range(rank)]

    def taps(axis, i):
        """[(source index, weight or None)] for output index i along axis; and
        whether i falls outside the input (tf_crop_and_resize)."""
        if not resized[axis]:
            return [(i, None)], None
        length = dims[axis]
        c = source_coord(coordinate_transformation_mode, i, sizes[axis], length, scales[axis], roi[axis],
                         roi[axis + rank])
        outside = tirx.any(c < f32(0), c > f32(length - 1)) if crop else None
        if mode == "nearest":
            return [(nearest_index(c, length, nearest_mode, scales[axis] < 1), None)], outside
        if mode == "linear":
            return linear_taps(c, length), outside
        return cubic_taps(c, length, cubic_coeff_a, exclude_outside), outside

    def element(*i):
        per_axis = [taps(a, i[a]) for a in range(rank)]
        outside = [o for _, o in per_axis if o is not None]
        if mode == "nearest":
            value, fill = x(*[t[0][0] for t, _ in per_axis]), extrapolation_value
            if not dtype.startswith(("float", "bfloat")):
                fill = np.array(fill).astype(dtype).item()  # truncated, as the reference casts it
        else:
            terms = []
            for combo in itertools.product(*[t for t, _ in per_axis]):
                weights = [w.astype(acc) for _, w in combo if w is not None]
                terms.append(_product(weights + [x(*[index for index, _ in combo]).astype(acc)]))
            value = _sum(terms).astype(dtype)
            fill = extrapolation_value
        if outside:
            value = tirx.Select(tirx.any(*outside) if len(outside) > 1 else outside[0],
                                tirx.const(fill, dtype), value)
        return value

    return te.compute(tuple(sizes), element, name="T_resize")


def source_coord(mode, i, out_len, in_len, scale, roi_start, roi_end):
    """The float32 source coordinate of output index i (the reference's
    ``source_coords``, same formulas and operation order)."""
    x = i.astype("float32")
    half = f32(0.5)
    if mode == "asymmetric":
        return x / f32(scale)
    if mode == "half_pixel" or mode == "pytorch_half_pixel" and out_len > 1:
        return (x + half) / f32(scale) - half
    if mode == "tf_half_pixel_for_nn":
        return (x + half) / f32(scale)
    if mode in ("align_corners", "pytorch_half_pixel"):
        return x * f32(in_len - 1) / f32(out_len - 1) if out_len > 1 else f32(0)
    if mode == "half_pixel_symmetric":  # partly in float64, as onnxruntime writes it
        adjustment = F32(out_len) / (F32(scale) * F32(in_len))
        offset = F32(in_len) / 2 * (1 - adjustment)
        f64 = "float64"
        q = (i.astype(f64) + tirx.const(0.5, f64)) / tirx.const(float(F32(scale)), f64)
        return (tirx.const(float(offset), f64) + q - tirx.const(0.5, f64)).astype("float32")
    start, end = F32(roi_start), F32(roi_end)  # tf_crop_and_resize
    if out_len > 1:
        return f32(start * F32(in_len - 1)) + x * f32(end - start) * f32(in_len - 1) / f32(out_len - 1)
    return f32(0.5 * float(start + end) * float(in_len - 1))


def nearest_index(c, length, nearest_mode, downsampling):
    floor, ceil = tirx.floor(c), tirx.ceil(c)
    frac = c - floor
    tie = tirx.abs(frac - f32(0.5)) <= f32(TIE)
    if nearest_mode == "round_prefer_floor":
        picked = tirx.Select(tirx.all(frac > f32(0.5), tirx.Not(tie)), ceil, floor)
    elif nearest_mode == "round_prefer_ceil":
        picked = tirx.Select(tirx.any(frac >= f32(0.5), tie), ceil, floor)
    elif nearest_mode == "ceil" or nearest_mode == "simple" and downsampling:
        picked = ceil
    else:
        picked = floor
    return _clip(picked, 0, length - 1).astype("int32")


def linear_taps(c, length):
    x = _clip(c, 0, length - 1)
    lo = tirx.min(tirx.floor(x), f32(length - 1))
    hi = tirx.min(lo + f32(1), f32(length - 1))
    edge = lo == hi  # at the last index both neighbours are the same pixel
    w_lo = tirx.Select(edge, f32(0.5), tirx.abs(hi - x))
    w_hi = tirx.Select(edge, f32(0.5), tirx.abs(x - lo))
    return [(lo.astype("int32"), w_lo), (hi.astype("int32"), w_hi)]


def cubic_taps(c, length, a, exclude_outside):
    """Four neighbours (floor - 1 .. floor + 2) with Keys' cubic weights."""
    a = F32(a)
    base = tirx.floor(c)
    s = c - base

    def near(t):  # |t| <= 1
        return (f32(a + 2) * t - f32(a + 3)) * t * t + f32(1)

    def far(t):  # 1 < |t| < 2
        return ((f32(a) * t - f32(5 * a)) * t + f32(8 * a)) * t - f32(4 * a)

    weights = [far(s + f32(1)), near(s), near(f32(1) - s), far(f32(2) - s)]
    index = [base.astype("int32") + k for k in range(-1, 3)]
    if exclude_outside:
        weights = [tirx.Select(tirx.any(t < 0, t >= length), f32(0), w) for t, w in zip(index, weights)]
        total = _sum(weights)
        weights = [w / total for w in weights]
    return [(tirx.max(tirx.min(t, length - 1), 0), w) for t, w in zip(index, weights)]


def _clip(v, lo, hi):
    return tirx.max(tirx.min(v, f32(hi)), f32(lo))


def _sum(terms):
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return total


def _product(factors):
    total = factors[0]
    for f in factors[1:]:
        total = total * f
    return total


@lowering("nn.grid_sample")
def grid_sample(x, grid, *, mode, padding, align_corners):
    """TOPI's grid_sample, which takes the coordinates along axis 1."""
    from tvm import topi

    spatial = len(x.shape) - 2
    coords = topi.transpose(grid, [0, spatial + 1] + list(range(1, spatial + 1)))
    method = {"linear": "bilinear", "nearest": "nearest", "cubic": "bicubic"}[mode]
    return topi.image.grid_sample(x, coords, method, "NCHW" if spatial == 2 else "NCDHW", padding,
                                  bool(align_corners))
