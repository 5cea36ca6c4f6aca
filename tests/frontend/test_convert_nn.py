"""Numerics of the nn converters (MatMul, Gemm, softmax, normalizations,
LRN, Einsum, TopK, CumSum) vs onnxruntime. Convolutions and pooling:
test_convert_conv.py."""

import numpy as np
import pytest

from onnx_check import check_against_ort


def check(signature: str, body: str, opset: int = 17, outputs: str = "y", feeds=None, constants: str = ""):
    """``constants``: initializers in ONNX text syntax, e.g. ``int64[1] k = {3}``."""
    constants = f"<{constants}>" if constants else ""
    return check_against_ort(
        f'<ir_version: 8, opset_import: ["" : {opset}]> g ({signature}) => ({outputs}) {constants} {{ {body} }}',
        feeds)


@pytest.mark.parametrize("a, b", [
    ("float[3,4]", "float[4,5]"),
    ("float[4]", "float[4,5]"),
    ("float[2,3,4]", "float[4]"),
    ("float[4]", "float[4]"),
    ("float[2,1,3,4]", "float[5,4,6]"),
    ("int32[2,3]", "int32[3,2]"),
])
def test_matmul(a, b):
    check(f"{a} a, {b} b", "y = MatMul(a, b)")


@pytest.mark.parametrize("attrs, a, b", [
    ("", "float[3,4]", "float[4,5]"),
    ("<transA=1>", "float[4,3]", "float[4,5]"),
    ("<transB=1, alpha=0.5>", "float[3,4]", "float[5,4]"),
    ("<transA=1, transB=1, alpha=2.0, beta=0.25>", "float[4,3]", "float[5,4]"),
])
@pytest.mark.parametrize("c", ["", "float[5] c", "float[3,5] c", "float[1,5] c", "float[3,1] c", "float c"])
def test_gemm(attrs, a, b, c):
    check(f"{a} a, {b} b" + (f", {c}" if c else ""), f"y = Gemm {attrs} (a, b{', c' if c else ''})")


@pytest.mark.parametrize("opset", [9, 11, 13])
def test_gemm_opsets(opset):
    check("float[3,4] a, float[5,4] b, float[3,5] c", "y = Gemm <transB=1, beta=0.5> (a, b, c)", opset)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset, axis", [
    (11, None), (11, 0), (11, 2), (11, -1), (11, -2),  # 2-D coercion at axis
    (13, None), (13, 0), (13, 1), (13, -2),  # one axis
])
def test_softmax(op, opset, axis):
    attrs = "" if axis is None else f"<axis={axis}>"
    check("float[2,3,4] x", f"y = {op} {attrs} (x)", opset)


@pytest.mark.parametrize("x, attrs, bias", [
    ("float[2,3,8]", "", True),
    ("float[2,3,8]", "<axis=1, epsilon=0.001>", True),
    ("float[2,3,4]", "<axis=-2>", False),
    ("float[4,6]", "<axis=0>", True),
])
def test_layer_normalization(x, attrs, bias):
    dims = x[x.index("[") + 1:-1].split(",")
    axis = int(attrs.split("axis=")[1].split(",")[0].rstrip(">")) if "axis" in attrs else -1
    normalized = ",".join(dims[axis:])
    b = f", float[{normalized}] b" if bias else ""
    check(f"{x} x, float[{normalized}] s{b}", f"y = LayerNormalization {attrs} (x, s{', b' if bias else ''})")


@pytest.mark.parametrize("x, attrs", [("float[2,3,8]", ""), ("float[2,3,4]", "<axis=1, epsilon=0.1>"),
                                      ("float16[2,5]", "<axis=0>")])
