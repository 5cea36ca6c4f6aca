"""braze-run, the C++ runner: built with CMake once per session, checked against
the Python runtime on a real CNN, and every mistake a user can make is one line
on stderr with a non-zero exit, never a crash."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from braze import __version__
from braze.compiler import compile as braze_compile
from braze.runtime import load
from models import DATA, tiny
from models import assert_close

ROOT = Path(__file__).parents[2]


def _run(braze_run, *args) -> subprocess.CompletedProcess:
    return subprocess.run([str(braze_run), *map(str, args)], capture_output=True, text=True, timeout=120)


def _input_args(files: dict) -> list:
    return [arg for name, path in files.items() for arg in ("--input", f"{name}={path}")]


# --- a real CNN: braze-run, Python and onnxruntime agree ----------------------------------------
# (MobileNetV2 rather than the onnx wheel's light_squeezenet: that one's softmax
# output is 0.001 everywhere whatever the input, so it would hide wrong numerics.)

@pytest.fixture(scope="module")
def mobilenet(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mobilenet")
    braze_compile(str(tiny("mobilenetv2-tiny")), level=2).save(str(folder / "m.braze"))
    feeds = dict(np.load(DATA / "mobilenetv2-tiny.inputs.npz"))
    for name, array in feeds.items():
        np.save(folder / f"{name}.npy", array)
    return folder, feeds


def test_cnn_matches_python_and_onnxruntime(braze_run, mobilenet, tmp_path):
    folder, feeds = mobilenet
    done = _run(braze_run, folder / "m.braze", *_input_args({n: folder / f"{n}.npy" for n in feeds}),
                "--output-dir", tmp_path / "out", "--repeat", 3, "--threads", 2)
    assert done.returncode == 0, done.stderr
    assert re.search(r"latency: median [0-9.]+ ms over 3 runs \(threads: 2, spin: 1000\)", done.stdout), done.stdout

    python = load(folder / "m.braze").run(feeds)
    ours = {name: np.load(tmp_path / "out" / f"{name}.npy") for name in python}
    for name, want in python.items():
        assert ours[name].dtype == want.dtype and ours[name].shape == want.shape
        assert np.abs(ours[name] - want).max() <= 1e-4 * np.abs(want).max(), name
    assert_close(ours, dict(np.load(DATA / "mobilenetv2-tiny.ref.npz")))  # and onnxruntime's


def _idle_cpu(braze_run, mobilenet, tmp_path, *spin) -> float:
    folder, feeds = mobilenet
    env = {k: v for k, v in os.environ.items() if k != "TVM_THREAD_POOL_SPIN_COUNT"}
    done = subprocess.run([str(braze_run), str(folder / "m.braze"),
                           *map(str, _input_args({n: folder / f"{n}.npy" for n in feeds})),
                           "--output-dir", str(tmp_path / "out"), "--repeat", "20", "--threads", "2", "--idle-cpu",
                           *spin], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    m = re.search(r"idle: ([0-9.]+) s of CPU in the 0.5 s after the last run \(spin: (\d+)\)", done.stdout)
    assert m, done.stdout
    assert int(m.group(2)) == {(): 1000, ("--spin", "long"): 300000, ("--spin", "off"): 0}[spin]
    return float(m.group(1))


def test_idle_cpu_after_a_run(braze_run, mobilenet, tmp_path):
    """The C++ runtime goes quiet after a run by default, as the Python one does;
    --spin long keeps TVM's pool busy (so the default's quiet is braze's doing)."""
    assert _idle_cpu(braze_run, mobilenet, tmp_path) < 0.025
    assert _idle_cpu(braze_run, mobilenet, tmp_path, "--spin", "long") > 0.025
    assert _idle_cpu(braze_run, mobilenet, tmp_path, "--spin", "off") < 0.025


# --- dtypes, .npy versions, output file names -----------------------------------------------

