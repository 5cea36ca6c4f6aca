"""Precision modes (docs/usage.md, "Precision modes"): the precision pass and
ATC's lists and files, fusion with casts, 16-bit kernels on the CPU, CUDA
and the Ascend-like emulator, and verify's tools to find lost accuracy."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import braze
from braze.codegen.schedules.amx import has_amx
from braze.codegen.schedules.dpbf16 import has_dpbf16
from braze.compiler import fuse_only
from braze.pipeline import precision_options
from braze.errors import PrecisionError
from braze.ir import print_module
from braze.passes import PassManager
from braze.passes.precision import TOLERANCES
from braze.targets import get_target

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/
DATA = os.path.join(HERE, "..", "braze", "data")
BERT = os.path.join(DATA, "bert-tiny.onnx")
MOBILENET = os.path.join(DATA, "mobilenetv2-tiny.onnx")
OVERFLOW = os.path.join(HERE, "precision", "overflow.onnx")
MIXED = ("allow_mix_precision", "allow_mix_precision_bf16")


def _braze(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "braze.cli", *args], capture_output=True, text=True, cwd=cwd)


def _fused(model, mode, level=2, **kw):
    return fuse_only(model, level, None, None, "cpu", precision_options(mode, kw.get("mixlist"), kw.get("keep")))


def _dtypes(module, op_name):
    return {r.type.dtype for op in module.walk() if op.name == op_name for r in op.results}


def _inputs(path, seed=0):
    from braze.measure import random_inputs

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    specs = [{"name": i.name, "shape": [int(d) for d in i.shape],
              "dtype": {"tensor(float)": "float32", "tensor(int64)": "int64"}[i.type]} for i in sess.get_inputs()]
    return random_inputs(specs, seed), sess


def _error(artifact, path, seed=0):
    inputs, sess = _inputs(path, seed)
    ours = artifact.run(inputs)
    ref = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, inputs)))
    return max(float(np.abs(ours[k] - v).max() / max(1.0, np.abs(v).max())) for k, v in ref.items())


# --- the pass and its lists ----------------------------------------------------------------------

@pytest.mark.parametrize("mode,low", [("allow_mix_precision", "f16"), ("allow_mix_precision_bf16", "bf16")])
def test_mixed_mode_puts_white_ops_in_16_bits_and_black_ops_in_float32(mode, low):
    module, report = _fused(BERT, mode)
    assert _dtypes(module, "nn.matmul") == {low}
    assert _dtypes(module, "nn.softmax") == _dtypes(module, "nn.layer_norm") == _dtypes(module, "math.erf") == {"f32"}
    assert all(v.type.dtype == "f32" for v in module.main.outputs)  # outputs keep their dtype
    assert low in _dtypes(module, "tensor.gather")  # the embedding tables, stored as weights are
    unfused, _ = _fused(BERT, mode, level=0)
    weights = {v.type.dtype for op in unfused.walk() if op.name == "nn.matmul" for v in op.operands
               if v.owner is not None and v.owner.name == "const"}
    assert weights == {low}  # converted at compile time
    assert {g.dtype for g in report.groups} == {low, "f32"}


def test_force_fp16_puts_everything_in_16_bits():
    module, _ = _fused(BERT, "force_fp16")
    assert _dtypes(module, "nn.softmax") == _dtypes(module, "nn.layer_norm") == {"f16"}


def test_origin_modes_change_nothing():
    plain, _ = _fused(BERT, None)
    for mode in ("must_keep_origin_dtype", "force_fp32", "origin"):
        module, _ = _fused(BERT, mode)
        assert print_module(module) == print_module(plain)


def test_casts_add_no_kernels_at_any_level():
    for level in (1, 2, 3):
        plain = fuse_only(BERT, level)[1].kernels
        for mode in MIXED + ("force_fp16",):
            got = fuse_only(BERT, level, None, None, "cpu", precision_options(mode))[1]
            assert got.kernels <= plain, (level, mode)


def test_pipeline_text_round_trips():
    pm = PassManager.parse("canonicalize,precision{mode=allow_mix_precision keep=node_layer_norm,OpType::Softmax}")
    assert str(pm) == "canonicalize,precision{mode=allow_mix_precision keep=node_layer_norm,OpType::Softmax}"


def test_modify_mixlist_moves_layernorm_to_the_white_list(tmp_path):
    path = tmp_path / "mixlist.json"
    path.write_text(json.dumps({"white-list": {"to-add": ["LayerNormalization"]},
                                "black-list": {"to-remove": ["Softmax"]}}))
    module, _ = _fused(BERT, "allow_mix_precision", mixlist=str(path))
    assert _dtypes(module, "nn.layer_norm") == {"f16"}
    plain, _ = _fused(BERT, "allow_mix_precision")
    assert _dtypes(plain, "nn.layer_norm") == {"f32"}
    # ... and the CLI reads the same file
    r = _braze("explain", BERT, "--precision-mode", "allow_mix_precision", "--modify-mixlist", str(path), "--json")
    assert r.returncode == 0, r.stderr
    ln = [g for g in json.loads(r.stdout)["groups"] if any(n.startswith("node_layer_norm") for n in g["nodes"])]
    assert ln and all(g["dtype"] == "f16" for g in ln if "nn.layer_norm" in g["ops"] and "nn.matmul" not in g["ops"])


def test_keep_dtype_file_keeps_a_node_or_an_op_type(tmp_path):
    keep = tmp_path / "keep.txt"
    keep.write_text("# ATC's format\nnode_MatMul_45\n")
    module, _ = _fused(BERT, "allow_mix_precision", keep=str(keep))
    by_node = {op.loc.name: op.result.type.dtype for op in module.walk() if op.name == "nn.matmul"}
    assert by_node["node_MatMul_45"] == "f32" and by_node["node_MatMul_53"] == "f16"
    keep.write_text("OpType::MatMul\n")
    module, _ = _fused(BERT, "allow_mix_precision", keep=str(keep))
    assert {op.result.type.dtype for op in module.walk() if op.name == "nn.matmul" and op.loc.op_type == "MatMul"} \
        == {"f32"}


def test_precision_errors_are_typed_and_say_what_to_do(tmp_path):
    with pytest.raises(PrecisionError, match="unknown precision mode 'fp8'.*allow_mix_precision"):
        precision_options("fp8")
    with pytest.raises(PrecisionError, match="mixlist file 'nope.json' does not exist"):
        precision_options("allow_mix_precision", "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"grey-list": {}}')
    with pytest.raises(PrecisionError, match="keys must be among white-list, black-list, gray-list"):
        precision_options("allow_mix_precision", str(bad))
    keep = tmp_path / "keep.txt"
    keep.write_text("no_such_node\n")
    with pytest.raises(PrecisionError, match="names no node called 'no_such_node'"):
        _fused(BERT, "allow_mix_precision", keep=str(keep))
    r = _braze("compile", BERT, "-o", str(tmp_path / "m.braze"), "--precision-mode", "fp8", "-q")
    assert r.returncode == 1 and r.stderr.startswith("error: unknown precision mode") and "Traceback" not in r.stderr
    assert not (tmp_path / "m.braze").exists()


# --- 16-bit builds -------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MIXED)
def test_mixed_builds_match_float32_onnxruntime_with_the_cpu_rules(mode):
    plain = braze.compile(BERT)
    artifact = braze.compile(BERT, precision_mode=mode)
    low = artifact.manifest["precision"]["dtype"]
    precision = artifact.manifest["precision"]
    assert precision["mode"] == mode and "float32 arithmetic" in precision["math"]
    assert _error(artifact, BERT) <= TOLERANCES[low]
    assert len(artifact.kernels) <= len(plain.kernels)
    # the schedule rules take 16-bit kernels (no fallback to the generic schedule); on a CPU with
    # AMX (or else AVX512-BF16), bfloat16 matmuls by a weight take the amx (dpbf16) rule where
    # float32 ones take gemm
    host = get_target("cpu")
    native = None if low != "bf16" else "amx" if has_amx(host) else "dpbf16" if has_dpbf16(host) else None
    assert ("AMX" in precision["math"]) == (native == "amx")
    assert ("VDPBF16PS" in precision["math"]) == (native == "dpbf16")
    pairs = list(zip([k["schedule"] for k in artifact.kernels], [k["schedule"] for k in plain.kernels]))
    assert len(pairs) == len(plain.kernels) and all(a == b or (a, b) == (native, "gemm") for a, b in pairs)
    assert any(a == native for a, _ in pairs) == (native is not None)
    assert {k["dtype"] for k in artifact.kernels} == {low, "f32"}


def _weights_model(path):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((512, 1024)).astype(np.float32) / 16  # 2 MiB of float32 weights
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "w",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 512])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 1024])],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def test_16_bit_weights_halve_the_weight_bytes(tmp_path):
    path = str(tmp_path / "w.onnx")
    _weights_model(path)
    sizes = {}
    for mode in (None, "allow_mix_precision", "allow_mix_precision_bf16"):
        artifact = braze.compile(path, precision_mode=mode)
        assert _error(artifact, path) <= TOLERANCES[artifact.manifest["precision"]["dtype"]]
        out = artifact.save(str(tmp_path / f"{mode}.braze"))
        sizes[mode] = os.path.getsize(os.path.join(out, "lib.so"))
    for mode in MIXED:  # 2 MiB less 1 MiB, plus the same code
        assert sizes[None] - sizes[mode] > 0.9 * 2 ** 20, sizes


def test_braze_run_runs_a_16_bit_artifact(braze_run, tmp_path):
    artifact = braze.compile(BERT, precision_mode="allow_mix_precision")
    path = artifact.save(str(tmp_path / "bert.braze"))
    inputs, sess = _inputs(BERT)
    args = []
    for name, value in inputs.items():
        np.save(tmp_path / f"{name}.npy", value)
        args += ["--input", f"{name}={tmp_path / f'{name}.npy'}"]
    r = subprocess.run([str(braze_run), path, *args, "--output-dir", str(tmp_path / "out")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    name = sess.get_outputs()[0].name
    np.testing.assert_allclose(np.load(tmp_path / "out" / f"{name}.npy"), artifact.run(inputs)[name], rtol=0, atol=0)


def test_cuda_builds_in_16_bits():
    from braze.codegen.gpu import nvcc_path

    if nvcc_path() is None:
        pytest.skip("CUDA's compiler (nvcc) is not installed: CUDA code generation cannot be checked")
    for mode in ("allow_mix_precision_bf16",):  # bf16, the less common one (one build: nvcc is slow)
        artifact = braze.compile(BERT, target="cuda-sm90", precision_mode=mode)
        low = artifact.manifest["precision"]["dtype"]
        assert artifact.manifest["precision"]["math"].startswith(f"native {low}")
        assert f"x{low}>" in artifact.ir_text and {k["dtype"] for k in artifact.kernels} == {low, "f32"}
        assert all(k["schedule"].startswith("dlight.") or k["schedule"] == "bind_spatial" for k in artifact.kernels)


def test_ascend_like_targets_default_to_atc_force_fp16_and_emulate_it():
    artifact = braze.compile(BERT, target="ascend310p-like")
    assert artifact.manifest["precision"]["mode"] == "force_fp16"
    error = _error(artifact, BERT)
    assert 1e-5 < error <= TOLERANCES["f16"]  # 16-bit numerics, not float32's
    exact = braze.compile(BERT, target="ascend310p-like", precision_mode="must_keep_origin_dtype")
    assert exact.manifest["precision"]["mode"] == "origin" and _error(exact, BERT) < 1e-4


# --- finding lost accuracy -----------------------------------------------------------------------

def test_per_group_names_the_worst_group():
    r = _braze("verify", OVERFLOW, "--precision-mode", "allow_mix_precision", "--per-group", "--json", "-q")
    assert r.returncode == 3  # the 16-bit build overflows (a failed check, not an error)
    data = json.loads(r.stdout)
    worst = data["groups"][0]
    assert worst["nodes"][0] == "scale_up" and not np.isfinite(worst["max_rel"])
    assert all(np.isfinite(g["max_rel"]) for g in data["groups"] if "mm_out" in g["nodes"])


def test_suggest_keep_finds_the_overflowing_node_and_the_file_fixes_it(tmp_path):
    keep = tmp_path / "keep.txt"
    r = _braze("verify", OVERFLOW, "--precision-mode", "allow_mix_precision", "--suggest-keep", str(keep), "-q")
    assert "mm_big" in r.stdout and keep.read_text() == "mm_big\n", r.stdout + r.stderr
    r = _braze("verify", OVERFLOW, "--precision-mode", "allow_mix_precision", "--keep-dtype", str(keep), "-q")
    assert r.returncode == 0 and "ok: tolerance 0.05" in r.stdout, r.stdout + r.stderr


def test_samples_report_top1_agreement():
    r = _braze("verify", MOBILENET, "--precision-mode", "allow_mix_precision", "--samples", "2", "--json", "-q")
    assert r.returncode in (0, 2), r.stderr
    agreement = json.loads(r.stdout)["agreement"]
    assert agreement["samples"] == 2 and 0.0 <= agreement["top1"]["logits"] <= 1.0


def test_random_inputs_can_be_drawn_in_a_models_input_range():
    from braze.errors import InputError
    from braze.measure import random_inputs

    specs = [{"name": "x", "shape": [4096], "dtype": "float32"}]
    x = random_inputs(specs, 3, "uniform:0,1")["x"]
    assert 0.0 <= x.min() and x.max() < 1.0 and abs(float(x.mean()) - 0.5) < 0.05
    assert random_inputs(specs, 3)["x"].min() < 0.0  # N(0, 1) by default
    for bad in ("uniform:1,0", "uniform", "gauss", "uniform:a,b"):
        with pytest.raises(InputError, match="uniform:LO,HI"):
            random_inputs(specs, 0, bad)
    r = _braze("verify", MOBILENET, "--random", "uniform:2,1", "-q")
    assert r.returncode != 0 and "uniform:LO,HI" in r.stderr and "Traceback" not in r.stderr
    r = _braze("verify", MOBILENET, "--random", "uniform:0,1", "--samples", "2", "--json", "-q")
    assert r.returncode == 0 and json.loads(r.stdout)["agreement"]["samples"] == 2, r.stderr
