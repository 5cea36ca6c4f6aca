"""Numerics of the convolution and pooling lowerings: compiled with TVM vs
onnxruntime. Each test compiles one model of several nodes (one kernel each
at level 0); the cases are those of test_convert_conv.py."""

import numpy as np
import pytest

from compiled_check import check_compiled, graph
from cases import POOL_CASES

CONV_CASES = [
    ("float[2,3,9]", "float[4,3,3]", ""),
    ("float[1,3,9]", "float[6,1,2]", "<group=3, strides=[2], dilations=[3], pads=[2,1]>"),
    ("float[1,4,7,7]", "float[6,2,3,3]", "<group=2, strides=[2,1], pads=[1,0,1,1], dilations=[1,2]>"),
    ("float[1,4,6,6]", "float[4,1,3,3]", "<group=4, kernel_shape=[3,3], pads=[1,1,1,1]>"),  # depthwise
    ("float[1,8,6,6]", "float[8,1,3,3]", "<group=8, strides=[2,2], pads=[0,0,1,1]>"),  # depthwise, strided
    ("float[1,2,5,6]", "float[3,2,1,1]", "<strides=[2,3]>"),
    ("float[1,2,7,8]", "float[3,2,3,2]", "<auto_pad=\"SAME_UPPER\", strides=[2,3]>"),
    ("float[1,2,7,8]", "float[3,2,4,2]", "<auto_pad=\"SAME_LOWER\", strides=[2,2]>"),
    ("float[1,2,4,5,6]", "float[4,2,2,3,2]", "<strides=[1,2,2], pads=[1,0,1,0,1,1]>"),
]

CONV_TRANSPOSE_CASES = [
    ("float[1,3,5]", "float[3,2,3]", ""),
    ("float[1,4,5]", "float[4,1,3]", "<group=2, strides=[2], pads=[1,0], output_padding=[1]>"),
    ("float[2,3,4,5]", "float[3,2,3,3]", "<strides=[2,2], pads=[1,1,0,1], dilations=[1,2]>"),
    ("float[1,2,4,4]", "float[2,3,3,3]", "<strides=[2,2], output_padding=[1,0]>"),
    ("float[1,2,4,4]", "float[2,3,3,3]", "<strides=[3,2], output_shape=[10,8]>"),
    ("float[1,2,3,4]", "float[2,3,3,2]", "<auto_pad=\"SAME_LOWER\", strides=[2,3]>"),
    ("float[1,4,3,3]", "float[4,2,2,2]", "<group=2, strides=[1,1], dilations=[2,2], pads=[2,1,0,3]>"),  # crop > k
    ("float[1,2,3,4]", "float[2,2,2,3]", "<strides=[2,1], dilations=[3,1], output_padding=[1,0]>"),
    ("float[1,2,3,3,3]", "float[2,2,2,2,2]", "<strides=[2,1,2], pads=[0,1,0,0,0,1]>"),
]


def _convs(op, cases, out_channels):
    """One model with a node per case, bias on every other one."""
    inputs, nodes, outputs = [], [], []
    for i, (x, w, attrs) in enumerate(cases):
        inputs += [f"{x} x{i}", f"{w} w{i}"]
        operands = f"x{i}, w{i}"
        if i % 2:
            inputs.append(f"float[{out_channels(w, attrs)}] b{i}")
            operands += f", b{i}"
        nodes.append(f"y{i} = {op} {attrs} ({operands})")
        outputs.append(f"y{i}")
    return graph(", ".join(inputs), nodes, outputs)


def _dims(t: str) -> list[int]:
    return [int(d) for d in t[t.index("[") + 1:-1].split(",")]


def test_conv():
    check_compiled(_convs("Conv", CONV_CASES, lambda w, attrs: _dims(w)[0]))


def test_conv_transpose():
    def out_channels(w, attrs):
        group = int(attrs.split("group=")[1].split(",")[0]) if "group=" in attrs else 1
        return _dims(w)[1] * group
    check_compiled(_convs("ConvTranspose", CONV_TRANSPOSE_CASES, out_channels))