def _small_model() -> onnx.ModelProto:
    """Three inputs and outputs of three dtypes; output names a file system would choke on."""
    zero = h.make_tensor("zero", T.FLOAT, [], [0.0])
    nodes = [h.make_node("Neg", ["x"], ["nx"]),
             h.make_node("Where", ["mask", "x", "nx"], ["scores/out:0"]),
             h.make_node("Add", ["idx", "idx"], ["Idx2"]),
             h.make_node("Constant", [], ["zero"], value=zero),
             h.make_node("Greater", ["x", "zero"], ["is positive"])]
    graph = h.make_graph(
        nodes, "small",
        [h.make_tensor_value_info("x", T.FLOAT, [2, 3]), h.make_tensor_value_info("idx", T.INT64, [4]),
         h.make_tensor_value_info("mask", T.BOOL, [2, 3])],
        [h.make_tensor_value_info("scores/out:0", T.FLOAT, [2, 3]),
         h.make_tensor_value_info("Idx2", T.INT64, [4]),
         h.make_tensor_value_info("is positive", T.BOOL, [2, 3])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """(folder, {input name: .npy path}, the Python runtime's outputs)."""
    folder = tmp_path_factory.mktemp("small")
    art = braze_compile(_small_model(), level=2)
    art.save(str(folder / "m.braze"))
    rng = np.random.default_rng(1)
    inputs = {"x": rng.standard_normal((2, 3)).astype("float32"), "idx": np.arange(4, dtype="int64"),
              "mask": rng.random((2, 3)) > 0.5}
    files = {}
    for name, a in inputs.items():
        files[name] = folder / f"{name}.npy"
        with open(files[name], "wb") as f:  # one input in format 2.0, the rest in 1.0
            np.lib.format.write_array(f, a, version=(2, 0) if name == "x" else (1, 0))
    return folder, files, art.run(inputs)


def test_dtypes_and_output_file_names(braze_run, small, tmp_path):
    folder, files, want = small
    done = _run(braze_run, folder / "m.braze", *_input_args(files), "--output-dir", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert sorted(os.listdir(tmp_path / "out")) == ["Idx2.npy", "is_positive.npy", "scores_out_0.npy"]
    for name, path in [("scores/out:0", "scores_out_0.npy"), ("Idx2", "Idx2.npy"), ("is positive", "is_positive.npy")]:
        got = np.load(tmp_path / "out" / path)
        assert got.dtype == want[name].dtype and got.shape == want[name].shape
        np.testing.assert_array_equal(got, want[name])


def test_amx_artifact_runs_or_names_what_the_cpu_lacks(braze_run, tmp_path):
    """A bfloat16 matmul built for an AMX target: braze-run asks Linux for
    the tile state and matches the Python runtime on a CPU with AMX; on one
    without, it stops with one line naming the missing features."""
    import dataclasses

    from braze.targets import get_target
    from braze.targets.isa import missing, requirements

    target = dataclasses.replace(get_target("cpu-avx512"), mattr=("+avx512bf16", "+amx-tile", "+amx-bf16"))
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((64, 64)) / 8).astype("float32")
    graph = h.make_graph([h.make_node("MatMul", ["x", "w"], ["y"])], "mm",
                         [h.make_tensor_value_info("x", T.FLOAT, [32, 64])],
                         [h.make_tensor_value_info("y", T.FLOAT, [32, 64])], [onnx.numpy_helper.from_array(w, "w")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    art = braze_compile(model, target=target, precision_mode="allow_mix_precision_bf16")
    assert [k["schedule"] for k in art.kernels if "MatMul" in k["name"]] == ["amx"]
    art.save(str(tmp_path / "m.braze"))
    x = rng.standard_normal((32, 64)).astype("float32")
    np.save(tmp_path / "x.npy", x)
    done = _run(braze_run, tmp_path / "m.braze", "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", tmp_path / "out")
    lacking = missing(requirements(target))
    if lacking is None:
        assert done.returncode == 0, done.stderr
        want = load(tmp_path / "m.braze").run({"x": x})["y"]
        np.testing.assert_allclose(np.load(tmp_path / "out" / "y.npy"), want, rtol=1e-6, atol=1e-6)
        assert np.abs(want - x @ w).max() <= 0.02 * np.abs(x @ w).max()
    else:
        assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1
        assert "amx-tile" in done.stderr or "avx512" in done.stderr, done.stderr


# --- errors: one line on stderr, non-zero exit, no abort -------------------------------------

def _save(path: Path, array) -> Path:
    np.save(path, array)
    return path


def _cli(tmp: Path, art: Path, files: dict, *extra, **replace) -> list:
    """ART --input NAME=FILE... --output-dir TMP/o EXTRA...; ``replace`` swaps input files."""
    return [art, *_input_args({**files, **replace}), "--output-dir", tmp / "o", *extra]


def _bad_npy(path: Path, what: str) -> Path:
    x = np.zeros((2, 3), "float32")
    if what == "garbage":
        path.write_bytes(b"not numpy at all")
    elif what == "fortran":
        np.save(path, np.asfortranarray(x))
    elif what == "big-endian":
        np.save(path, x.astype(">f4"))
    elif what == "complex":
        np.save(path, x.astype("complex64"))
    elif what == "truncated":
        np.save(path, x)
        path.write_bytes(path.read_bytes()[:-5])
    return path


NPY_ERRORS = {"garbage": "not a .npy file", "fortran": "Fortran-ordered", "big-endian": "big-endian",
              "complex": "unsupported dtype '<c8'", "truncated": "holds 19 bytes of data, its header says 24"}

# (case id, arguments from (tmp, artifact, input files), message expected on stderr)
CASES = [
    ("no-args", lambda t, a, f: [], "no ARTIFACT given"),
    ("unknown-option", lambda t, a, f: _cli(t, a, f, "--bogus"), "unknown option --bogus"),
    ("no-output-dir", lambda t, a, f: [a, *_input_args(f)], "--output-dir DIR is required"),
    ("bad-repeat", lambda t, a, f: _cli(t, a, f, "--repeat", "x"), "--repeat takes a whole number"),
    ("bad-threads", lambda t, a, f: _cli(t, a, f, "--threads", "0"), "--threads takes a whole number"),
    ("bad-spin", lambda t, a, f: _cli(t, a, f, "--spin", "fast"),
     "--spin: spin takes off, short, long or a whole number of spin iterations, not 'fast'"),
    ("bad-input-arg", lambda t, a, f: _cli(t, a, f, "--input", "x"), "--input takes NAME=FILE.npy"),
    ("no-artifact", lambda t, a, f: _cli(t, t / "nope.braze", f), "nope.braze: no such artifact"),
    ("missing-input", lambda t, a, f: _cli(t, a, {"x": f["x"]}), "missing input(s) idx, mask"),
    ("unknown-input", lambda t, a, f: _cli(t, a, f, y=f["x"]), "unknown input(s) y"),
    ("missing-file", lambda t, a, f: _cli(t, a, f, x=t / "none.npy"), "none.npy: cannot open"),
    ("wrong-shape", lambda t, a, f: _cli(t, a, f, x=_save(t / "x.npy", np.zeros((3, 2), "float32"))),
     "input 'x' has shape [3, 2], expected [2, 3]"),
    ("wrong-dtype", lambda t, a, f: _cli(t, a, f, idx=_save(t / "i.npy", np.arange(4, dtype="int32"))),
     "input 'idx' has dtype int32, expected int64"),
    ("output-dir-is-a-file", lambda t, a, f: _cli(t, a, f, "--output-dir", _save(t / "f.npy", 1)),
     "cannot create the output folder"),
    *[(f"npy-{what}", lambda t, a, f, what=what: _cli(t, a, f, x=_bad_npy(t / "bad.npy", what)),
       f"bad.npy: {message}") for what, message in NPY_ERRORS.items()],
]


def _overwrite(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def _edit_manifest(art: Path, edit) -> None:
    m = json.loads((art / "manifest.json").read_text())
    edit(m)
    (art / "manifest.json").write_text(json.dumps(m))


def _lib_of_another_shape(art: Path, tmp: Path) -> dict:
    """A manifest that no longer describes its lib.so: TVM's own check must fail, as a line."""
    _edit_manifest(art, lambda m: m["inputs"][0].update(shape=[3, 3]))
    return {"x": _save(tmp / "x33.npy", np.zeros((3, 3), "float32"))}


# (case id, damage done to a copy of the artifact [may return replacement inputs], message expected)
DAMAGE = [
    ("garbage-lib", lambda a, t: _overwrite(a / "lib.so", b"\x7fELF garbage" * 10),
     "lib.so: the compiled library is corrupt"),
    ("truncated-lib", lambda a, t: _overwrite(a / "lib.so", (a / "lib.so").read_bytes()[:5000]),
     "truncated or damaged"),
    ("missing-lib", lambda a, t: (a / "lib.so").unlink(), "incomplete artifact, lib.so is missing"),
    ("bad-json", lambda a, t: _overwrite(a / "manifest.json", b'{"format": 1,'),
     "corrupt manifest.json (line 1, column 14"),
    ("format", lambda a, t: _edit_manifest(a, lambda m: m.update(format=99)), "not a braze artifact of format 1"),
    ("tvm-version", lambda a, t: _edit_manifest(a, lambda m: m.update(tvm="0.1.0")), "built with tvm 0.1.0"),
    ("target-kind", lambda a, t: _edit_manifest(a, lambda m: m["target"].update(kind="cuda")),
     "CPU (llvm) artifacts only"),
    ("no-inputs", lambda a, t: _edit_manifest(a, lambda m: m.pop("inputs")), "inputs is missing or has the wrong type"),
    ("lib-mismatch", _lib_of_another_shape, "running the model failed"),
]


def _assert_one_line_error(done: subprocess.CompletedProcess, message: str) -> None:
    assert done.returncode > 0, f"exit {done.returncode} (a signal, if negative)\n{done.stderr}"
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("braze-run: error: "), done.stderr
    assert message in lines[0]
    assert "terminate called" not in done.stderr


@pytest.mark.parametrize("make_args, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_errors_are_one_line(braze_run, small, tmp_path, make_args, message):
    folder, files, _ = small
    _assert_one_line_error(_run(braze_run, *make_args(tmp_path, folder / "m.braze", files)), message)


@pytest.mark.parametrize("damage, message", [c[1:] for c in DAMAGE], ids=[c[0] for c in DAMAGE])
def test_damaged_artifacts_are_one_line_errors(braze_run, small, tmp_path, damage, message):
    folder, files, _ = small
    art = tmp_path / "copy.braze"
    shutil.copytree(folder / "m.braze", art)
    files = {**files, **(damage(art, tmp_path) or {})}
    _assert_one_line_error(_run(braze_run, art, *_input_args(files), "--output-dir", tmp_path / "o"), message)


def test_help_and_version(braze_run):
    assert _run(braze_run, "--help").stdout.startswith("usage: braze-run ARTIFACT")
    assert _run(braze_run, "--version").stdout.split()[1] == __version__


def test_example_program(braze_run, small):
    """docs/deploy.md's example, built beside braze-run: inputs of ones in, first values out."""
    folder, _, _ = small
    done = subprocess.run([braze_run.parent / "braze-example", folder / "m.braze"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["scores/out:0: float32, 6 values, first -1", "Idx2: int64, 4 values",
                                        "is positive: bool, 6 values"]
    example = (ROOT / "cpp" / "examples" / "run_model.cpp").read_text()
    assert example in (ROOT / "docs" / "deploy.md").read_text(), "docs/deploy.md must show cpp/examples/run_model.cpp"
