"""compile / verify / bench / profile from the command line, with stable --json."""

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest

from onnx_check import parse

MODEL = parse('<ir_version: 8, opset_import: ["" : 17]> g (float[2,3] x, float[3] b) => (float[2,3] y) '
              '{ t = Add(x, b)\n y = Relu(t) }')


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("m") / "addrelu.onnx"
    onnx.save(MODEL, path)
    return path


def braze(*args):
    return subprocess.run([sys.executable, "-m", "braze.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600)


def test_verify_json(model_path):
    r = braze("verify", model_path, "--json", "-q")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["ok"] is True
    assert [o["name"] for o in data["outputs"]] == ["y"]
    assert set(data["outputs"][0]) == {"name", "max_abs", "max_rel"}
    assert data["outputs"][0]["max_abs"] <= 1e-6


def test_verify_table_and_inputs(model_path, tmp_path):
    np.savez(tmp_path / "in.npz", x=np.ones((2, 3), "float32"), b=np.ones(3, "float32"))
    r = braze("verify", model_path, "--inputs", tmp_path / "in.npz", "-q")
    assert r.returncode == 0, r.stderr
    assert "max abs" in r.stdout and "ok:" in r.stdout


def test_bench_json(model_path):
    r = braze("bench", model_path, "--json", "--repeat", "6", "--phases", "3", "--threads", "1", "-q")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert set(data) == {"braze_ms", "onnxruntime_ms", "ratio", "ratio_min", "ratio_max", "threads", "repeat",
                         "braze", "onnxruntime", "method", "host", "spin"}
    assert data["threads"] == 1 and data["braze_ms"] > 0 and data["onnxruntime_ms"] > 0
    # the ratio is the median of the per-phase ratios (3 phases: 3 ratios)
    ours, theirs = data["braze"]["phase_medians_ms"], data["onnxruntime"]["phase_medians_ms"]
    per_phase = sorted(b / o for b, o in zip(ours, theirs))
    assert abs(data["ratio"] - per_phase[1]) < 1e-9
    assert (data["ratio_min"], data["ratio_max"]) == (per_phase[0], per_phase[2])
    for side in ("braze", "onnxruntime"):
        e = data[side]
        assert len(e["phase_medians_ms"]) == 3 and e["runs"] >= 6  # at least 2 per phase, more if they are short
        assert e["min_ms"] <= e["q1_ms"] <= e["median_ms"] <= e["q3_ms"] <= e["max_ms"]
        assert e["cpu_after_run_s"] >= 0
    assert data["braze"]["median_ms"] == data["braze_ms"]
    assert data["method"]["phases"] == 3 and data["method"]["idle_timeouts"] == 0
    assert {"cpu", "llvm_cpu", "isa", "cores"} <= set(data["host"])
    assert data["spin"] == 1000  # braze's default, "short"


def test_bench_table_names_the_machine(model_path):
    r = braze("bench", model_path, "--repeat", "4", "--phases", "2", "--threads", "1", "-q", "--spin", "long")
    assert r.returncode == 0, r.stderr
    from braze.targets.detect import isa

    assert "each engine timed alone on" in r.stdout and f", {isa()})" in r.stdout
    assert "ratio braze/onnxruntime" in r.stdout and "control" not in r.stdout


def test_bench_bad_spin_is_an_error_before_compiling(model_path):
    r = braze("bench", model_path, "--spin", "fast")
    assert r.returncode == 1
    assert r.stderr.startswith("error: spin must be off, short, long") and "Traceback" not in r.stderr


def test_compile_then_profile(model_path, tmp_path):
    out = tmp_path / "m.braze"
    r = braze("compile", model_path, "-o", out, "--level", "0")
    assert r.returncode == 0, r.stderr
    assert "2 kernels" in r.stdout
    r = braze("profile", out, "--json", "--trace", tmp_path / "trace.json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    rows = data["kernels"]
    assert [row["ops"] for row in rows] == [["math.add"], ["math.relu"]]
    assert all(row["ms"] >= 0 for row in rows)
    assert data["end_to_end_ms"] > 0 and data["runs"] >= 10
    trace = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    assert [e["name"] for e in trace] == [row["kernel"] for row in rows]
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in trace) and trace[1]["ts"] >= trace[0]["dur"] - 1e-3


# --- profile --onnx: onnxruntime's per-node times next to each kernel -----------------------------

def test_attribute_nodes_by_name_and_by_output():
    from onnx import helper

    from braze.measure import attribute_nodes

    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["conv_out"], name="node_Conv_1"),
         helper.make_node("Relu", ["conv_out"], ["relu_2"], name="node_Relu_2"),
         helper.make_node("Add", ["relu_2", "x"], ["s"], name="node_Add_3"),
         helper.make_node("Sigmoid", ["s"], ["g"], name="/blk/Sigmoid"),
         helper.make_node("Mul", ["s", "g"], ["y"], name="/blk/Mul")],
        "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])])
    kernels = [{"name": "k0_conv", "nodes": ["node_Conv_1", "node_Relu_2"]},
               {"name": "k1_add", "nodes": ["node_Add_3", "/blk/Sigmoid", "/blk/Mul"]}]
    rows = [("ReorderInput", "ReorderInput", 0.25),
            ("relu_2_nchwc", "Conv", 1.0),  # onnxruntime's fused conv, named after the Relu's output
            ("node_Add_3", "Add", 0.5),
            ("node_Add_3_kernel", "Add", 0.125),  # a name with a suffix of its own
            ("/blk/Mul/QuickGeluFusion/", "QuickGelu", 0.0625)]  # onnxruntime's SiLU, named after the Mul
    per_kernel, unmatched = attribute_nodes(helper.make_model(graph), kernels, rows)
    assert per_kernel == {"k0_conv": 1.0, "k1_add": 0.6875}
    assert unmatched == [("ReorderInput", "ReorderInput", 0.25)]


@pytest.fixture(scope="module")
def named_model_path(tmp_path_factory):
    from onnx import helper

    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "b"], ["t"], name="add0"), helper.make_node("Relu", ["t"], ["y"], name="relu0")],
        "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3]),
              helper.make_tensor_value_info("b", onnx.TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])])
    path = tmp_path_factory.mktemp("named") / "addrelu_named.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_profile_against_onnxruntime(named_model_path, tmp_path):
    out = tmp_path / "m.braze"
    assert braze("compile", named_model_path, "-o", out, "--level", "0", "-q").returncode == 0
    r = braze("profile", out, "--onnx", named_model_path, "--json", "--repeat", "3")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert set(data) == {"kernels", "braze_ms", "end_to_end_ms", "runs", "onnxruntime_ms", "onnxruntime_unmatched"}
    assert [k["nodes"] for k in data["kernels"]] == [["add0"], ["relu0"]]
    assert all(k["onnxruntime_ms"] is not None and k["onnxruntime_ms"] > 0 for k in data["kernels"])
    assert data["onnxruntime_ms"] >= sum(k["onnxruntime_ms"] for k in data["kernels"]) - 1e-9
    r = braze("profile", out, "--onnx", named_model_path, "--repeat", "3")
    assert r.returncode == 0, r.stderr
    assert "ort ms" in r.stdout and "onnxruntime:" in r.stdout


def test_profile_onnx_not_a_model(tmp_path, named_model_path):
    out = tmp_path / "m.braze"
    assert braze("compile", named_model_path, "-o", out, "--level", "0", "-q").returncode == 0
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00not onnx at all")
    r = braze("profile", out, "--onnx", bad)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr and "bad.onnx" in r.stderr
