"""Gears: one artifact compiled for several shapes of a model with dynamic axes.

The models in tests/dynamic/ are torch exports with dynamic axes
(tests/dynamic/make_dynamic.py): a CNN with a dynamic batch ``N`` and a
BERT-style encoder with dynamic ``B`` x ``S``.
"""

import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import braze
from braze.errors import DynamicShapeError, InputError
from braze.frontend.gears import Gear, gear_shapes, parse_gears

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dynamic")
CNN = os.path.join(HERE, "cnn-dyn.onnx")
BERT = os.path.join(HERE, "bert-dyn.onnx")


def _inputs(path: str, dims: dict, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    if path == CNN:
        return {"x": rng.standard_normal((dims["batch"], 3, 32, 32)).astype(np.float32)}
    b, s = dims["B"], dims["S"]
    mask = np.ones((b, s), np.int64)
    mask[:, s - s // 4:] = 0  # padded tails: the mask matters
    return {"input_ids": rng.integers(0, 512, (b, s)).astype(np.int64), "attention_mask": mask}


def _check(artifact, path: str, dims: dict, seed: int = 0) -> None:
    inputs = _inputs(path, dims, seed)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, inputs)
    got = list(artifact.run(inputs).values())
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(w).max())))


@pytest.fixture(scope="module")
def cnn4():
    return braze.compile(CNN, dynamic_batch="1,2,4,8")


@pytest.fixture(scope="module")
def bert4():
    return braze.compile(BERT, dynamic_dims="B=1,2;S=8,16")


# --- every gear matches onnxruntime -------------------------------------------------------------

def test_cnn_batch_gears_match_onnxruntime(cnn4):
    assert [g["name"] for g in cnn4.gears] == ["batch=1", "batch=2", "batch=4", "batch=8"]
    assert [g["inputs"][0]["shape"][0] for g in cnn4.gears] == [1, 2, 4, 8]
    for gear in cnn4.gears:
        _check(cnn4, CNN, gear["dims"])


def test_encoder_batch_by_sequence_gears_match_onnxruntime(bert4):
    assert [g["dims"] for g in bert4.gears] == [{"B": 1, "S": 8}, {"B": 1, "S": 16}, {"B": 2, "S": 8},
                                                {"B": 2, "S": 16}]
    for gear in bert4.gears:
        _check(bert4, BERT, gear["dims"], seed=gear["dims"]["S"])


def test_explicit_gears(tmp_path):
    artifact = braze.compile(BERT, gears="B=1,S=8;B=2,S=16")
    assert [g["name"] for g in artifact.gears] == ["B=1,S=8", "B=2,S=16"]
    path = artifact.save(str(tmp_path / "bert.braze"))
    loaded = braze.load(path)  # dispatch survives saving and loading
    for gear in loaded.gears:
        _check(loaded, BERT, gear["dims"])


def test_each_gear_is_its_own_function_and_kernels(cnn4):
    functions = [g["function"] for g in cnn4.gears]
    assert functions[0] == "main" and len(set(functions)) == 4
    names = {k["name"] for k in cnn4.kernels}
    for gear in cnn4.gears:
        assert set(gear["kernels"]) <= names
    # every kernel of this model depends on the batch, so none is shared
    assert sum(len(g["kernels"]) for g in cnn4.gears) == len(cnn4.kernels)


# --- dispatch errors ----------------------------------------------------------------------------

def test_out_of_gear_shape_lists_the_gears(cnn4):
    with pytest.raises(InputError) as e:
        cnn4.run({"x": np.zeros((3, 3, 32, 32), np.float32)})
    for name in ("batch=1", "batch=2", "batch=4", "batch=8", "[3, 3, 32, 32]"):
        assert name in str(e.value)


def test_gear_for(cnn4):
    assert cnn4.gear_for(_inputs(CNN, {"batch": 4}))["name"] == "batch=4"
    assert braze.compile(CNN, input_shapes={"x": (2, 3, 32, 32)}).gear_for(_inputs(CNN, {"batch": 2})) is None


# --- weights stored once --------------------------------------------------------------------------

