"""Numerics of the Resize lowering: compiled with TVM vs onnxruntime.

Nearest picks are exact (the compute rounds float32 coordinates as
onnxruntime does); linear and cubic blends agree to float32 rounding (cubic
weights to a few roundings more: TVM's LLVM fuses a * b + c into one fma,
which the references do not).
Each test compiles one model of several Resize nodes (one kernel each).
"""

import pytest

from compiled_check import check_compiled, check_compiled_vs_reference

ROI = "float[0] noroi = {}, float[4] roi = {0.2, -0.3, 0.9, 1.4}"


def resize_model(cases, dtype="float", opset=19) -> str:
    """One Resize node per case: (input shape, attributes, 'scales' or 'sizes', values[, roi])."""
    inputs, nodes, inits = [], [], [ROI]
    for k, (shape, attrs, kind, values, *roi) in enumerate(cases):
        inputs.append(f"{dtype}[{','.join(map(str, shape))}] x{k}")
        init_type = "float" if kind == "scales" else "int64"
        inits.append(f"{init_type}[{len(values)}] s{k} = {{{', '.join(map(str, values))}}}")
        args = f"x{k}, {roi[0] if roi else 'noroi'}, s{k}" if kind == "scales" else \
            f"x{k}, {roi[0] if roi else 'noroi'}, , s{k}"
        nodes.append(f"y{k} = Resize<{attrs}>({args})")
    outputs = ", ".join(f"y{k}" for k in range(len(cases)))
    return (f'<ir_version: 8, opset_import: ["" : {opset}]> g ({", ".join(inputs)}) => ({outputs}) '
            f'<{", ".join(inits)}> {{ {" ".join(nodes)} }}')


def nearest(coord, rounding):
    return f'mode="nearest", coordinate_transformation_mode="{coord}", nearest_mode="{rounding}"'


def test_yolov8_upsample():
    """What ultralytics exports: nearest, asymmetric, floor, scales [1, 1, 2, 2]."""
    check_compiled(resize_model([([1, 8, 10, 12], nearest("asymmetric", "floor"), "scales", [1, 1, 2, 2])], opset=17))


def test_nearest():
    """Each rounding with several coordinate modes, up and down, odd ratios,
    and ties (asymmetric 2x lands on halves)."""
    check_compiled(resize_model([
        ([1, 2, 5, 4], nearest("asymmetric", "round_prefer_floor"), "scales", [1, 1, 2, 2.5]),
        ([1, 2, 5, 4], nearest("asymmetric", "round_prefer_ceil"), "scales", [1, 1, 2, 2.5]),
        ([1, 2, 5, 4], nearest("half_pixel", "round_prefer_floor"), "scales", [1, 1, 0.6, 1.7]),
        ([1, 2, 5, 4], nearest("align_corners", "round_prefer_ceil"), "sizes", [1, 2, 7, 3]),
        ([1, 2, 5, 4], nearest("pytorch_half_pixel", "floor"), "sizes", [1, 2, 1, 11]),
        ([1, 2, 5, 4], nearest("tf_half_pixel_for_nn", "ceil"), "scales", [1, 1, 0.6, 1.7]),
        ([1, 2, 5, 4], nearest("half_pixel_symmetric", "round_prefer_ceil"), "sizes", [1, 2, 7, 3]),
        ([3, 5, 2], nearest("half_pixel", "ceil"), "scales", [2, 0.6, 1]),  # dim 0 and a rank of 3
    ]))


@pytest.mark.parametrize("dtype", ["int32", "uint8"])
def test_nearest_integers(dtype):
    check_compiled(resize_model([([2, 3], 'mode="nearest"', "scales", [1.5, 2.5])], dtype, opset=13))


def test_linear():
    check_compiled(resize_model([
        ([1, 2, 5, 4], 'mode="linear"', "scales", [1, 1, 2, 3]),  # half_pixel
        ([1, 2, 5, 4], 'mode="linear", coordinate_transformation_mode="align_corners"', "sizes", [1, 2, 7, 3]),
        ([1, 2, 5, 4], 'mode="linear", coordinate_transformation_mode="pytorch_half_pixel"', "sizes", [1, 2, 1, 11]),
        ([1, 2, 5, 4], 'mode="linear", coordinate_transformation_mode="asymmetric"', "scales", [1, 1, 0.6, 1.7]),
        ([1, 2, 5, 4], 'mode="linear", coordinate_transformation_mode="half_pixel_symmetric"', "scales",
         [1, 1, 0.6, 1.7]),
    ]))


def test_cubic():
    check_compiled(resize_model([
        ([1, 2, 4, 5], 'mode="cubic"', "scales", [1, 1, 1.5, 2.5]),
        ([4, 5], 'mode="cubic", coordinate_transformation_mode="align_corners", exclude_outside=1, cubic_coeff_a=-0.5',
         "sizes", [3, 9]),
        ([4, 5], 'mode="cubic", coordinate_transformation_mode="asymmetric", exclude_outside=1', "scales", [2, 1.5]),
    ]))


def test_tf_crop_and_resize():
    """Points outside the input get extrapolation_value; a dim of scale 1
    that keeps its size is copied whatever the roi (as onnxruntime does)."""
    crop = 'coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-3.0'
    check_compiled(resize_model([
        ([4, 5], f'mode="nearest", {crop}', "sizes", [3, 6], "roi"),
        ([4, 5], f'mode="linear", {crop}', "sizes", [3, 6], "roi"),
        ([4, 5], f'mode="cubic", {crop}', "sizes", [1, 6], "roi"),
        ([4, 5], f'mode="linear", {crop}', "sizes", [4, 7], "roi"),
    ]))


def test_resize_10_and_upsample():
    """Resize-10 and Upsample round nearest the "simple" way: down when
    upsampling, up when downsampling (which Upsample cannot)."""
    check_compiled('<ir_version: 8, opset_import: ["" : 10]> g (float[1,2,5,4] x) => (a, b, c) '
                   '<float[4] up = {1, 1, 2, 3}, float[4] down = {1, 1, 0.6, 0.5}> '
                   '{ a = Resize<mode="nearest">(x, up) b = Resize<mode="nearest">(x, down) '
                   'c = Resize<mode="linear">(x, down) }')
    check_compiled('<ir_version: 8, opset_import: ["" : 9]> g (float[1,2,3,4] x) => (a, b) '
                   '<float[4] s = {1, 1, 2, 1.5}> '
                   '{ a = Upsample<mode="nearest">(x, s) b = Upsample<mode="linear">(x, s) }')


@pytest.mark.parametrize("dtype,tol", [("float16", 1e-3), ("double", 2e-6)])
def test_other_float_dtypes(dtype, tol):
    """Against the reference (onnxruntime has no f16 Resize). f16 is blended in
    f32 and rounded once; f64 is blended in f64, but its coordinates and
    weights are float32, as onnxruntime's are."""
    crop = 'coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-3.3'
    check_compiled_vs_reference(resize_model([
        ([1, 2, 5, 4], 'mode="linear"', "scales", [1, 1, 2, 3]),
        ([4, 5], 'mode="cubic", exclude_outside=1', "scales", [2, 1.5]),
        ([4, 5], f'mode="nearest", {crop}', "sizes", [3, 6], "roi"),
    ], dtype), rtol=tol, atol=tol)
