"""Writes overflow.onnx: a model whose float32 values exceed float16's range
(65504) between two nodes, so a 16-bit build overflows there unless
``--keep-dtype`` keeps the node that reads them in float32.

    x[1,32] -> Mul by 1e5 (node "scale_up") -> MatMul with W*1e-4 (node "mm_big")
      -> Relu -> MatMul W2 (node "mm_out") -> y[1,8]

``python tests/precision/make_overflow.py`` (re)writes it beside this file.
"""

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def make() -> onnx.ModelProto:
    rng = np.random.default_rng(7)
    w1 = (rng.standard_normal((32, 32)) * 1e-4).astype(np.float32)
    w2 = rng.standard_normal((32, 8)).astype(np.float32) / 8
    nodes = [
        helper.make_node("Mul", ["x", "big"], ["scaled"], name="scale_up"),
        helper.make_node("MatMul", ["scaled", "w1"], ["h"], name="mm_big"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm_out"),
    ]
    graph = helper.make_graph(
        nodes, "overflow",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
        [numpy_helper.from_array(np.array(1e5, np.float32), "big"), numpy_helper.from_array(w1, "w1"),
         numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    onnx.save(make(), os.path.join(os.path.dirname(os.path.abspath(__file__)), "overflow.onnx"))
