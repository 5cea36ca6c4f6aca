"""The quantization converters (converters/quant.py): onnxruntime-quantized
models compiled and run against onnxruntime, the import forms through the
reference interpreter, and the refused types. ONNX's own node cases run in
test_conformance.py."""

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx_check import check_against_ort, parse, run_ort
from quant_models import dynamic_step, float_graph, mlp_block, quantized_static, random_images, small_cnn

import braze
from braze.errors import OnnxImportError
from braze.frontend import import_onnx
from braze.ir.interpret import interpret


# --- models quantized by onnxruntime, compiled -----------------------------------------------------
@pytest.fixture(scope="module")
def qoperator_cnn(tmp_path_factory):
    """Two convs quantized by quantize_static in the QOperator format:
    QLinearConv, uint8 x int8 per channel (its Add, Gemm and pooling would
    be onnxruntime's com.microsoft ops, which braze does not import)."""
    from onnxruntime.quantization import QuantFormat, QuantType

    rng = np.random.default_rng(6)
    w = {"w1": rng.standard_normal((8, 3, 3, 3)) * 0.3, "b1": rng.standard_normal(8) * 0.1,
         "w2": rng.standard_normal((16, 8, 3, 3)) * 0.2}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])]
    return quantized_static(float_graph(nodes, "x", [1, 3, 8, 8], [1, 16, 4, 4], w), tmp_path_factory.mktemp("quant"),
                             "qop.onnx", quant_format=QuantFormat.QOperator, activation_type=QuantType.QUInt8,
                             weight_type=QuantType.QInt8)


@pytest.fixture(scope="module")
def dynamic_block(tmp_path_factory):
    """The MLP block quantized by quantize_dynamic: DynamicQuantizeLinear + MatMulInteger."""
    from onnxruntime.quantization import quantize_dynamic

    tmp = tmp_path_factory.mktemp("quant")
    onnx.save(mlp_block(), tmp / "float.onnx")
    quantize_dynamic(tmp / "float.onnx", tmp / "dynamic.onnx")
    return tmp / "dynamic.onnx"


def _output_step(model: onnx.ModelProto) -> float:
    """The quantization step of the graph output: its DequantizeLinear's scale."""
    producer = {o: n for n in model.graph.node for o in n.output}[model.graph.output[0].name]
    assert producer.op_type == "DequantizeLinear"
    scales = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    return float(scales[producer.input[1]].max())


@pytest.mark.parametrize("level", [0, 2])
def test_static_qdq_cnn_within_one_step_of_onnxruntime(static_cnn, level):
    model = onnx.load(static_cnn)
    assert {"QuantizeLinear", "DequantizeLinear"} <= {n.op_type for n in model.graph.node}
    compiled = braze.compile(static_cnn, level=level)
    step = _output_step(model)
    for x in random_images((1, 3, 8, 8), 2, seed=3):
        ours, ref = compiled.run({"x": x})["y"], run_ort(model, {"x": x})["y"]
        np.testing.assert_allclose(ours, ref, rtol=0, atol=step * 1.001)


def test_qoperator_cnn_runs_int8_convs_within_one_step_of_onnxruntime(qoperator_cnn):
    """QLinearConv of uint8 by int8 weights imports as the 8-bit conv
    itself (its padding the zero point), which an integer rule takes."""
    model = onnx.load(qoperator_cnn)
    assert "QLinearConv" in {n.op_type for n in model.graph.node}
    compiled = braze.compile(qoperator_cnn, level=2)
    module = import_onnx(model)
    convs = [op for op in module.main.walk() if op.name == "nn.conv"]
    assert convs and all(op.operands[0].type.dtype == "ui8" for op in convs)
    step = _output_step(model)
    for x in random_images((1, 3, 8, 8), 2, seed=3):
        ours, ref = compiled.run({"x": x})["y"], run_ort(model, {"x": x})["y"]
        np.testing.assert_allclose(ours, ref, rtol=0, atol=step * 1.001)


@pytest.mark.parametrize("level", [0, 2])
def test_dynamic_matmul_block_within_one_step_of_onnxruntime(dynamic_block, level):
    model = onnx.load(dynamic_block)
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= {n.op_type for n in model.graph.node}
    compiled = braze.compile(dynamic_block, level=level)
    for x in random_images((1, 4, 16), 2, seed=4):
        ours, ref = compiled.run({"x": x})["y"], run_ort(model, {"x": x})["y"]
        np.testing.assert_allclose(ours, ref, rtol=0, atol=dynamic_step(model, x))


