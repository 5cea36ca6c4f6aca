"""The fold-quant pass (passes/quant.py): dequantize -> conv/matmul folded
to integer products, what it keeps in float and why, and the integer
outputs of a model quantized by onnxruntime against onnxruntime's."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_check import run_ort
from quant_models import dynamic_step, random_images

import braze
from braze.frontend import import_onnx
from braze.ir.interpret import interpret
from braze.passes import PassManager
from braze.passes.fusion import explain


def _qdq_matmul(weight: np.ndarray, w_zero, x_type=TensorProto.UINT8, w_scale=None) -> onnx.ModelProto:
    """y = DQ(x) @ DQ(w) + b, quantized to uint8 and back."""
    k, n = weight.shape
    w_scale = np.full(n, 0.02, np.float32) if w_scale is None else w_scale
    x_zero = np.array(3 if x_type == TensorProto.UINT8 else -5, helper.tensor_dtype_to_np_dtype(x_type))
    inits = [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(w_scale, "ws"),
             numpy_helper.from_array(w_zero, "wz"), numpy_helper.from_array(np.float32(0.05), "xs"),
             numpy_helper.from_array(x_zero, "xz"),
             numpy_helper.from_array(np.linspace(-1, 1, n).astype(np.float32), "b"),
             numpy_helper.from_array(np.float32(0.1), "ys"), numpy_helper.from_array(np.uint8(128), "yz")]
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"], name="dq_x"),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=1, name="dq_w"),
             helper.make_node("MatMul", ["xf", "wf"], ["m"], name="mm"),
             helper.make_node("Add", ["m", "b"], ["a"], name="bias"),
             helper.make_node("QuantizeLinear", ["a", "ys", "yz"], ["y"], name="q_y")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", x_type, [2, 6, k])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, [2, 6, n])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _feeds(model: onnx.ModelProto) -> dict:
    x = model.graph.input[0]
    dtype = helper.tensor_dtype_to_np_dtype(x.type.tensor_type.elem_type)
    info = np.iinfo(dtype)
    shape = [d.dim_value for d in x.type.tensor_type.shape.dim]
    return {"x": np.random.default_rng(0).integers(info.min, info.max, shape, endpoint=True).astype(dtype)}


def _folded(model: onnx.ModelProto):
    module = import_onnx(model)
    PassManager.parse("fold-quant").run(module)
    return module, [op for op in module.main.walk() if op.name == "nn.matmul"]


@pytest.mark.parametrize("x_type", [TensorProto.UINT8, TensorProto.INT8])
def test_matmul_of_dequantized_operands_becomes_an_integer_matmul(x_type):
    rng = np.random.default_rng(1)
    model = _qdq_matmul(rng.integers(-128, 127, (32, 16), endpoint=True).astype(np.int8), np.zeros(16, np.int8),
                        x_type)
    module, (mm,) = _folded(model)
    assert [v.type.dtype for v in mm.operands] == ["ui8", "i8"] and mm.result.type.dtype == "i32"
    assert mm.attributes["braze.quant"] == "folded"
    assert list(mm.attributes["braze.quant_from"]) == ["dq_x", "dq_w"]
    feeds = _feeds(model)
    # the folded graph computes what the float graph does (interpreted), up to ties of the final rounding
    ours, ref = interpret(module, feeds)["y"].astype(int), run_ort(model, feeds)["y"].astype(int)
    assert np.abs(ours - ref).max() <= 1 and np.count_nonzero(ours != ref) <= ref.size // 50


@pytest.mark.parametrize("weight, zero, reason", [
    (np.arange(64, dtype=np.uint8).reshape(8, 8), np.zeros(8, np.uint8), "uint8 weights"),
    (np.arange(64, dtype=np.int8).reshape(8, 8), np.full(8, 2, np.int8), "weight zero point is not zero"),
])
def test_what_is_kept_in_float_says_why(weight, zero, reason):
    model = _qdq_matmul(weight, zero)
    _, (mm,) = _folded(model)
    assert mm.attributes["braze.quant"] == f"kept: {reason}"
    assert mm.operands[0].type.dtype == "f32"
    compiled = braze.compile(model, level=2)
    feeds = _feeds(model)
    ours, ref = compiled.run(feeds)["y"].astype(int), run_ort(model, feeds)["y"].astype(int)
    assert np.abs(ours - ref).max() <= 1


def test_explain_lists_folded_and_kept_products(static_cnn):
    module = import_onnx(onnx.load(static_cnn))
    PassManager.parse("fold-quant,canonicalize").run(module)
    report = explain(module, level=2)
    assert len(report.quantized) == 3 and all(q.folded for q in report.quantized)
    assert {q.op for q in report.quantized} == {"nn.conv", "nn.matmul"}
    assert "3 folded to integer kernels, 0 kept in float" in report.table()
    assert report.to_dict()["quantized"][0]["nodes"]


def _with_integer_output(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with the 8-bit input of its final DequantizeLinear as a second output."""
    last = {o: n for n in model.graph.node for o in n.output}[model.graph.output[0].name]
    assert last.op_type == "DequantizeLinear"
    zero = next(t for t in model.graph.initializer if t.name == last.input[2])
    model = onnx.ModelProto.FromString(model.SerializeToString())
    model.graph.output.append(helper.make_tensor_value_info(last.input[0], zero.data_type, None))
    return model


