"""The rest of ONNX's ops (issue 40) beyond their node cases in
test_conformance.py: ops imported as their onnx function bodies, the ops
whose output size depends on values (exact at compile time, or a typed
refusal), and a few compiled at level 2 against onnxruntime."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import braze
from braze.errors import DynamicShapeError
from braze.frontend import import_onnx


def _model(nodes, inputs, outputs, inits=(), opset=18):
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                         [h.make_tensor_value_info(n, t, s) for n, t, s in outputs], list(inits))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def _check(model, feeds, level=2, atol=1e-5):
    got = braze.compile(model, level=level).run(feeds)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for o, want in zip(sess.get_outputs(), sess.run(None, feeds)):
        np.testing.assert_allclose(got[o.name], want, rtol=1e-5, atol=atol, err_msg=o.name)


def test_an_op_defined_as_a_function_imports_as_its_body():
    """SoftmaxCrossEntropyLoss has no converter: onnx builds its body for
    the node (reduction, ignore_index), and braze converts that."""
    model = _model([h.make_node("SoftmaxCrossEntropyLoss", ["scores", "labels"], ["loss"], reduction="mean",
                                ignore_index=1)],
                   [("scores", T.FLOAT, [4, 5]), ("labels", T.INT64, [4])], [("loss", T.FLOAT, [])])
    names = {op.loc.name for op in import_onnx(model).walk() if op.loc}
    assert names and all(n.startswith("SoftmaxCrossEntropyLoss_0/") for n in names)
    rng = np.random.default_rng(0)
    _check(model, {"scores": rng.standard_normal((4, 5)).astype(np.float32), "labels": np.array([0, 1, 4, 2])})


def test_output_size_from_values_is_exact_or_refused():
    model = _model([h.make_node("NonZero", ["x"], ["y"])], [("x", T.FLOAT, [2, 3])], [("y", T.INT64, None)])
    with pytest.raises(DynamicShapeError, match=r"NonZero_0 \(NonZero\): its output size depends on the values "
                                                r"of 'x'") as e:
        import_onnx(model)
    assert e.value.inputs == ("x",)
    constant = _model([h.make_node("NonZero", ["c"], ["y"])], [], [("y", T.INT64, None)],
                      [nh.from_array(np.array([[0, 2, 0], [1, 0, 3]], np.float32), "c")])
    np.testing.assert_array_equal(braze.compile(constant).run({})["y"], [[0, 1, 1], [1, 0, 2]])


def test_compress_by_a_constant_condition_gathers_run_time_data():
    model = _model([h.make_node("Compress", ["x", "keep"], ["y"], axis=1)], [("x", T.FLOAT, [2, 4])],
                   [("y", T.FLOAT, None)], [nh.from_array(np.array([True, False, True, True]), "keep")])
    _check(model, {"x": np.arange(8, dtype=np.float32).reshape(2, 4)})


def test_kv_cache_write_and_scatter_at_level_2():
    """TensorScatter (a KV cache's append at per-batch positions) and
    ScatterND with a reduction, fused into their neighbours' kernels at
    level 2."""
    model = _model([h.make_node("Mul", ["cache", "two"], ["c2"]),
                    h.make_node("TensorScatter", ["c2", "update", "pos"], ["kv"], mode="circular"),
                    h.make_node("ScatterND", ["kv", "idx", "rows"], ["out"], reduction="add"),
                    h.make_node("Relu", ["out"], ["y"])],
                   [("cache", T.FLOAT, [2, 1, 4, 3]), ("update", T.FLOAT, [2, 1, 2, 3]), ("pos", T.INT64, [2]),
                    ("rows", T.FLOAT, [1, 1, 4, 3])], [("y", T.FLOAT, None)],
                   [nh.from_array(np.array(2, np.float32), "two"), nh.from_array(np.array([[1]], np.int64), "idx")],
                   opset=24)
    rng = np.random.default_rng(1)
    _check(model, {"cache": rng.standard_normal((2, 1, 4, 3)).astype(np.float32),
                   "update": rng.standard_normal((2, 1, 2, 3)).astype(np.float32), "pos": np.array([3, 1]),
                   "rows": rng.standard_normal((1, 1, 4, 3)).astype(np.float32)})


def test_grid_sample_reference_matches_the_kernel():
    """nn.grid_sample's numpy reference (the interpreter's) and its TVM
    kernel agree, and both agree with onnxruntime."""
    from braze.ir.interpret import interpret

    model = _model([h.make_node("GridSample", ["x", "grid"], ["y"], mode="cubic", padding_mode="reflection")],
                   [("x", T.FLOAT, [1, 2, 5, 6]), ("grid", T.FLOAT, [1, 3, 4, 2])], [("y", T.FLOAT, None)],
                   opset=20)
    rng = np.random.default_rng(2)
    feeds = {"x": rng.standard_normal((1, 2, 5, 6)).astype(np.float32),
             "grid": rng.uniform(-1.3, 1.3, (1, 3, 4, 2)).astype(np.float32)}
    reference = interpret(import_onnx(model), feeds)["y"]
    np.testing.assert_allclose(braze.compile(model, level=2).run(feeds)["y"], reference, rtol=1e-4, atol=1e-5)
    _check(model, feeds, atol=1e-4)


def test_dft_of_a_real_signal_against_numpy():
    model = _model([h.make_node("DFT", ["x", "", "axis"], ["y"], onesided=1)], [("x", T.FLOAT, [2, 16, 1])],
                   [("y", T.FLOAT, None)], [nh.from_array(np.array(1, np.int64), "axis")], opset=20)
    x = np.random.default_rng(3).standard_normal((2, 16, 1)).astype(np.float32)
    got = braze.compile(model, level=2).run({"x": x})["y"]
    want = np.fft.rfft(x[..., 0].astype(np.float64), axis=1)
    np.testing.assert_allclose(got[..., 0] + 1j * got[..., 1], want, atol=1e-5)
