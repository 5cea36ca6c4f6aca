"""A new user's first hour (issue 41): models saved with external data
reach onnxruntime by path, controls that match nothing say so, and
--input-shape does not silently change a fixed dimension."""

import subprocess
import sys

import numpy as np
import onnx
import pytest
from models import tiny

import braze
from braze.compiler import fuse_only
from braze.errors import FusionRuleError, OnnxImportError, ReferenceRuntimeError
from braze.errors import FusionRuleWarning


def braze_cli(*args, cwd=None, env=None):
    import os

    return subprocess.run([sys.executable, "-m", "braze.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def external(tmp_path_factory):
    """mobilenetv2-tiny saved as torch saves by default: NAME.onnx beside
    NAME.onnx.data, in a folder of its own."""
    folder = tmp_path_factory.mktemp("external")
    model = onnx.load(str(tiny("mobilenetv2-tiny")))
    onnx.save(model, str(folder / "m.onnx"), save_as_external_data=True, location="m.onnx.data")
    assert (folder / "m.onnx.data").stat().st_size > (folder / "m.onnx").stat().st_size
    x = np.random.default_rng(0).standard_normal((1, 3, 96, 96)).astype(np.float32)
    np.savez(folder / "in.npz", input=x)
    return folder


def test_verify_and_profile_a_model_with_external_data_from_another_folder(external, tmp_path):
    done = braze_cli("verify", external / "m.onnx", "--inputs", external / "in.npz", "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "ok:" in done.stdout
    art = tmp_path / "m.braze"
    assert braze_cli("compile", external / "m.onnx", "-o", art, "-q", cwd=tmp_path).returncode == 0
    done = braze_cli("profile", art, "--inputs", external / "in.npz", "--onnx", external / "m.onnx", "--repeat", 2,
                     cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_onnxruntime_errors_are_typed():
    from braze.measure import run_onnxruntime

    with pytest.raises(ReferenceRuntimeError, match="onnxruntime cannot run the model on these inputs"):
        run_onnxruntime(str(tiny("mobilenetv2-tiny")), {"input": np.zeros((1, 3, 64, 64), np.float32)})


@pytest.mark.parametrize("controls, message", [
    ({"scope": "encoder.layer.*"}, "no node matches scope 'encoder.layer.*'; node names look like 'node_"),
    ({"skip_nodes": ["nonexistent"]}, "no node matches skip_nodes 'nonexistent'"),
    ({"no_fuse": ["Foo"]}, "no op matches no_fuse 'Foo'; the model's op types are 'Add'"),
])
def test_a_control_that_matches_nothing_warns_or_with_strict_fails(controls, message):
    with pytest.warns(FusionRuleWarning, match=message):
        fuse_only(str(tiny("bert-tiny")), level=2, fusion=controls)
    with pytest.raises(FusionRuleError, match="strict"):
        fuse_only(str(tiny("bert-tiny")), level=2, fusion={**controls, "strict_rules": True})


def test_controls_that_match_warn_nothing(recwarn):
    fuse_only(str(tiny("bert-tiny")), level=2, fusion={"scope": "node_*", "no_fuse": ["Gather"],
                                                       "skip_nodes": ["node_add"]})
    assert not [w for w in recwarn if issubclass(w.category, FusionRuleWarning)]


def test_strict_on_the_command_line():
    done = braze_cli("explain", tiny("bert-tiny"), "--scope", "encoder.layer.*", "--strict")
    assert done.returncode == 1
    assert done.stderr.startswith("error: no node matches scope 'encoder.layer.*'")


def test_input_shape_on_a_fixed_dimension_needs_override(tmp_path):
    model = str(tiny("mobilenetv2-tiny"))
    with pytest.raises(OnnxImportError, match="dimension 2 is fixed at 96 in the model, not 64.*--override-shape"):
        braze.compile(model, input_shapes={"input": (1, 3, 64, 64)})
    art = braze.compile(model, input_shapes={"input": (1, 3, 64, 64)}, override_shapes=True)
    assert art.manifest["inputs"][0]["shape"] == [1, 3, 64, 64]
    done = braze_cli("verify", model, "--input-shape", "input=1x3x64x64", "-q")
    assert done.returncode == 1 and "--override-shape" in done.stderr
    done = braze_cli("verify", model, "--input-shape", "input=1x3x64x64", "--override-shape", "-q")
    assert done.returncode == 1 and done.stderr.startswith("error: onnxruntime cannot run the model")


def test_exit_status_tells_usage_from_a_failed_check(tmp_path):
    assert braze_cli("verify", "--no-such-option").returncode == 2
    done = braze_cli("verify", tiny("bert-tiny"), "--tolerance", "1e-30", "-q")
    assert done.returncode == 3, done.stderr
    assert braze_cli("verify", tmp_path / "missing.onnx").returncode == 1


def test_progress_counts_the_kernels_and_from_process_start(tmp_path):
    done = braze_cli("compile", tiny("bert-tiny"), "-o", tmp_path / "a.braze", "--level", "1",
                     env={"BRAZE_CACHE_DIR": str(tmp_path / "cache")})  # built, not found in the tests' cache
    assert done.returncode == 0, done.stderr
    assert "kernels" in done.stderr and "built" in done.stderr  # not a terminal: a line every tenth
    import re

    seconds = float(re.search(r"compiled in ([0-9.]+)s", done.stdout).group(1))
    import json

    assert seconds > json.loads((tmp_path / "a.braze" / "manifest.json").read_text())["compile_seconds"]


def test_the_python_api_logs_and_lists_itself(caplog):
    import logging

    with caplog.at_level(logging.INFO, logger="braze"):
        braze.compile(str(tiny("bert-tiny")), level=1)
    assert any(r.name == "braze" and ("building kernels" in r.message or "cached" in r.message)
               for r in caplog.records)
    assert {"compile", "load", "InferenceSession", "Artifact"} <= set(dir(braze))
    for name in ("compile", "InferenceSession", "load"):
        assert getattr(braze, name).__doc__
    session = braze.InferenceSession
    for method in ("__init__", "get_inputs", "get_outputs", "get_providers", "run"):
        assert getattr(session, method).__doc__, method
    assert "Returns" in braze.compile.__doc__ and "Raises" in braze.compile.__doc__
    assert braze.Artifact.run.__doc__


def test_providers_braze_cannot_honour_warn():
    from braze.errors import BrazeWarning

    with pytest.warns(BrazeWarning, match="provider 'TensorrtExecutionProvider' is not one braze has"):
        braze.InferenceSession(str(tiny("bert-tiny")), providers=["TensorrtExecutionProvider"])
    with pytest.warns(BrazeWarning, match="asks for a GPU, but the target is 'cpu'"):
        braze.InferenceSession(str(tiny("bert-tiny")), providers=["CUDAExecutionProvider", "CPUExecutionProvider"])


def test_reports_in_json_latency_and_info(tmp_path):
    import json

    art = tmp_path / "b.braze"
    done = braze_cli("compile", tiny("bert-tiny"), "-o", art, "-q", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["kernels"] > 0 and summary["level"] == 2 and summary["inputs"][0]["name"] == "input_ids"
    inputs = tiny("bert-tiny").with_suffix(".inputs.npz")
    done = braze_cli("run", art, "--inputs", inputs, "--repeat", 5, "--warmup", 1, "--json")
    data = json.loads(done.stdout)
    assert [o["name"] for o in data["outputs"]] == ["last_hidden_state", "pooler_output"]
    assert data["latency"]["runs"] == 5 and data["latency"]["median_ms"] > 0
    done = braze_cli("run", art, "--inputs", inputs, "--repeat", 3)
    assert "latency: median" in done.stdout and "over 3 runs" in done.stdout
    passes = json.loads(braze_cli("passes", "--json").stdout)
    assert {"fuse", "canonicalize"} <= {p["name"] for p in passes}
    assert next(p for p in passes if p["name"] == "fuse")["options"]["level"] == 2
    onnx_info = json.loads(braze_cli("info", tiny("bert-tiny"), "--json").stdout)
    assert onnx_info["ops"]["MatMul"] == 16 and onnx_info["flops"] > 1e7 and onnx_info["parameter_bytes"] > 1e6
    art_info = braze_cli("info", art)
    assert "target: cpu" in art_info.stdout and "kernels:" in art_info.stdout


def test_the_shipped_dynamic_model_runs_on_gears_and_padded_batches():
    from pathlib import Path

    data = Path(braze.__file__).parent / "data"
    art = braze.compile(str(data / "cnn-dynamic.onnx"), dynamic_batch="1,2,4", pad_batch=True)
    x = dict(np.load(data / "cnn-dynamic.inputs.npz"))
    want = dict(np.load(data / "cnn-dynamic.ref.npz"))["probs"]
    np.testing.assert_allclose(art.run(x)["probs"], want, rtol=1e-5, atol=1e-6)
    three = art.run({"input": np.concatenate([x["input"], x["input"][:1]])})["probs"]  # runs on the gear of 4
    np.testing.assert_allclose(three, np.concatenate([want, want[:1]]), rtol=1e-5, atol=1e-6)


def test_every_public_name_documents_itself():
    """Every name in braze.__all__ has a docstring with an example; the
    functions also say what they return and raise."""
    import inspect

    for name in braze.__all__:
        obj = getattr(braze, name)
        doc = obj.__doc__ or ""
        assert "Example" in doc or "::" in doc, name
        if inspect.isfunction(obj):
            assert "Returns" in doc and "Raises" in doc, name