def test_integer_outputs_equal_onnxruntime_but_for_rounding_ties(static_cnn):
    """The 8-bit logits before the last dequantize: equal to onnxruntime's
    or one apart (a tie of the requantize's rounding, computed in float by
    both); the count of those is small."""
    model = _with_integer_output(onnx.load(static_cnn))
    name = model.graph.output[1].name
    compiled = braze.compile(model, level=2)
    differ = total = 0
    for x in random_images((1, 3, 8, 8), 20, seed=7):
        ours, ref = compiled.run({"x": x})[name].astype(int), run_ort(model, {"x": x})[name].astype(int)
        assert np.abs(ours - ref).max() <= 1
        differ, total = differ + np.count_nonzero(ours != ref), total + ref.size
    assert differ <= total // 20, f"{differ} of {total} integer outputs differ by one"


def test_int8_cnn_keeps_onnxruntime_top1_on_100_inputs(static_cnn):
    model = onnx.load(static_cnn)
    compiled = braze.compile(model, level=2)
    agree = sum(int(np.argmax(compiled.run({"x": x})["y"]) == np.argmax(run_ort(model, {"x": x})["y"]))
                for x in random_images((1, 3, 8, 8), 100, seed=8))
    assert agree == 100


def test_columns_are_padded_to_whole_blocks_and_cut_after():
    """A weight of 40 columns (a classifier's 1000) is multiplied as 64 zero-padded ones, the product cut back."""
    rng = np.random.default_rng(2)
    model = _qdq_matmul(rng.integers(-128, 127, (32, 40), endpoint=True).astype(np.int8), np.zeros(40, np.int8))
    module, (mm,) = _folded(model)
    assert mm.operands[1].type.shape == (32, 64) and mm.result.type.shape == (2, 6, 64)
    compiled = braze.compile(model, level=2)
    feeds = _feeds(model)
    ours, ref = compiled.run(feeds)["y"].astype(int), run_ort(model, feeds)["y"].astype(int)
    assert ours.shape == ref.shape and np.abs(ours - ref).max() <= 1


