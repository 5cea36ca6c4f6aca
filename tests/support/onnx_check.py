"""Helpers for tests: import an ONNX model and compare the reference
interpreter with onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort

from braze.frontend import import_onnx
from braze.ir.interpret import interpret


def model(signature: str, body: str, opset: int = 17) -> str:
    """A one-graph model in ONNX text: ``model("(float[2] a) => (float[2] y)", "y = Relu(a)")``."""
    return f'<ir_version: 10, opset_import: ["" : {opset}]> g {signature} {{ {body} }}'


def parse(text: str) -> onnx.ModelProto:
    return onnx.parser.parse_model(text)


def float_model(nodes, inputs, outputs, weights, opset: int = 17) -> onnx.ModelProto:
    """An opset-17 model of ``nodes`` with float inputs ``[(name, shape)]``,
    float outputs of inferred shape, and numpy ``weights`` as initializers."""
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(w, n) for n, w in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def random_inputs(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for inp in model.graph.input:
        if inp.name in inits:
            continue
        tt = inp.type.tensor_type
        shape = [d.dim_value for d in tt.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if dtype == np.bool_:
            feeds[inp.name] = rng.random(shape) > 0.5
        elif np.issubdtype(dtype, np.integer):
            feeds[inp.name] = rng.integers(0, 5, shape).astype(dtype)
        else:
            feeds[inp.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def run_ort(model: onnx.ModelProto, feeds: dict) -> dict[str, np.ndarray]:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def check_against_ort(text_or_model, feeds=None, rtol=1e-5, atol=1e-5, pipeline: str | None = None):
    """Import the model, run braze's reference interpreter and onnxruntime,
    and assert the outputs agree. Returns the imported module."""
    model = parse(text_or_model) if isinstance(text_or_model, str) else text_or_model
    feeds = feeds if feeds is not None else random_inputs(model)
    module = import_onnx(model)
    if pipeline:
        from braze.passes import PassManager

        PassManager.parse(pipeline).run(module)
    ours = interpret(module, feeds)
    ref = run_ort(model, feeds)
    for name, expected in ref.items():
        got = ours[name]
        assert got.shape == expected.shape, f"{name}: shape {got.shape} vs {expected.shape}"
        assert got.dtype == expected.dtype, f"{name}: dtype {got.dtype} vs {expected.dtype}"
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, err_msg=name)
    return module