def test_conv_model_shapes():
    """A stem, a 1x1 projection and a depthwise 3x3 of a real CNN, with bias."""
    check_compiled(graph(
        "float[1,3,32,32] x, float[16,3,3,3] w0, float[16] b0, float[32,16,1,1] w1, float[32] b1, "
        "float[32,1,3,3] w2, float[32] b2",
        ["a = Conv <strides=[2,2], pads=[1,1,1,1]> (x, w0, b0)", "b = Conv (a, w1, b1)",
         "y = Conv <group=32, pads=[1,1,1,1]> (b, w2, b2)"], ["y"]), rtol=1e-5, atol=1e-5)


def _pools(op, cases, extra=""):
    inputs, nodes, outputs = [], [], []
    for i, (x, attrs) in enumerate(cases):
        inputs.append(f"{x} x{i}")
        nodes.append(f"y{i} = {op} {attrs.replace('<', '<' + extra)} (x{i})")
        outputs.append(f"y{i}")
    return graph(", ".join(inputs), nodes, outputs)


def test_max_pool():
    check_compiled(_pools("MaxPool", POOL_CASES + [
        ("float[1,2,9,9]", "<kernel_shape=[3,2], dilations=[2,3], strides=[1,2], pads=[1,1,2,1]>"),
        ("float[1,2,9,9]", "<kernel_shape=[3,3], dilations=[2,2], strides=[2,2], ceil_mode=1>"),
        ("float[1,2,9,8]", "<kernel_shape=[2,2], dilations=[2,3], strides=[3,3], pads=[1,1,1,1], ceil_mode=1>"),
        ("float[1,3,10,10]", "<kernel_shape=[5,5], pads=[2,2,2,2]>"),  # YOLO's SPPF pool: taps as a loop, not nested
        ("float[1,2,12,12]", "<kernel_shape=[7,3], strides=[1,2], pads=[3,1,3,1]>"),
    ]))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "float16", "double"])
def test_max_pool_dtypes(dtype):
    check_compiled(_pools("MaxPool", [(f"{dtype}[1,2,7,7]", "<kernel_shape=[3,3], strides=[2,2], pads=[1,1,1,1]>"),
                                      (f"{dtype}[1,2,6,6]", "<kernel_shape=[3,3], strides=[2,2], ceil_mode=1>")]))


@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_average_pool(count_include_pad):
    check_compiled(_pools("AveragePool", POOL_CASES + [
        ("float[1,2,10]", "<kernel_shape=[3], strides=[3], pads=[1,1], ceil_mode=1>"),  # the room past the pads
        ("float[1,1,5,6,7]", "<kernel_shape=[2,3,3], strides=[2,2,3], pads=[1,0,1,0,1,1], ceil_mode=1>"),
    ], f"count_include_pad={count_include_pad}, "))


def test_global_pools():
    check_compiled(graph("float[2,3,5] a, float[1,3,4,5] b, float[1,2,2,3,4] c",
                         ["ya = GlobalAveragePool(a)", "yb = GlobalAveragePool(b)", "yc = GlobalAveragePool(c)",
                          "za = GlobalMaxPool(a)", "zb = GlobalMaxPool(b)", "zc = GlobalMaxPool(c)"],
                         ["ya", "yb", "yc", "za", "zb", "zc"]))


def test_max_pool_nan_wins_in_every_window():
    """The separable 2-D max pool (a max down the columns, then along the
    rows) keeps NaN wherever a window holds one, in any tap position."""
    from compiled_check import check_compiled_vs_reference

    x = np.random.default_rng(0).standard_normal((1, 2, 9, 9)).astype("float32")
    x[0, 0, 0, 0] = x[0, 0, 4, 7] = x[0, 1, 8, 3] = np.nan
    x[0, 1, 2, :] = -np.inf
    check_compiled_vs_reference(_pools("MaxPool", [("float[1,2,9,9]", "<kernel_shape=[3,3], strides=[2,2], "
                                                                       "pads=[1,1,1,1]>")]), {"x0": x})
