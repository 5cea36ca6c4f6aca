"""The artifact: save/load round trip, atomic writes, typed errors."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from braze.compiler import compile as braze_compile
from braze.errors import ArtifactError, InputError
from braze.runtime import load
from onnx_check import parse

MODEL = parse('<ir_version: 8, opset_import: ["" : 17]> g (float[2,3] x, float[3] b) => (float[2,3] y) '
              '{ t = Add(x, b)\n y = Relu(t) }')
X = np.arange(6, dtype="float32").reshape(2, 3) - 2.5
B = np.array([1, -1, 0.5], dtype="float32")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("art") / "m.braze"
    braze_compile(MODEL, level=0).save(str(path))
    return path


def test_round_trip(saved):
    art = load(saved)
    np.testing.assert_array_equal(art.run({"x": X, "b": B})["y"], np.maximum(X + B, 0))
    assert sorted(os.listdir(saved)) == ["lib.so", "manifest.json", "model.mlir"]
    m = json.loads((saved / "manifest.json").read_text())
    assert m["inputs"] == [{"name": "x", "shape": [2, 3], "dtype": "float32"},
                           {"name": "b", "shape": [3], "dtype": "float32"}]
    assert m["outputs"] == [{"name": "y", "shape": [2, 3], "dtype": "float32"}]
    assert {"braze", "tvm", "onnx", "target", "pipeline", "kernels", "level"} <= set(m)
    assert [k["ops"] for k in m["kernels"]] == [["math.add"], ["math.relu"]]
    assert (saved / "model.mlir").read_text().startswith("func.func @main(")


@pytest.mark.parametrize("inputs, message", [
    ({"x": X}, "missing input(s) b"),
    ({"x": X, "b": B, "z": B}, "unknown input(s) z"),
    ({"x": X[:1], "b": B}, "input 'x' has shape [1, 3], expected [2, 3]"),
    ({"x": X.astype("float64"), "b": B}, "input 'x' has dtype float64, expected float32"),
])
def test_wrong_inputs_are_typed_errors(saved, inputs, message):
    with pytest.raises(InputError) as info:
        load(saved).run(inputs)
    assert message in str(info.value)


def _copy(saved, tmp_path):
    import shutil

    dst = tmp_path / "copy.braze"
    shutil.copytree(saved, dst)
    return dst


def test_corrupt_library_is_a_typed_error(saved, tmp_path):
    art = _copy(saved, tmp_path)
    data = bytearray((art / "lib.so").read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte: caught by the digest before TVM maps the file
    (art / "lib.so").write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="corrupt"):
        load(art)
    m = json.loads((art / "manifest.json").read_text())
    del m["lib_sha256"]  # an artifact without a digest: TVM's loader must still fail cleanly on garbage
    (art / "manifest.json").write_text(json.dumps(m))
    (art / "lib.so").write_bytes(b"\x7fELF garbage" * 10)
    with pytest.raises(ArtifactError, match="corrupt"):
        load(art).run({"x": X, "b": B})


@pytest.mark.parametrize("edit, message", [
    (lambda m: m.update(tvm="0.1.0"), "built with tvm 0.1.0"),
    (lambda m: m.update(braze="9.9"), "built with braze 9.9"),
    (lambda m: m["requires"]["features"].append("avx9000"), "built for target .* lacks avx9000"),
    (lambda m: m.update(format=99), "not a braze artifact"),
])
def test_mismatched_manifest_is_a_typed_error(saved, tmp_path, edit, message):
    art = _copy(saved, tmp_path)
    m = json.loads((art / "manifest.json").read_text())
    edit(m)
    (art / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ArtifactError, match=message):
        load(art)


def test_missing_and_broken_artifacts(saved, tmp_path):
    with pytest.raises(ArtifactError, match="no such artifact"):
        load(tmp_path / "nope.braze")
    art = _copy(saved, tmp_path)
    (art / "manifest.json").write_text("{not json")
    with pytest.raises(ArtifactError, match="corrupt manifest"):
        load(art)
    os.remove(art / "lib.so")
    with pytest.raises(ArtifactError):
        load(art)


def test_interrupted_save_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("BRAZE_CACHE_DIR")
    art = braze_compile(MODEL, level=0)

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(art._executable, "export_library", boom)
    with pytest.raises(KeyboardInterrupt):
        art.save(str(tmp_path / "x.braze"))
    assert os.listdir(tmp_path) == []


def test_cli_run_and_errors(saved, tmp_path):
    np.savez(tmp_path / "in.npz", x=X, b=B)
    r = subprocess.run([sys.executable, "-m", "braze.cli", "run", str(saved), "--inputs", str(tmp_path / "in.npz"),
                        "-o", str(tmp_path / "out.npz")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out.npz")["y"], np.maximum(X + B, 0))
    np.savez(tmp_path / "bad.npz", x=X)
    r = subprocess.run([sys.executable, "-m", "braze.cli", "run", str(saved), "--inputs", str(tmp_path / "bad.npz")],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "missing input(s) b" in r.stderr and "Traceback" not in r.stderr