def test_layer_normalization_statistics(x, attrs):
    """The Mean and InvStdDev outputs, in float32 whatever the input type."""
    dims = x[x.index("[") + 1:-1].split(",")
    axis = int(attrs.split("axis=")[1].split(",")[0].rstrip(">")) if "axis" in attrs else -1
    scale = f"{x[:x.index('[')]}[{','.join(dims[axis:])}]"
    check(f"{x} x, {scale} s", f"y, mean, inv = LayerNormalization {attrs} (x, s)", outputs="y, mean, inv")


@pytest.mark.parametrize("opset, attrs", [(7, "<spatial=1>"), (9, ""), (15, "<epsilon=0.01>")])
@pytest.mark.parametrize("x", ["float[2,3]", "float[2,3,5]", "float[1,3,4,5]"])
def test_batch_normalization(opset, attrs, x):
    feeds = {"x": np.random.default_rng(0).standard_normal([int(d) for d in x[6:-1].split(",")]).astype("f"),
             "var": np.array([0.5, 1.0, 2.0], "f")}
    for name in ("s", "b", "mean"):
        feeds[name] = np.array([0.3, -1.2, 0.7], "f")
    check(f"{x} x, float[3] s, float[3] b, float[3] mean, float[3] var",
          f"y = BatchNormalization {attrs} (x, s, b, mean, var)", opset, feeds=feeds)


@pytest.mark.parametrize("x", ["float[2,3,5]", "float[1,3,4,5]", "float[2,3,2,3,2]"])
def test_instance_normalization(x):
    check(f"{x} x, float[3] s, float[3] b", "y = InstanceNormalization <epsilon=0.001> (x, s, b)")


@pytest.mark.parametrize("attrs", ["<size=3>", "<size=1, alpha=0.01, beta=0.5, bias=2.0>", "<size=5, alpha=0.1>"])
def test_lrn(attrs):
    check("float[2,6,3,4] x", f"y = LRN {attrs} (x)")


@pytest.mark.parametrize("equation, shapes", [
    ("ij,jk->ik", ["float[2,3]", "float[3,4]"]),
    ("bij,bjk->bik", ["float[2,2,3]", "float[2,3,4]"]),
    ("ij,jk", ["float[2,3]", "float[3,4]"]),  # implicit output
    ("ji", ["float[2,3]"]),  # implicit output reorders
    ("ij->ji", ["float[2,3]"]),
    ("ii->i", ["float[3,3]"]),
    ("ij->", ["float[2,3]"]),
    ("i,j->ij", ["float[2]", "float[3]"]),
    ("...ij,...jk->...ik", ["float[2,1,2,3]", "float[1,3,3,4]"]),
    ("bhid, bhjd -> bhij", ["float[1,2,3,4]", "float[1,2,5,4]"]),  # attention scores, with spaces
    ("ij,jk,kl->il", ["int32[2,3]", "int32[3,2]", "int32[2,2]"]),
])
def test_einsum(equation, shapes):
    names = [f"x{i}" for i in range(len(shapes))]
    check(", ".join(f"{s} {n}" for s, n in zip(shapes, names)),
          f'y = Einsum <equation="{equation}"> ({", ".join(names)})', 12)


@pytest.mark.parametrize("x", ["float[3,7]", "int64[3,7]", "int32[4,5,6]"])  # ints: many ties
@pytest.mark.parametrize("k, axis, largest", [(3, -1, 1), (2, 0, 1), (4, 1, 0), (1, -2, 0)])
def test_topk(x, k, axis, largest):
    check(f"{x} x", f"values, indices = TopK <axis={axis}, largest={largest}> (x, k)", outputs="values, indices",
          constants=f"int64[1] k = {{{k}}}")


def test_topk_opset_9():
    check("float[4,5] x", "values, indices = TopK <k=3, axis=0> (x)", 9, "values, indices")


@pytest.mark.parametrize("x", ["float[3,4]", "int32[3,4]", "double[2,3,2]"])
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum(x, axis, exclusive, reverse):
    check(f"{x} x", f"y = CumSum <exclusive={exclusive}, reverse={reverse}> (x, axis)",
          constants=f"int32 axis = {{{axis}}}")