def _wide_matmul(path: str) -> None:
    """A 2 MiB weight behind a dynamic batch: a GEMM with one row picks wider
    panels than one with 32, so without agreement the gears would pack it twice."""
    w = np.random.default_rng(0).standard_normal((512, 1024)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])], "wide",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 512])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1024])], [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_weights_are_stored_once(tmp_path):
    path = str(tmp_path / "wide.onnx")
    _wide_matmul(path)
    four = braze.compile(path, dynamic_batch="1,8,32,128")
    one = braze.compile(path, dynamic_batch="1")
    packed = {tuple(k["packed"]) for k in four.kernels}
    assert len(packed) == 1, packed  # one layout for the weight in every gear
    size4 = os.path.getsize(os.path.join(four.save(str(tmp_path / "four")), "lib.so"))
    size1 = os.path.getsize(os.path.join(one.save(str(tmp_path / "one")), "lib.so"))
    assert size4 <= 1.15 * size1, (size4, size1)
    for n in (1, 8, 32, 128):
        x = np.random.default_rng(n).standard_normal((n, 512)).astype(np.float32)
        want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        np.testing.assert_allclose(four.run({"x": x})["y"], want, rtol=1e-4, atol=1e-3)


# --- the options ----------------------------------------------------------------------------------

def test_gear_syntax():
    model = onnx.load(BERT)
    gears = parse_gears(model, dynamic_dims="B=1,4;S=32,64,128")
    assert len(gears) == 6 and gears[0] == Gear((("B", 1), ("S", 32)))
    assert gear_shapes(model, gears[-1]) == {"input_ids": (4, 128), "attention_mask": (4, 128)}
    assert [g.name for g in parse_gears(model, gears="B=1,S=32;B=4,S=128")] == ["B=1,S=32", "B=4,S=128"]
    assert [g.name for g in parse_gears(onnx.load(CNN), dynamic_batch=[1, 2])] == ["batch=1", "batch=2"]


@pytest.mark.parametrize("options, message", [
    ({"dynamic_batch": "1,2", "gears": "B=1,S=8"}, "give one of"),
    ({"dynamic_batch": "1,x"}, "positive whole numbers"),
    ({"dynamic_batch": "0,2"}, "positive whole numbers"),
    ({"dynamic_dims": "B=1,2"}, "dimension 1 ('S') is dynamic and not bound"),
    ({"dynamic_dims": "B=1;Q=2"}, "no dynamic dimension named Q"),
    ({"dynamic_dims": "B=1;B=2"}, "listed twice"),
    ({"gears": "B=1,S=8;B=2"}, "every gear binds the same names"),
    ({"gears": "B=1,S=8;B=1,S=8"}, "listed twice"),
    ({"dynamic_dims": {"B": list(range(1, 12)), "S": list(range(2, 12))}}, "at most 100"),
    ({"dynamic_batch": "1,2"}, "not bound by the gear"),
])
def test_bad_gears_are_typed_errors(options, message):
    with pytest.raises(DynamicShapeError) as e:
        parse_gears(onnx.load(BERT), **options)
    assert message in str(e.value)


def test_dynamic_batch_needs_a_dynamic_leading_dimension():
    model = onnx.load(CNN)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 2
    with pytest.raises(DynamicShapeError, match="fixed batch of 2"):
        parse_gears(model, dynamic_batch="1,2")


def test_input_shape_and_gears_together_is_an_error():
    with pytest.raises(DynamicShapeError, match="--input-shape binds one shape"):
        braze.compile(CNN, input_shapes={"x": (1, 3, 32, 32)}, dynamic_batch="1,2")


# --- the command line -----------------------------------------------------------------------------

def _braze(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "braze.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_cli_compile_run_and_verify_gears(tmp_path):
    out = tmp_path / "cnn.braze"
    r = _braze("compile", CNN, "--dynamic-batch", "1,2,4,8", "-q", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "4 gears (batch=1, batch=2, batch=4, batch=8)" in r.stdout and "shared" in r.stdout
    for n, code in ((4, 0), (3, 1)):
        np.savez(tmp_path / f"x{n}.npz", x=np.ones((n, 3, 32, 32), np.float32))
        r = _braze("run", str(out), "--inputs", str(tmp_path / f"x{n}.npz"))
        assert r.returncode == code, r.stderr
    assert "y: float32[4, 10]" in _braze("run", str(out), "--inputs", str(tmp_path / "x4.npz")).stdout
    assert "match no gear" in r.stderr and "batch=8" in r.stderr
    r = _braze("verify", BERT, "--dynamic-dims", "B=1,2;S=8", "-q")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("ok: tolerance") == 2 and "gear B=2,S=8" in r.stdout


# --- braze-run (C++) dispatches too ---------------------------------------------------------------

def test_braze_run_dispatches_gears(braze_run, tmp_path):
    artifact = braze.compile(BERT, dynamic_dims="B=1,2;S=8,16")
    path = artifact.save(str(tmp_path / "bert.braze"))
    session = ort.InferenceSession(BERT, providers=["CPUExecutionProvider"])
    for gear in artifact.gears:
        inputs = _inputs(BERT, gear["dims"])
        args = []
        for name, value in inputs.items():
            np.save(tmp_path / f"{name}.npy", value)
            args += ["--input", f"{name}={tmp_path / f'{name}.npy'}"]
        out = tmp_path / gear["name"].replace(",", "_")
        r = subprocess.run([str(braze_run), path, *args, "--output-dir", str(out)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        want = session.run(None, inputs)[0]
        np.testing.assert_allclose(np.load(out / "hidden.npy"), want, rtol=1e-4, atol=1e-4)
    odd = _inputs(BERT, {"B": 3, "S": 8})
    for name, value in odd.items():
        np.save(tmp_path / f"{name}.npy", value)
    r = subprocess.run([str(braze_run), path, *[a for n in odd for a in ("--input", f"{n}={tmp_path / f'{n}.npy'}")],
                        "--output-dir", str(tmp_path / "odd")], capture_output=True, text=True)
    assert r.returncode != 0 and "B=2,S=16" in r.stderr and "[3, 8]" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


# --- --pad-batch ----------------------------------------------------------------------------------

def test_pad_batch_runs_between_gears(tmp_path):
    artifact = braze.compile(CNN, dynamic_batch="1,2,4,8", pad_batch=True)
    assert artifact.manifest["pad_batch"] == {"output_axes": [0]}
    loaded = braze.load(artifact.save(str(tmp_path / "cnn.braze")))
    for n, gear in ((3, "batch=4"), (5, "batch=8")):
        inputs = _inputs(CNN, {"batch": n}, seed=n)
        assert loaded.gear_for(inputs)["name"] == gear
        _check(loaded, CNN, {"batch": n}, seed=n)
    with pytest.raises(InputError, match="none with a larger batch"):
        loaded.run({"x": np.zeros((9, 3, 32, 32), np.float32)})
    # without --pad-batch, batch 3 is out of gear
    with pytest.raises(InputError, match="match no gear"):
        braze.compile(CNN, dynamic_batch="1,2,4,8").run(_inputs(CNN, {"batch": 3}))


def _mixing_model(path: str) -> None:
    """Each sample minus the batch's mean: every output depends on every sample."""
    graph = helper.make_graph(
        [helper.make_node("ReduceMean", ["x", "axes"], ["m"], keepdims=1, name="batch_mean"),
         helper.make_node("Sub", ["x", "m"], ["y"])], "mix",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])],
        [numpy_helper.from_array(np.array([0], np.int64), "axes")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)


def test_pad_batch_is_refused_where_samples_mix(tmp_path):
    path = str(tmp_path / "mix.onnx")
    _mixing_model(path)
    with pytest.raises(DynamicShapeError) as e:
        braze.compile(path, dynamic_batch="1,4", pad_batch=True)
    assert "--pad-batch refused" in str(e.value) and "batch_mean" in str(e.value)
    assert "reduces over the batch axis" in str(e.value)
    braze.compile(path, dynamic_batch="1,4")  # the gears themselves are fine


@pytest.mark.parametrize("options", [{}, {"dynamic_dims": "B=1,2;S=8"}])
def test_pad_batch_needs_dynamic_batch(options):
    with pytest.raises(DynamicShapeError, match="--dynamic-batch"):
        braze.compile(BERT if options else CNN, input_shapes=None if options else {"x": (1, 3, 32, 32)},
                      pad_batch=True, **options)


def test_batch_analysis_on_the_models():
    from braze.frontend import import_onnx
    from braze.passes import PassManager
    from braze.passes.batch_independence import batch_outputs

    for path, shapes in ((CNN, {"x": (4, 3, 32, 32)}), (BERT, {"input_ids": (4, 8), "attention_mask": (4, 8)})):
        module = import_onnx(path, shapes)
        PassManager.parse("canonicalize,cse,dce").run(module)
        assert batch_outputs(module.main) == [0]


def test_inference_session_takes_gears():
    session = braze.InferenceSession(CNN, dynamic_batch="1,4", cache_dir=False)
    for n in (1, 4):
        inputs = _inputs(CNN, {"batch": n})
        want = ort.InferenceSession(CNN, providers=["CPUExecutionProvider"]).run(None, inputs)[0]
        np.testing.assert_allclose(session.run(None, inputs)[0], want, rtol=1e-4, atol=1e-4)
    with pytest.raises(TypeError, match="dynamic_batches"):
        braze.InferenceSession(CNN, dynamic_batches="1,4")


def test_cli_explain_and_kernels_report_every_gear():
    r = _braze("explain", BERT, "--dynamic-dims", "B=1,2;S=8")
    assert r.returncode == 0, r.stderr
    assert "gear B=1,S=8" in r.stdout and "gear B=2,S=8" in r.stdout and r.stdout.count("fusion level 2") == 2
    r = _braze("kernels", CNN, "--dynamic-batch", "1,8", "--json")
    assert r.returncode == 0, r.stderr
    import json

    listing = json.loads(r.stdout)["gears"]
    assert list(listing) == ["batch=1", "batch=8"]
    assert listing["batch=8"][0]["outputs"][0]["shape"][0] == 8
    r = _braze("explain", CNN, "--dynamic-batch", "1,8", "--dot", "x.dot")
    assert r.returncode == 1 and "--dot and --html draw one shape" in r.stderr


def test_gears_build_for_cuda(tmp_path):
    """CUDA code generation needs nvcc, not a GPU: the gears' functions and
    kernels are all in the one executable."""
    from braze.codegen.gpu import nvcc_path

    if nvcc_path() is None:
        pytest.skip("CUDA's compiler (nvcc) is not installed: CUDA code generation cannot be checked")
    artifact = braze.compile(CNN, target="cuda-sm90", dynamic_batch="1,4")
    assert [g["function"] for g in artifact.gears] == ["main", "gear1"]
    assert all(k["schedule"].startswith("dlight.") or k["schedule"] == "bind_spatial" for k in artifact.kernels)
    artifact.save(str(tmp_path / "cnn.braze"))
    assert b"gear1" in (tmp_path / "cnn.braze" / "lib.so").read_bytes()
