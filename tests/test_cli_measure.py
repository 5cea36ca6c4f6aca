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
    r = braze("bench", model_path, "--json", "--repeat", "5", "--threads", "1", "-q")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert set(data) == {"braze_ms", "onnxruntime_ms", "ratio", "threads", "repeat"}
    assert data["threads"] == 1 and data["braze_ms"] > 0 and data["onnxruntime_ms"] > 0
    assert abs(data["ratio"] - data["braze_ms"] / data["onnxruntime_ms"]) < 1e-9


def test_compile_then_profile(model_path, tmp_path):
    out = tmp_path / "m.braze"
    r = braze("compile", model_path, "-o", out, "--level", "0")
    assert r.returncode == 0, r.stderr
    assert "2 kernels" in r.stdout
    r = braze("profile", out, "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [row["ops"] for row in rows] == [["math.add"], ["math.relu"]]
    assert all(row["ms"] >= 0 for row in rows)
