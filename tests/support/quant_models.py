"""Small float models and their onnxruntime-quantized forms, shared by the
quantization converter and fold tests."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def small_cnn() -> onnx.ModelProto:
    """conv-relu, conv + residual add, relu, global average pool, gemm."""
    rng = np.random.default_rng(0)
    w = {"w1": rng.standard_normal((8, 3, 3, 3)) * 0.3, "b1": rng.standard_normal(8) * 0.1,
         "w2": rng.standard_normal((8, 8, 3, 3)) * 0.2, "b2": rng.standard_normal(8) * 0.1,
         "wf": rng.standard_normal((4, 8)) * 0.5, "bf": rng.standard_normal(4) * 0.1}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["s"]),
             helper.make_node("Relu", ["s"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1)]
    return float_graph(nodes, "x", [1, 3, 8, 8], [1, 4], w)


def mlp_block() -> onnx.ModelProto:
    """A transformer-ish feed-forward block: x + relu(x @ W1 + b1) @ W2."""
    rng = np.random.default_rng(1)
    w = {"w1": rng.standard_normal((16, 32)) * 0.3, "b1": rng.standard_normal(32) * 0.1,
         "w2": rng.standard_normal((32, 16)) * 0.3}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["a"]), helper.make_node("MatMul", ["a", "w2"], ["o"]),
             helper.make_node("Add", ["o", "x"], ["y"])]
    return float_graph(nodes, "x", [1, 4, 16], [1, 4, 16], w)


def float_graph(nodes, x: str, x_shape, y_shape, weights) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(x, TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
                              [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def random_images(shape, n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(n)]


def quantized_static(model: onnx.ModelProto, folder, name: str, **options):
    """``model`` quantized by quantize_static (per channel), calibrated on 4 random images: its path."""
    from onnxruntime.quantization import CalibrationDataReader, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter({"x": x} for x in random_images((1, 3, 8, 8), 4, seed=2))

        def get_next(self):
            return next(self.feeds, None)

    onnx.save(model, folder / "float.onnx")
    quantize_static(folder / "float.onnx", folder / name, Reader(), per_channel=True, **options)
    return folder / name


def dynamic_step(model: onnx.ModelProto, x: np.ndarray) -> float:
    """One step of the last integer product in float: the a_scale * b_scale
    that the last Mul applies to it (computed from x at run time)."""
    from onnx.reference import ReferenceEvaluator

    last = [n for n in model.graph.node if n.op_type == "Mul"][-1]
    assert "scale" in last.input[1]
    return float(ReferenceEvaluator(model).run([last.input[1]], {"x": x})[0].max())
