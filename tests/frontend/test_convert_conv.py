"""Numerics of the convolution and pooling converters vs onnxruntime."""

import pytest

from onnx_check import check_against_ort


def check(signature: str, body: str, opset: int = 17):
    return check_against_ort(f'<ir_version: 8, opset_import: ["" : {opset}]> g ({signature}) => (y) {{ {body} }}')


@pytest.mark.parametrize("x, w, attrs", [
    ("float[2,3,9]", "float[4,3,3]", ""),
    ("float[1,3,9]", "float[6,1,2]", "<group=3, strides=[2], dilations=[3], pads=[2,1]>"),
    ("float[1,4,7,7]", "float[6,2,3,3]", "<group=2, strides=[2,1], pads=[1,0,1,1], dilations=[1,2]>"),
    ("float[1,4,6,6]", "float[4,1,3,3]", "<group=4, kernel_shape=[3,3], pads=[1,1,1,1]>"),  # depthwise
    ("float[1,2,5,6]", "float[3,2,1,1]", "<strides=[2,3]>"),
    ("float[1,2,7,8]", "float[3,2,3,2]", "<auto_pad=\"SAME_UPPER\", strides=[2,3]>"),
    ("float[1,2,7,8]", "float[3,2,4,2]", "<auto_pad=\"SAME_LOWER\", strides=[2,2]>"),
    ("float[1,2,7,8]", "float[3,2,3,3]", "<auto_pad=\"VALID\", strides=[2,2]>"),
    ("float[1,2,4,5,6]", "float[4,2,2,3,2]", "<strides=[1,2,2], pads=[1,0,1,0,1,1]>"),
])
@pytest.mark.parametrize("bias", [False, True])
def test_conv(x, w, attrs, bias):
    m = int(w.split("[")[1].split(",")[0])
    b = f", float[{m}] b" if bias else ""
    check(f"{x} x, {w} w{b}", f"y = Conv {attrs} (x, w{', b' if bias else ''})")


@pytest.mark.parametrize("x, w, attrs", [
    ("float[1,3,5]", "float[3,2,3]", ""),
    ("float[1,4,5]", "float[4,1,3]", "<group=2, strides=[2], pads=[1,0], output_padding=[1]>"),
    ("float[2,3,4,5]", "float[3,2,3,3]", "<strides=[2,2], pads=[1,1,0,1], dilations=[1,2]>"),
    ("float[1,2,4,4]", "float[2,3,3,3]", "<strides=[2,2], output_padding=[1,0]>"),
    ("float[1,2,4,4]", "float[2,3,3,3]", "<strides=[2,2], output_shape=[9,8]>"),
    ("float[1,2,4,4]", "float[2,3,3,3]", "<strides=[3,2], output_shape=[10,8]>"),
    ("float[1,1,3,3]", "float[1,2,3,3]", "<strides=[3,2], output_shape=[10,8]>"),  # grows by 1 at the ends
    ("float[1,2,3,4]", "float[2,3,3,2]", "<auto_pad=\"SAME_UPPER\", strides=[2,3]>"),
    ("float[1,2,3,4]", "float[2,3,3,2]", "<auto_pad=\"SAME_LOWER\", strides=[2,3]>"),
    ("float[1,2,3,3,3]", "float[2,2,2,2,2]", "<strides=[2,1,2], pads=[0,1,0,0,0,1]>"),
])
@pytest.mark.parametrize("bias", [False, True])
def test_conv_transpose(x, w, attrs, bias):
    group = int(attrs.split("group=")[1].split(",")[0]) if "group=" in attrs else 1
    m = int(w.split(",")[1]) * group
    b = f", float[{m}] b" if bias else ""
    check(f"{x} x, {w} w{b}", f"y = ConvTranspose {attrs} (x, w{', b' if bias else ''})")


from cases import POOL_CASES  # noqa: E402  (shared with the lowering tests)


@pytest.mark.parametrize("x, attrs", POOL_CASES + [
    ("float[1,2,9,9]", "<kernel_shape=[3,2], dilations=[2,3], strides=[1,2], pads=[1,1,2,1]>"),
    ("float[1,2,9,9]", "<kernel_shape=[3,3], dilations=[2,2], strides=[2,2], ceil_mode=1>"),
    ("int8[1,2,7,7]", "<kernel_shape=[3,3], strides=[2,2], pads=[1,1,1,1]>"),
])
def test_max_pool(x, attrs):
    check(f"{x} x", f"y = MaxPool {attrs} (x)")


@pytest.mark.parametrize("x, attrs", POOL_CASES + [
    ("float[1,2,9,9]", "<kernel_shape=[3,2], dilations=[2,3], strides=[1,2], pads=[1,1,2,1]>"),  # opset 19
    ("float[1,2,9,9]", "<kernel_shape=[2,2], dilations=[2,2], strides=[2,2], ceil_mode=1>"),
])
@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_average_pool(x, attrs, count_include_pad):
    attrs = attrs.replace("<", f"<count_include_pad={count_include_pad}, ")
    check(f"{x} x", f"y = AveragePool {attrs} (x)", 19 if "dilations" in attrs else 17)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("x", ["float[2,3,5]", "float[1,3,4,5]", "float[1,2,2,3,4]"])
def test_global_pool(op, x):
    check(f"{x} x", f"y = {op}(x)")


@pytest.mark.parametrize("opset", [9, 11])
def test_pool_and_conv_old_opsets(opset):
    check("float[1,2,6,6] x, float[3,2,3,3] w",
          "c = Conv <kernel_shape=[3,3], pads=[1,1,1,1]> (x, w)"
          " p = MaxPool <kernel_shape=[2,2], strides=[2,2]> (c)"
          " y = AveragePool <kernel_shape=[2,2], pads=[0,0,1,1], count_include_pad=1> (p)", opset)
