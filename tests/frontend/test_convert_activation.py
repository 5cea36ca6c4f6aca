"""Numerics of the activation converters: reference interpreter vs onnxruntime."""

import numpy as np
import pytest

from braze.errors import DynamicShapeError
from braze.frontend import import_onnx
from onnx_check import check_against_ort, model, parse


def normal(*shape, scale=3.0):
    return {"x": (np.random.default_rng(0).standard_normal(shape) * scale).astype(np.float32)}


@pytest.mark.parametrize("node", [
    "LeakyRelu(x)", "LeakyRelu<alpha=0.3>(x)",
    "Elu(x)", "Elu<alpha=0.5>(x)",
    "Selu(x)", "Selu<alpha=1.5, gamma=2.0>(x)",
    "HardSigmoid(x)", "HardSigmoid<alpha=0.4, beta=0.3>(x)",
])
@pytest.mark.parametrize("opset", [9, 17])
def test_activation_attributes(node, opset):
    check_against_ort(model("(float[3,4] x) => (float[3,4] y)", f"y = {node}", opset), normal(3, 4), atol=1e-6)


@pytest.mark.parametrize("node", ["LeakyRelu(x)", "Elu(x)", "HardSigmoid(x)", "Gelu(x)", "Clip<min=-1.0>(x)"])
def test_activation_float16(node):
    x = normal(3, 4)["x"].astype(np.float16)
    check_against_ort(model("(float16[3,4] x) => (float16[3,4] y)", f"y = {node}", 20 if "Gelu" in node else 9),
                      {"x": x}, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate):
    check_against_ort(model("(float[3,4] x) => (float[3,4] y)", f'y = Gelu<approximate="{approximate}">(x)', 20),
                      normal(3, 4), atol=1e-6)


def test_gelu_erf_precision():
    # erf-GELU is the BERT activation: the reference must match to float32 rounding
    x = np.linspace(-6, 6, 241, dtype=np.float32)
    check_against_ort(model("(float[241] x) => (float[241] y, float[241] z)", "y = Gelu(x) z = Erf(x)", 20),
                      {"x": x}, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("slope_shape", ["3,1,1", "1", "4", "2,3,1,4"])
@pytest.mark.parametrize("opset", [9, 16])
def test_prelu(slope_shape, opset):
    check_against_ort(model(f"(float[2,3,2,4] x, float[{slope_shape}] slope) => (float[2,3,2,4] y)",
                            "y = PRelu(x, slope)", opset))


@pytest.mark.parametrize("attrs", ["", "<min=-0.5>", "<max=0.5>", "<min=-0.5, max=0.25>"])
def test_clip_attributes(attrs):
    check_against_ort(model("(float[3,4] x) => (float[3,4] y)", f"y = Clip{attrs}(x)", 6))


@pytest.mark.parametrize("bounds", ["x, lo, hi", "x, lo", 'x, "", hi', "x"])
@pytest.mark.parametrize("dtype, np_type, opset", [("float", np.float32, 11), ("float", np.float32, 13),
                                                    ("int32", np.int32, 13), ("int64", np.int64, 13)])
def test_clip_inputs(bounds, dtype, np_type, opset):
    x = np.arange(-2, 10).reshape(3, 4) / 2  # hits both bounds, and ties with them
    signature = f"({dtype}[3,4] x) => ({dtype}[3,4] y) <{dtype} lo = {{1}}, {dtype} hi = {{3}}>"
    check_against_ort(model(signature, f"y = Clip({bounds})", opset), {"x": x.astype(np_type)})


def test_clip_bound_computed_at_run_time():
    text = model("(float[3,4] x, float[1] lo) => (float[3,4] y)", "y = Clip(x, lo)", 13)
    with pytest.raises(DynamicShapeError, match="'min' is computed at run time"):
        import_onnx(parse(text))



def test_clip_open_bound_clips_infinities_like_onnxruntime():
    # an omitted bound is the type's finite limit: -inf becomes -FLT_MAX
    feeds = {"x": np.array([-np.inf, -1, 2, np.inf], "float32")}
    check_against_ort('<ir_version: 8, opset_import: ["" : 17]> g (float[4] x) => (float[4] y) '
                      '{ z = Constant<value = float {0}>()\n y = Clip(x, , z) }', feeds=feeds)