# --- import forms, through the reference interpreter ---------------------------------------------------
def _check(signature: str, body: str, opset: int, init: str = ""):
    text = f'<ir_version: 10, opset_import: ["" : {opset}]> g ({signature}) => (y) {init} {{ {body} }}'
    rng = np.random.default_rng(5)
    model = parse(text)
    feeds = {}
    for inp in model.graph.input:
        dtype = helper.tensor_dtype_to_np_dtype(inp.type.tensor_type.elem_type)
        shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
        if np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            feeds[inp.name] = rng.integers(max(info.min, -300), min(info.max, 300), shape, endpoint=True).astype(dtype)
        else:
            feeds[inp.name] = (rng.standard_normal(shape) * 4).astype(dtype)
    feeds.update({k: v for k, v in _HALVES.items() if k in feeds})
    check_against_ort(model, feeds, rtol=0, atol=0)


_HALVES = {"t": np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 300, -300], np.float32)}  # ties round to even


@pytest.mark.parametrize("signature, body, opset, init", [
    ("float[8] t", "y = QuantizeLinear (t, s)", 10, "<float s = {1.0}>"),
    ("float[8] t", "y = QuantizeLinear (t, s, z)", 13, "<float s = {1.0}, int8 z = {-3}>"),
    ("float[2,3,4] x", "y = QuantizeLinear <axis=-1> (x, s, z)", 13,
     "<float[4] s = {0.5, 1.0, 0.25, 2.0}, uint8[4] z = {0, 10, 128, 255}>"),
    ("float[2,6] x", "y = QuantizeLinear <axis=1, block_size=4> (x, s, z)", 21,
     "<float[2,2] s = {0.5, 1.0, 0.25, 2.0}, int16[2,2] z = {0, -10, 300, 32767}>"),
    ("float[2,3] x", "y = QuantizeLinear <output_dtype=4> (x, s)", 21, "<float s = {0.001}>"),
    ("float16[2,3] x", "h = Cast <to=10> (s) y = QuantizeLinear (x, h)", 21, "<float s = {0.25}>"),
    ("int8[2,3,4] x", "y = DequantizeLinear <axis=1> (x, s, z)", 13,
     "<float[3] s = {0.5, 1.0, 0.25}, int8[3] z = {1, -2, 3}>"),
    ("uint16[2,5] x", "y = DequantizeLinear <axis=1, block_size=2> (x, s, z)", 21,
     "<float[2,3] s = {0.5, 1.0, 0.25, 2.0, 3.0, 0.125}, uint16[2,3] z = {0, 1, 2, 3, 4, 65535}>"),
    ("int32[2,3] x", "y = DequantizeLinear (x, s)", 13, "<float s = {0.003}>"),
    ("uint8[3,8] a, int8[8,4] b", "y = QLinearMatMul (a, sa, za, b, sb, zb, sy, zy)", 10,
     "<float sa = {0.02}, uint8 za = {120}, float[4] sb = {0.01, 0.02, 0.005, 0.03}, int8[4] zb = {0, 1, -1, 2},"
     " float sy = {0.05}, uint8 zy = {128}>"),
    ("uint8[1,3,6,6] x, int8[4,3,3,3] w",
     "y = QLinearConv <pads=[1,1,1,1], strides=[2,1]> (x, sx, zx, w, sw, zw, sy, zy, b)", 10,
     "<float sx = {0.02}, uint8 zx = {100}, float[4] sw = {0.01, 0.02, 0.005, 0.03}, int8[4] zw = {0, 0, 0, 0},"
     " float sy = {0.3}, uint8 zy = {7}, int32[4] b = {100, -200, 0, 3000}>"),
    ("uint8[2,3,8] a, int8[8,4] b", "y = MatMulInteger (a, b, za, zb)", 10, "<uint8 za = {3}, int8 zb = {-2}>"),
    ("int8[1,4,7,7] x, int8[6,2,3,3] w", "y = ConvInteger <group=2, pads=[1,0,1,1]> (x, w, zx)", 10, "<int8 zx = {5}>"),
])
def test_import_forms_match_onnxruntime(signature, body, opset, init):
    _check(signature, body, opset, init)