def _transformer_layer() -> onnx.ModelProto:
    """One encoder layer, d=32, 2 heads of 16, 8 tokens: Q/K/V projections,
    softmax attention, output projection, residual, LayerNorm, a GELU FFN."""
    rng = np.random.default_rng(9)
    d, h, s, f = 32, 2, 8, 64
    w = {n: (rng.standard_normal(shape) * 0.2).astype(np.float32) for n, shape in
         [("wq", (d, d)), ("wk", (d, d)), ("wv", (d, d)), ("wo", (d, d)), ("w1", (d, f)), ("w2", (f, d))]}
    w.update({"b1": (rng.standard_normal(f) * 0.1).astype(np.float32), "g": np.ones(d, np.float32),
              "beta": np.zeros(d, np.float32), "heads": np.array([1, s, h, d // h], np.int64),
              "merged": np.array([1, s, d], np.int64), "scale": np.float32(1 / 4)})
    mk = helper.make_node
    nodes = [mk("MatMul", ["x", "wq"], ["q"]), mk("MatMul", ["x", "wk"], ["k"]), mk("MatMul", ["x", "wv"], ["v"]),
             mk("Reshape", ["q", "heads"], ["q4"]), mk("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]),
             mk("Reshape", ["k", "heads"], ["k4"]), mk("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
             mk("Reshape", ["v", "heads"], ["v4"]), mk("Transpose", ["v4"], ["vt"], perm=[0, 2, 1, 3]),
             mk("MatMul", ["qt", "kt"], ["sc"]), mk("Mul", ["sc", "scale"], ["ss"]),
             mk("Softmax", ["ss"], ["p"], axis=-1), mk("MatMul", ["p", "vt"], ["o4"]),
             mk("Transpose", ["o4"], ["ot"], perm=[0, 2, 1, 3]), mk("Reshape", ["ot", "merged"], ["o"]),
             mk("MatMul", ["o", "wo"], ["a"]), mk("Add", ["a", "x"], ["r"]),
             mk("LayerNormalization", ["r", "g", "beta"], ["n"], axis=-1),
             mk("MatMul", ["n", "w1"], ["h1"]), mk("Add", ["h1", "b1"], ["h2"]), mk("Gelu", ["h2"], ["h3"]),
             mk("MatMul", ["h3", "w2"], ["f2"]), mk("Add", ["f2", "n"], ["y"])]
    graph = helper.make_graph(nodes, "layer", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, s, d])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, s, d])],
                              [numpy_helper.from_array(v, k) for k, v in w.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def test_dynamically_quantized_transformer_layer_matches_onnxruntime(tmp_path):
    """quantize_dynamic's transformer layer (DynamicQuantizeLinear +
    MatMulInteger for each projection, attention in float): every
    projection an 8-bit matmul, the outputs within one quantization step
    of the last product of onnxruntime's."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    onnx.save(_transformer_layer(), tmp_path / "float.onnx")
    quantize_dynamic(tmp_path / "float.onnx", tmp_path / "dyn.onnx", weight_type=QuantType.QInt8)
    model = onnx.load(tmp_path / "dyn.onnx")
    assert sum(n.op_type == "MatMulInteger" for n in model.graph.node) == 6
    products = [op for op in import_onnx(model).main.walk()
                if op.name == "nn.matmul" and op.operands[0].type.dtype == "ui8"]
    assert len(products) == 6 and all(op.operands[1].type.dtype == "i8" for op in products)
    compiled = braze.compile(model, level=2)
    for x in random_images((1, 8, 32), 3, seed=10):
        ours, ref = compiled.run({"x": x})["y"], run_ort(model, {"x": x})["y"]
        np.testing.assert_allclose(ours, ref, rtol=0, atol=dynamic_step(model, x))


def test_convs_stay_float_where_the_cpu_has_no_vnni(static_cnn):
    """On an AVX2 target (no VNNI) the pipeline folds matmuls, not convs,
    and the convs record why; on a non-CPU target nothing is folded."""
    from braze.pipeline import pipeline
    from braze.targets import get_target

    fold = pipeline(2, target=get_target("cpu-avx2")).passes[0]
    assert (fold.name, fold.convs, fold.matmuls) == ("fold-quant", False, True)
    assert not pipeline(2, target=get_target("cuda-sm80")).passes[0].matmuls
    module = import_onnx(onnx.load(static_cnn))
    PassManager([fold]).run(module)
    states = {op.name: op.attributes.get("braze.quant") for op in module.main.walk() if op.name.startswith("nn.")}
    assert states == {"nn.conv": "kept: no int8 conv kernel on this target", "nn.matmul": "folded"}
