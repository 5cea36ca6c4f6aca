"""Numerics of Resize and Upsample vs onnxruntime, every coordinate mode."""

import numpy as np
import pytest

from braze.errors import OnnxImportError
from braze.frontend import import_onnx
from onnx_check import check_against_ort, parse


def head(opset: int) -> str:
    return f'<ir_version: 8, opset_import: ["" : {opset}]>'


def floats(name: str, values) -> str:
    return f"float[{len(values)}] {name} = {{{', '.join(map(str, values))}}}"


def ints(name: str, values) -> str:
    return f"int64[{len(values)}] {name} = {{{', '.join(map(str, values))}}}"


def resize(x_shape, attrs: str, scales=None, sizes=None, roi=(), opset=19, dtype="float"):
    inits = [floats("roi", roi)]
    args = "x, roi"
    if scales is not None:
        inits.append(floats("sc", scales))
        args += ", sc"
    if sizes is not None:
        inits.append(ints("sz", sizes))
        args += ", , sz" if scales is None else ", sz"
    dims = ",".join(map(str, x_shape))
    return (f"{head(opset)} g ({dtype}[{dims}] x) => (y) <{', '.join(inits)}> "
            f"{{ y = Resize<{attrs}>({args}) }}")


COORDINATE_MODES = ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "tf_half_pixel_for_nn",
                    "half_pixel_symmetric"]
NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
# Up, down and odd ratios; sizes give out/in scales, which differ from given ones.
SHAPES = [dict(scales=[1, 1, 2, 3]), dict(scales=[1, 1, 0.6, 1.7]), dict(sizes=[1, 2, 7, 3]),
          dict(sizes=[1, 2, 1, 11])]


@pytest.mark.parametrize("coord", COORDINATE_MODES)
@pytest.mark.parametrize("nearest", NEAREST_MODES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: str(s))
def test_nearest(coord, nearest, shape):
    attrs = f'mode="nearest", coordinate_transformation_mode="{coord}", nearest_mode="{nearest}"'
    check_against_ort(resize([1, 2, 5, 4], attrs, **shape))


@pytest.mark.parametrize("coord", COORDINATE_MODES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: str(s))
def test_linear(coord, shape):
    check_against_ort(resize([1, 2, 5, 4], f'mode="linear", coordinate_transformation_mode="{coord}"', **shape))


@pytest.mark.parametrize("coord", ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"])
@pytest.mark.parametrize("exclude", [0, 1])
@pytest.mark.parametrize("shape", [dict(scales=[2, 1.5]), dict(sizes=[3, 9])], ids=lambda s: str(s))
def test_cubic(coord, exclude, shape):
    attrs = f'mode="cubic", coordinate_transformation_mode="{coord}", exclude_outside={exclude}, cubic_coeff_a=-0.5'
    check_against_ort(resize([4, 5], attrs, **shape))


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_tf_crop_and_resize(mode):
    attrs = f'mode="{mode}", coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-3.0'
    check_against_ort(resize([4, 5], attrs, sizes=[3, 6], roi=[0.2, -0.3, 0.9, 1.4]))


def test_yolov8_upsample():
    """What ultralytics exports: nearest, asymmetric, floor, scales [1, 1, 2, 2], no roi."""
    check_against_ort(f'{head(17)} g (float[1,3,4,5] x) => (y) <float[4] s = {{1, 1, 2, 2}}> '
                      '{ y = Resize<mode="nearest", coordinate_transformation_mode="asymmetric", '
                      'nearest_mode="floor">(x, , s) }')


def test_cubic_nchw():
    check_against_ort(resize([2, 3, 4, 5], 'mode="cubic"', scales=[1, 1, 1.5, 2.5]))


def test_unchanged_shape_is_identity():
    # onnxruntime copies the input when no dim changes size, even at scale 1.3 (floor(2 * 1.3) = 2)
    text = resize([3, 2], 'mode="nearest", coordinate_transformation_mode="tf_half_pixel_for_nn", '
                  'nearest_mode="ceil"', scales=[1, 1.3])
    module = check_against_ort(text)
    assert [op.name for op in module.main.body.ops][-2] == "tensor.identity"


def test_antialiased_downscale_is_refused():
    with pytest.raises(OnnxImportError, match="antialias"):
        import_onnx(parse(resize([4, 6], 'mode="linear", antialias=1', scales=[1, 0.5])))


def test_nearest_integers():
    check_against_ort(resize([2, 3], 'mode="nearest"', scales=[1.5, 2.5], dtype="int32", opset=13))


@pytest.mark.parametrize("axes,policy", [("[-1, 2]", "stretch"), ("[3, 2]", "not_larger"), ("[3, 2]", "not_smaller")])
def test_axes_and_aspect_ratio(axes, policy):
    # (onnxruntime ignores the policy when axes are negative; onnx's shape inference agrees with braze)
    check_against_ort(resize([1, 2, 5, 4], f'mode="linear", axes={axes}, keep_aspect_ratio_policy="{policy}"',
                             sizes=[7, 8]))


def test_axes_with_scales():
    check_against_ort(resize([1, 2, 5, 4], 'mode="nearest", axes=[2]', scales=[2.5]))


@pytest.mark.parametrize("opset", [11, 13])
def test_resize_11_13(opset):
    check_against_ort(resize([1, 1, 3, 4], 'mode="linear"', scales=[1, 1, 2, 0.5], opset=opset))


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scales", [[1, 1, 2, 3], [1, 1, 0.6, 0.5]])
def test_resize_10(mode, scales):
    check_against_ort(f'{head(10)} g (float[1,2,5,4] x) => (y) <{floats("s", scales)}> '
                      f'{{ y = Resize<mode="{mode}">(x, s) }}')


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample_9(mode):
    check_against_ort(f'{head(9)} g (float[1,2,3,4] x) => (y) <float[4] s = {{1, 1, 2, 1.5}}> '
                      f'{{ y = Upsample<mode="{mode}">(x, s) }}')


def test_upsample_7():
    check_against_ort(f'{head(7)} g (float[1,2,3,4] x) => (y) {{ y = Upsample<scales=[1.0, 1.0, 3.0, 2.0]>(x) }}',
                      {"x": np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)})
