"""Where the test models are: the tiny exports shipped in braze/data and the
light_* CNNs inside the onnx wheel."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DATA = Path(__file__).parents[2] / "braze" / "data"
TINY = ["bert-tiny", "vit-tiny", "mobilenetv2-tiny"]
LIGHT_DIR = Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light"
LIGHT = sorted(p.stem for p in LIGHT_DIR.glob("light_*.onnx"))


def tiny(name: str) -> Path:
    return DATA / f"{name}.onnx"


def light(name: str) -> Path:
    return LIGHT_DIR / f"{name}.onnx"


def assert_close(ours: dict, ref: dict) -> None:
    """Every output of ``ref`` within 1e-4 of its scale (max |ref|, at least 1) in ``ours``."""
    for name, expected in ref.items():
        scale = max(1.0, float(np.abs(expected).max()))
        err = float(np.abs(ours[name].astype(np.float64) - expected).max())
        assert err <= 1e-4 * scale, f"{name}: max abs error {err:.3e} (scale {scale:.3g})"


def mlp(path, m=32, k=64, n=64, layers=1, seed=0):
    """x[m,k] -> (MatMul + bias, ReLU) x layers; the same shapes in each layer."""
    rng = np.random.default_rng(seed)
    nodes, inits, x = [], [], "x"
    for i in range(layers):
        inits += [numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32) / 8, f"W{i}"),
                  numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), f"b{i}")]
        nodes += [helper.make_node("MatMul", [x, f"W{i}"], [f"mm{i}"], name=f"mm{i}"),
                  helper.make_node("Add", [f"mm{i}", f"b{i}"], [f"add{i}"], name=f"bias{i}"),
                  helper.make_node("Relu", [f"add{i}"], [f"y{i}"], name=f"relu{i}")]
        x = f"y{i}"
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [m, n])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)
