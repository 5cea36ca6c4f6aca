"""The 8-bit integer blocked conv rules (``vnni_conv``, ``pmaddwd_conv``;
schedules/vnni_conv.py) and the layout pass's blocking of quantized convs.

A small ResNet-style CNN (3x3 and 1x1 convs, a strided one, a residual
add) is quantized by onnxruntime (static, QDQ, per-channel int8 weights,
uint8 activations); fold-quant makes its convs integer products, the
layout pass blocks them, and the rule takes them. Each target's rule and
instruction is checked in its build (any x86 host builds them); the
numbers, against onnxruntime, where this host runs the target's code."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from braze.compiler import compile_module
from braze.passes import PassManager
from braze.frontend import import_onnx
from braze.pipeline import pipeline
from braze.targets import get_target
from braze.targets.isa import missing, requirements
from onnx_check import run_ort

RNG = np.random.default_rng(5)


def _float_cnn(channels: int) -> onnx.ModelProto:
    """conv 3x3 (``channels`` -> 32, pad 1) -> relu -> conv 3x3 stride 2 ->
    relu -> conv 1x1 -> + the relu before it -> relu -> global average pool
    -> gemm to 10."""
    def w(name, *shape, scale=0.15):
        return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [w("w1", 32, channels, 3, 3), w("b1", 32, scale=0.1), w("w2", 32, 32, 3, 3, scale=0.1),
             w("b2", 32, scale=0.1), w("w3", 32, 32, 1, 1, scale=0.2), w("fc", 10, 32), w("fcb", 10)]
    node = helper.make_node
    nodes = [node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             node("Relu", ["c1"], ["r1"], name="relu1"),
             node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2], name="conv2"),
             node("Relu", ["c2"], ["r2"], name="relu2"),
             node("Conv", ["r2", "w3"], ["c3"], name="conv3"),
             node("Add", ["c3", "r2"], ["a"], name="add"),
             node("Relu", ["a"], ["r3"], name="relu3"),
             node("GlobalAveragePool", ["r3"], ["p"], name="pool"),
             node("Flatten", ["p"], ["f"], name="flat"),
             node("Gemm", ["f", "fc", "fcb"], ["y"], transB=1, name="fc")]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, _shape(channels))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _shape(channels: int) -> list[int]:
    return [1, channels, 12, 12]


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    """``channels`` -> the CNN quantized by onnxruntime (QDQ), as a model."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self, channels):
            self.feeds = iter([{"x": RNG.standard_normal(_shape(channels)).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.feeds, None)

    folder, models = tmp_path_factory.mktemp("vnni_conv"), {}

    def get(channels: int) -> onnx.ModelProto:
        if channels not in models:
            source, out = folder / f"cnn{channels}.onnx", folder / f"cnn{channels}.qdq.onnx"
            onnx.save(_float_cnn(channels), source)
            quantize_static(str(source), str(out), Reader(channels), quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
            models[channels] = onnx.load(out)
        return models[channels]

    return get


def _output_scale(model: onnx.ModelProto) -> float:
    """The scale of the DequantizeLinear that gives the model's output."""
    last = {o: n for n in model.graph.node for o in n.output}[model.graph.output[0].name]
    assert last.op_type == "DequantizeLinear"
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    return float(inits[last.input[1]].reshape(-1)[0])


def _with(name: str, *features: str):
    """A named target with LLVM ``features`` added (built on any x86 host)."""
    return dataclasses.replace(get_target(name), mattr=tuple(f"+{f}" for f in features))


def _runs_here(target) -> bool:
    return missing(requirements(target)) is None


def _asm(art) -> str:
    return "".join(m.inspect_source("asm") for m in art._executable.mod.imports if m.kind == "llvm")


def _check(model: onnx.ModelProto, target, rule: str) -> None:
    """Build ``model`` for ``target``: every integer conv in the blocked
    layout, each kernel of one taking ``rule`` (VPDPBUSD, or VPMADDWD and
    never the saturating VPMADDUBSW); where this host runs the code, the
    output within one quantization step of onnxruntime's. The convs are
    folded first by hand: the pipeline leaves them in float on a target
    without VNNI, where ``pmaddwd_conv`` is slower than the float conv."""
    module = import_onnx(model)
    PassManager.parse("fold-quant").run(module)
    art = compile_module(module, target=target, level=2)
    convs = [k for k in art.kernels if any(op.startswith("nn.conv") for op in k["ops"])]
    assert len(convs) == 3 and all("nn.conv_blocked" in k["ops"] for k in convs), art.kernels
    assert [k["schedule"] for k in convs] == [rule] * 3
    asm = _asm(art)
    assert ("vpdpbusd" in asm) == (rule == "vnni_conv") and "vpmaddubsw" not in asm
    if rule == "pmaddwd_conv":
        assert "vpmaddwd" in asm
    if not _runs_here(target):
        return
    for seed in range(3):
        x = np.random.default_rng(seed).standard_normal(_shape(model.graph.input[0].type.tensor_type.shape.dim[1]
                                                                .dim_value)).astype(np.float32)
        got, want = art.run({"x": x})["y"], run_ort(model, {"x": x})["y"]
        assert np.abs(got - want).max() <= _output_scale(model) * 1.01


@pytest.mark.parametrize("channels", [16, 3], ids=["16-channels", "rgb"])
def test_quantized_cnn_on_the_host(quantized, channels):
    """On the host (skipped without AVX512-VNNI): the three integer convs
    take ``vnni_conv``, an RGB input (3 channels) read in a block of four,
    its fourth channel zeros; the convs pad with the input's zero point."""
    from braze.codegen.schedules.vnni import has_vnni

    host = get_target("cpu")
    if "avx512vnni" not in requirements(host)["features"] or not has_vnni(host):
        pytest.skip("this host has no AVX512-VNNI")
    _check(quantized(channels), host, "vnni_conv")


@pytest.mark.parametrize("target,rule", [
    (_with("cpu-avx512", "avx512vnni"), "vnni_conv"),  # Cascade Lake and later Xeons, Zen 4
    (_with("cpu-avx2", "avxvnni"), "vnni_conv"),  # Alder Lake: VEX-encoded VPDPBUSD on ymm
    ("cpu-avx512", "pmaddwd_conv"),  # Skylake-SP: AVX-512BW, no VNNI
    ("cpu-avx2", "pmaddwd_conv"),
], ids=["avx512vnni", "avxvnni", "avx512bw", "avx2"])
def test_quantized_cnn_takes_the_targets_instruction(quantized, target, rule):
    target = get_target(target) if isinstance(target, str) else target
    _check(quantized(16), target, rule)


def test_the_layout_pass_blocks_integer_convs(quantized):
    """After the pipeline (no fusion), every quantized conv is blocked, its
    uint8 input in blocks of a multiple of four channels (an RGB input:
    one block of four), its int32 output in the target's block; the first
    conv keeps its ``pad_value`` (the input's zero point)."""
    for channels in (16, 3):
        module = import_onnx(quantized(channels))
        manager = pipeline(2, target=_with("cpu-avx512", "avx512vnni"))
        manager.passes[:] = [p for p in manager.passes if p.name != "fuse"]
        manager.run(module)
        convs = [op for op in module.main.body.ops if op.name.startswith("nn.conv")]
        assert [op.name for op in convs] == ["nn.conv_blocked"] * 3
        for op in convs:
            x, y = op.operands[0].type, op.results[0].type
            assert x.dtype == "ui8" and x.rank == 5 and x.shape[4] % 4 == 0 and (y.dtype, y.shape[4]) == ("i32", 16)
        assert convs[0].operands[0].type.shape[4] == (4 if channels == 3 else 16)
        assert convs[0].attributes.get("pad_value", 0) != 0