def test_dynamic_quantize_linear_outputs():
    model = parse('<ir_version: 10, opset_import: ["" : 11]> g (float[2,5] x) => (y, s, z) '
                  '{ y, s, z = DynamicQuantizeLinear (x) }')
    check_against_ort(model, {"x": (np.random.default_rng(6).standard_normal((2, 5)) + 1).astype(np.float32)},
                      rtol=0, atol=0)


def test_per_row_and_per_channel_zero_points():
    """Forms onnxruntime's CPU kernels refuse: MatMulInteger with a zero point
    per row of A, ConvInteger with one per output channel of W."""
    rng = np.random.default_rng(7)
    model = parse('<ir_version: 10, opset_import: ["" : 10]> g (uint8[3,8] a, uint8[8,4] b, uint8[1,2,5,5] x, '
                  'int8[3,2,3,3] w) => (y, c) <uint8[3] za = {1, 2, 3}, int8[3] zw = {-1, 0, 2}> '
                  '{ y = MatMulInteger (a, b, za) c = ConvInteger (x, w, , zw) }')
    a, b = rng.integers(0, 255, (3, 8), dtype=np.uint8), rng.integers(0, 255, (8, 4), dtype=np.uint8)
    x, w = rng.integers(0, 255, (1, 2, 5, 5), dtype=np.uint8), rng.integers(-128, 127, (3, 2, 3, 3), dtype=np.int8)
    out = interpret(import_onnx(model), {"a": a, "b": b, "x": x, "w": w})
    expected = (a.astype(np.int32) - [[1], [2], [3]]) @ b.astype(np.int32)
    np.testing.assert_array_equal(out["y"], expected)
    from onnx.reference import ReferenceEvaluator

    shifted = (w.astype(np.int32) - np.array([-1, 0, 2]).reshape(3, 1, 1, 1)).astype(np.float32)
    conv = ReferenceEvaluator(parse('<ir_version: 10, opset_import: ["" : 10]> g (float[1,2,5,5] x, '
                                    'float[3,2,3,3] w) => (c) { c = Conv (x, w) }'))
    np.testing.assert_array_equal(out["c"], conv.run(None, {"x": x.astype(np.float32), "w": shifted})[0])


# --- refused -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    '<ir_version: 10, opset_import: ["" : 21]> g (float[4] x) => (int4[4] y) <float s = {0.5}> '
    '{ y = QuantizeLinear <output_dtype=22> (x, s) }',
    '<ir_version: 10, opset_import: ["" : 21]> g (float[4] x) => (int4[4] y) <float s = {0.5}, int4 z = {1}> '
    '{ y = QuantizeLinear (x, s, z) }',
])
def test_int4_quantize_is_refused_naming_the_type(text):
    with pytest.raises(OnnxImportError, match="INT4"):
        braze.compile(parse(text))


# --- braze quantize: onnxruntime's static quantizer behind a command ------------------------------
def test_braze_quantize_writes_a_qdq_model_braze_runs(tmp_path, capsys):
    from braze.cli import main

    onnx.save(small_cnn(), tmp_path / "float.onnx")
    np.savez(tmp_path / "calib.npz", x=np.concatenate(random_images((1, 3, 8, 8), 4, seed=3)))  # 4 samples of batch 1
    out = tmp_path / "int8.onnx"
    assert main(["quantize", str(tmp_path / "float.onnx"), "--calibration", str(tmp_path / "calib.npz"),
                 "-o", str(out)]) == 0
    assert "per-channel" in capsys.readouterr().out
    model = onnx.load(out)
    assert {"QuantizeLinear", "DequantizeLinear"} <= {n.op_type for n in model.graph.node}
    x = random_images((1, 3, 8, 8), 1, seed=4)[0]
    ref = run_ort(model, {"x": x})["y"]
    got = braze.compile(str(out), level=2).run({"x": x})["y"]
    assert np.abs(got - ref).max() <= _output_step(model) + 1e-6


def test_braze_quantize_names_missing_calibration_inputs(tmp_path, capsys):
    from braze.cli import main

    onnx.save(small_cnn(), tmp_path / "float.onnx")
    np.savez(tmp_path / "calib.npz", image=np.zeros((2, 3, 8, 8), np.float32))
    assert main(["quantize", str(tmp_path / "float.onnx"), "--calibration", str(tmp_path / "calib.npz"),
                 "-o", str(tmp_path / "int8.onnx")]) == 1
    assert "lacks graph inputs ['x']" in capsys.readouterr().err
    assert not (tmp_path / "int8.onnx").exists()
