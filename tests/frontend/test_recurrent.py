"""RNN, GRU and LSTM (converters/recurrent.py): small models with constant
weights, as exporters write them, compiled at every fusion level and run
against onnxruntime. ONNX's own node cases run in test_conformance.py."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import braze
from braze.errors import OnnxImportError
from braze.frontend import import_onnx


def _model(op: str, seq: int, batch: int, inputs: int, hidden: int, directions: int, seed: int, lens: bool,
           **attrs) -> onnx.ModelProto:
    """One recurrence over x [seq, batch, inputs] (or batch-major with
    layout=1), constant weights, optional run-time sequence_lens; every
    output of the node is a graph output."""
    rng = np.random.default_rng(seed)
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    w = {"W": rng.standard_normal((directions, gates * hidden, inputs)) * 0.4,
         "R": rng.standard_normal((directions, gates * hidden, hidden)) * 0.4,
         "B": rng.standard_normal((directions, 2 * gates * hidden)) * 0.2,
         "h0": rng.standard_normal((directions, batch, hidden)) * 0.5}
    names = ["x", "W", "R", "B", "lens" if lens else "", "h0"]
    if op == "LSTM":
        w["c0"] = rng.standard_normal((directions, batch, hidden)) * 0.5
        w["P"] = rng.standard_normal((directions, 3 * hidden)) * 0.3
        names += ["c0", "P"]
    if attrs.get("layout"):
        w["h0"] = w["h0"].transpose(1, 0, 2)
        w["c0"] = w["c0"].transpose(1, 0, 2) if "c0" in w else None
    outputs = ["y", "y_h", "y_c"][:3 if op == "LSTM" else 2]
    x_shape = [batch, seq, inputs] if attrs.get("layout") else [seq, batch, inputs]
    graph_inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)]
    if lens:
        graph_inputs.append(helper.make_tensor_value_info("lens", TensorProto.INT32, [batch]))
    graph = helper.make_graph(
        [helper.make_node(op, names, outputs, hidden_size=hidden, **attrs)], op.lower(), graph_inputs,
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in w.items() if v is not None])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def _feeds(model: onnx.ModelProto, seed: int, lens=None) -> dict:
    rng = np.random.default_rng(seed)
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    feeds = {"x": rng.standard_normal(shape).astype(np.float32)}
    if lens is not None:
        feeds["lens"] = np.array(lens, np.int32)
    return feeds


def _check(model: onnx.ModelProto, feeds: dict, level: int, atol=2e-5, reference=None) -> None:
    """braze at ``level`` against onnxruntime running ``model`` (or
    ``reference(feeds)``: onnxruntime runs no batch-major recurrence)."""
    art = braze.compile(model, level=level)
    got = art.run(feeds)
    if reference is None:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    else:
        want = reference(feeds)
    assert set(got) == set(want)
    for name, w in want.items():
        np.testing.assert_allclose(got[name], w, rtol=1e-4, atol=atol, err_msg=name)


# one model per kind, each at the levels that change what fuses (0: op by op, 2, 3)
_LSTM = _model("LSTM", 4, 3, 5, 6, 2, 0, lens=True, direction="bidirectional")
_GRU_ATTRS = dict(direction="reverse", linear_before_reset=1, clip=2.5)
_GRU = _model("GRU", 3, 2, 4, 5, 1, 1, lens=False, layout=1, **_GRU_ATTRS)


def _time_major_reference(feeds: dict) -> dict:
    """_GRU's outputs by onnxruntime: the same GRU time-major (layout 0),
    its input and outputs transposed."""
    twin = _model("GRU", 3, 2, 4, 5, 1, 1, lens=False, **_GRU_ATTRS)
    sess = ort.InferenceSession(twin.SerializeToString(), providers=["CPUExecutionProvider"])
    y, y_h = sess.run(None, {"x": feeds["x"].transpose(1, 0, 2)})
    return {"y": y.transpose(2, 0, 1, 3), "y_h": y_h.transpose(1, 0, 2)}


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_bidirectional_lstm_with_peepholes_and_sequence_lengths(level):
    """Sequences of 4, 2 and 3 steps: past its end a sequence keeps its
    state and gives zeros; the reverse direction starts at its own end."""
    _check(_LSTM, _feeds(_LSTM, 0, lens=[4, 2, 3]), level)


@pytest.mark.parametrize("level", [0, 2, 3])
def test_reverse_batch_major_gru(level):
    _check(_GRU, _feeds(_GRU, 1), level, reference=_time_major_reference)


def test_gru_reset_after_the_product_or_before():
    """linear_before_reset=0 multiplies r into H before the product (the
    default); both forms against onnxruntime."""
    model = _model("GRU", 3, 2, 4, 5, 2, 2, lens=False, direction="bidirectional")
    _check(model, _feeds(model, 2), 2)


def test_rnn_activation_with_alpha_and_beta():
    model = _model("RNN", 3, 2, 4, 5, 1, 3, lens=True, activations=["HardSigmoid"], activation_alpha=[0.3],
                   activation_beta=[0.4])
    _check(model, _feeds(model, 3, lens=[1, 3]), 2)


def test_input_projection_is_one_matmul_over_every_step():
    """X @ W^T for all steps is one nn.matmul of [seq*batch, input]; each
    step adds one recurrent product per direction (the GRU: two)."""
    module = import_onnx(_LSTM)
    matmuls = [op for op in module.main.body.ops if op.name == "nn.matmul"]
    assert [op.operands[0].type.shape for op in matmuls[:1]] == [(12, 5)]
    assert len(matmuls) == 2 * (1 + 4)


def test_unknown_activation_and_mismatched_list_are_typed_errors():
    with pytest.raises(OnnxImportError, match="activation 'Swish'"):
        import_onnx(_model("RNN", 2, 1, 3, 4, 1, 0, lens=False, activations=["Swish"]))
    with pytest.raises(OnnxImportError, match="needs 2 activations"):
        import_onnx(_model("RNN", 2, 1, 3, 4, 2, 0, lens=False, direction="bidirectional", activations=["Tanh"]))
