"""Transformer blocks as today's exporters write them at opset 23, built with
onnx.helper: a BERT-style encoder layer (one ``Attention`` op with a padding
mask, LayerNorm, GELU) and a Llama-style decoder layer (``RMSNormalization``,
``RotaryEmbedding``, grouped-query causal ``Attention``, SwiGLU). Each
compiles at levels 0-3 and matches onnxruntime to 1e-4 of the output's
largest magnitude; the attention is one flash kernel at every level."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import braze

SEQ, MODEL, HEADS, KV_HEADS = 24, 64, 4, 2
HEAD = MODEL // HEADS


def _weights(rng, **shapes):
    return {name: (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32) if len(shape) == 2
            else (0.1 * rng.standard_normal(shape) + (1.0 if name.endswith("gamma") else 0.0)).astype(np.float32)
            for name, shape in shapes.items()}


def _model(nodes, inputs, weights, opset=23):
    graph = helper.make_graph(nodes, "block", inputs, [helper.make_tensor_value_info("out", TP.FLOAT, None)],
                              [numpy_helper.from_array(w, n) for n, w in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def bert_layer():
    rng = np.random.default_rng(1)
    w = _weights(rng, wq=(MODEL, MODEL), wk=(MODEL, MODEL), wv=(MODEL, MODEL), wo=(MODEL, MODEL),
                 w1=(MODEL, 4 * MODEL), w2=(4 * MODEL, MODEL), bq=(MODEL,), bk=(MODEL,), bv=(MODEL,), bo=(MODEL,),
                 b1=(4 * MODEL,), b2=(MODEL,), ln1_gamma=(MODEL,), ln1_beta=(MODEL,), ln2_gamma=(MODEL,),
                 ln2_beta=(MODEL,))
    nodes = []
    for p in "qkv":
        nodes += [helper.make_node("MatMul", ["x", f"w{p}"], [f"{p}0"]),
                  helper.make_node("Add", [f"{p}0", f"b{p}"], [p])]
    nodes += [
        helper.make_node("Attention", ["q", "k", "v", "mask"], ["att"], q_num_heads=HEADS, kv_num_heads=HEADS),
        helper.make_node("MatMul", ["att", "wo"], ["o0"]), helper.make_node("Add", ["o0", "bo"], ["o1"]),
        helper.make_node("Add", ["o1", "x"], ["r1"]),
        helper.make_node("LayerNormalization", ["r1", "ln1_gamma", "ln1_beta"], ["h1"], axis=-1, epsilon=1e-12),
        helper.make_node("MatMul", ["h1", "w1"], ["f0"]), helper.make_node("Add", ["f0", "b1"], ["f1"]),
        helper.make_node("Gelu", ["f1"], ["f2"]),
        helper.make_node("MatMul", ["f2", "w2"], ["f3"]), helper.make_node("Add", ["f3", "b2"], ["f4"]),
        helper.make_node("Add", ["f4", "h1"], ["r2"]),
        helper.make_node("LayerNormalization", ["r2", "ln2_gamma", "ln2_beta"], ["out"], axis=-1, epsilon=1e-12),
    ]
    inputs = [helper.make_tensor_value_info("x", TP.FLOAT, [1, SEQ, MODEL]),
              helper.make_tensor_value_info("mask", TP.BOOL, [1, 1, SEQ, SEQ])]
    feeds = {"x": rng.standard_normal((1, SEQ, MODEL)).astype(np.float32),
             "mask": np.broadcast_to(np.arange(SEQ) < SEQ - 5, (1, 1, SEQ, SEQ)).copy()}
    return _model(nodes, inputs, w), feeds


def llama_layer():
    rng = np.random.default_rng(2)
    kv = KV_HEADS * HEAD
    w = _weights(rng, wq=(MODEL, MODEL), wk=(MODEL, kv), wv=(MODEL, kv), wo=(MODEL, MODEL),
                 wg=(MODEL, 2 * MODEL), wu=(MODEL, 2 * MODEL), wd=(2 * MODEL, MODEL), n1_gamma=(MODEL,),
                 n2_gamma=(MODEL,))
    angles = np.arange(64)[:, None] / 10000 ** (np.arange(HEAD // 2) / (HEAD // 2))
    w.update(cos=np.cos(angles).astype(np.float32), sin=np.sin(angles).astype(np.float32),
             split_q=np.array([1, SEQ, HEADS, HEAD], np.int64), split_kv=np.array([1, SEQ, KV_HEADS, HEAD], np.int64),
             merge=np.array([1, SEQ, MODEL], np.int64))
    nodes = [helper.make_node("RMSNormalization", ["x", "n1_gamma"], ["h"], axis=-1, epsilon=1e-6)]
    for p, split in (("q", "split_q"), ("k", "split_kv"), ("v", "split_kv")):
        nodes += [helper.make_node("MatMul", ["h", f"w{p}"], [f"{p}0"]),
                  helper.make_node("Reshape", [f"{p}0", split], [f"{p}1"]),
                  helper.make_node("Transpose", [f"{p}1"], [f"{p}4"], perm=[0, 2, 1, 3])]
    nodes += [
        helper.make_node("RotaryEmbedding", ["q4", "cos", "sin", "pos"], ["qr"]),
        helper.make_node("RotaryEmbedding", ["k4", "cos", "sin", "pos"], ["kr"]),
        helper.make_node("Attention", ["qr", "kr", "v4"], ["att"], is_causal=1),
        helper.make_node("Transpose", ["att"], ["att_t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["att_t", "merge"], ["att3"]),
        helper.make_node("MatMul", ["att3", "wo"], ["o"]), helper.make_node("Add", ["o", "x"], ["r1"]),
        helper.make_node("RMSNormalization", ["r1", "n2_gamma"], ["h2"], axis=-1, epsilon=1e-6),
        helper.make_node("MatMul", ["h2", "wg"], ["g"]), helper.make_node("Sigmoid", ["g"], ["gs"]),
        helper.make_node("Mul", ["g", "gs"], ["silu"]), helper.make_node("MatMul", ["h2", "wu"], ["u"]),
        helper.make_node("Mul", ["silu", "u"], ["gu"]), helper.make_node("MatMul", ["gu", "wd"], ["dn"]),
        helper.make_node("Add", ["dn", "r1"], ["out"]),
    ]
    inputs = [helper.make_tensor_value_info("x", TP.FLOAT, [1, SEQ, MODEL]),
              helper.make_tensor_value_info("pos", TP.INT64, [1, SEQ])]
    feeds = {"x": rng.standard_normal((1, SEQ, MODEL)).astype(np.float32),
             "pos": np.arange(3, 3 + SEQ, dtype=np.int64).reshape(1, SEQ)}
    return _model(nodes, inputs, w), feeds


@pytest.mark.parametrize("build", [bert_layer, llama_layer], ids=["bert", "llama"])
@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_opset23_block_matches_onnxruntime(build, level):
    model, feeds = build()
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    artifact = braze.compile(model, level=level)
    got = artifact.run(feeds)["out"]
    assert np.abs(got - ref).max() <= 1e-4 * np.abs(ref).max()
    assert [k["schedule"] for k in artifact.kernels].count("flash") == 1
