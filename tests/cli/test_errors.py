"""Every bad input a user can give the `braze` command: a typed error, one
`error:` line naming the culprit, a non-zero exit, no traceback, and no
partial output left behind (docs/errors.md lists the error classes)."""

import io
import json
import os
import shutil
import subprocess
import sys
from typing import NamedTuple

import numpy as np
import onnx
import pytest

from models import tiny
from onnx_check import parse

MODEL = parse('<ir_version: 8, opset_import: ["" : 17]> g (float[2,3] x, float[3] b) => (float[2,3] y) '
              '{ t = Add(x, b)\n y = Relu(t) }')
X = np.arange(6, dtype="float32").reshape(2, 3)
B = np.ones(3, dtype="float32")


class Result(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def braze(capfd, monkeypatch):
    """Runs the `braze` command in this process (fast): ``main(argv)``'s exit
    status and what it wrote to the file descriptors 1 and 2. An exception that
    escapes ``main`` (a traceback, from the shell) fails the test as it is.
    ``test_the_real_command`` runs some of the same cases as real processes."""
    from braze.cli import main

    def run(*args, stdin=None):
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin or ""))
        capfd.readouterr()
        try:
            status = main([str(a) for a in args])
        except SystemExit as e:  # argparse
            status = e.code
        out, err = capfd.readouterr()
        return Result(status, out, err)

    return run


def braze_process(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "braze.cli", *map(str, args)], input=stdin,
                          capture_output=True, text=True, timeout=300)


def fails(result, *culprits, status=1):
    """The command failed cleanly: exit status, no traceback, an `error:` line naming every culprit."""
    assert result.returncode == status, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    assert "error: " in result.stderr, result.stderr
    for culprit in culprits:
        assert culprit in result.stderr, f"{culprit!r} not named in: {result.stderr}"


def leaves_nothing(folder, before):
    """No output file, no temporary file or folder: the folder holds what it held before."""
    assert sorted(os.listdir(folder)) == before, f"left behind: {set(os.listdir(folder)) - set(before)}"


@pytest.fixture
def work(tmp_path):
    onnx.save(MODEL, tmp_path / "m.onnx")
    return tmp_path


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    path = tmp_path_factory.mktemp("art") / "m.braze"
    from braze.compiler import compile as braze_compile

    braze_compile(MODEL, level=0).save(str(path))
    return path


# --- model files ----------------------------------------------------------------------------------
def _random_bytes(path):
    path.write_bytes(np.random.default_rng(8).integers(0, 256, 4096, dtype=np.uint8).tobytes())


def _truncated(path):
    path.write_bytes(tiny("bert-tiny").read_bytes()[:5000])


def _empty(path):
    path.write_bytes(b"")


def _folder(path):
    path.mkdir()


@pytest.mark.parametrize("make, message", [
    (_random_bytes, "not a readable ONNX model"),
    (_truncated, "not a readable ONNX model"),
    (_empty, "not an ONNX model"),
    (_folder, "is a directory"),
    (None, "no such file"),
])
@pytest.mark.parametrize("command", ["compile", "import"])
def test_bad_model_file(braze, tmp_path, make, message, command):
    bad = tmp_path / "bad.onnx"
    if make:
        make(bad)
    before = sorted(os.listdir(tmp_path))
    out = tmp_path / ("out.braze" if command == "compile" else "out.mlir")
    fails(braze(command, bad, "-o", out), f"{bad}: {message}")
    leaves_nothing(tmp_path, before)


def test_unsupported_ops_are_all_listed_with_their_nodes(braze, tmp_path):
    model = parse('<ir_version: 8, opset_import: ["" : 17, "com.acme" : 1]> g (float[2,2] x) => (float[2,2] y) '
                  '{ a = Det(x)\n b = Relu(a)\n c = com.acme.Frob(b)\n y = Det(c) }')
    onnx.save(model, tmp_path / "u.onnx")
    before = sorted(os.listdir(tmp_path))
    r = braze("compile", tmp_path / "u.onnx", "-o", tmp_path / "u.braze")
    fails(r, "2 unsupported ONNX op type(s)", "Det: Det_0, Det_3", "com.acme.Frob: Frob_2", "braze ops")
    leaves_nothing(tmp_path, before)


# --- shapes ---------------------------------------------------------------------------------------
def test_unbound_dynamic_dimension(braze, tmp_path):
    onnx.save(parse('<ir_version: 8, opset_import: ["" : 17]> g (float[N,3] x) => (float[N,3] y) { y = Relu(x) }'),
              tmp_path / "dyn.onnx")
    before = sorted(os.listdir(tmp_path))
    out = tmp_path / "dyn.braze"
    fails(braze("compile", tmp_path / "dyn.onnx", "-o", out), "graph input 'x' dimension 0 ('N') is dynamic",
          "--input-shape x=Nx3")
    fails(braze("compile", tmp_path / "dyn.onnx", "-o", out, "--input-shape", "y=2x3"),
          "--input-shape names no graph input: y (inputs: x)")
    fails(braze("compile", tmp_path / "dyn.onnx", "-o", out, "--input-shape", "x=2x3x4"),
          "--input-shape x: the input has rank 2, got 3 dimensions")
    fails(braze("compile", tmp_path / "dyn.onnx", "-o", out, "--input-shape", "x=twox3"),
          "--input-shape 'x=twox3': expected NAME=1x3x224x224")
    leaves_nothing(tmp_path, before)


def test_shape_computed_at_run_time_names_the_node_and_input(braze, tmp_path):
    onnx.save(parse('<ir_version: 8, opset_import: ["" : 17]> g (float[2,3] x, int64[2] s) => (float[3,2] y) '
                    '{ y = Reshape(x, s) }'), tmp_path / "r.onnx")
    before = sorted(os.listdir(tmp_path))
    fails(braze("compile", tmp_path / "r.onnx", "-o", tmp_path / "r.braze"),
          "node Reshape_0 (Reshape): input 'shape' is computed at run time")
    leaves_nothing(tmp_path, before)


# --- running an artifact --------------------------------------------------------------------------
@pytest.mark.parametrize("inputs, message", [
    ({"x": X, "c": B}, "missing input(s) b; unknown input(s) c (the model takes: x, b)"),
    ({"x": X[:1], "b": B}, "input 'x' has shape [1, 3], expected [2, 3]"),
    ({"x": X, "b": B.astype("int32")}, "input 'b' has dtype int32, expected float32"),
])
def test_wrong_inputs_at_run_time(braze, artifact, tmp_path, inputs, message):
    np.savez(tmp_path / "in.npz", **inputs)
    before = sorted(os.listdir(tmp_path))
    fails(braze("run", artifact, "--inputs", tmp_path / "in.npz", "-o", tmp_path / "out.npz"), message)
    leaves_nothing(tmp_path, before)


def _garbage(path):
    path.write_bytes(b"not a zip file at all")


def _single_array(path):
    with open(path, "wb") as f:
        np.save(f, X)


def _object_array(path):
    np.savez(path, x=np.array([{"a": 1}], dtype=object), b=B)


@pytest.mark.parametrize("make, message", [
    (_garbage, "not an .npz file"),
    (_single_array, "holds a single array, not named ones"),
    (_object_array, "cannot read its arrays"),
    (None, "no such inputs file"),
])
def test_unreadable_inputs_file(braze, artifact, tmp_path, make, message):
    bad = tmp_path / "in.npz"
    if make:
        make(bad)
    before = sorted(os.listdir(tmp_path))
    fails(braze("run", artifact, "--inputs", bad, "-o", tmp_path / "out.npz"), f"{bad}: {message}")
    leaves_nothing(tmp_path, before)


def _edit_manifest(edit):
    def apply(art):
        m = json.loads((art / "manifest.json").read_text())
        edit(m)
        (art / "manifest.json").write_text(json.dumps(m))
    return apply


def _flip_a_byte(art):
    data = bytearray((art / "lib.so").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (art / "lib.so").write_bytes(bytes(data))


def _unchecked_garbage_library(art):
    _edit_manifest(lambda m: m.pop("lib_sha256"))(art)
    (art / "lib.so").write_bytes(b"\x7fELF" + b"garbage" * 20)


@pytest.mark.parametrize("damage, message", [
    (lambda art: (art / "manifest.json").write_text("{not json"), "corrupt manifest.json"),
    (_edit_manifest(lambda m: m.pop("inputs")), "corrupt manifest.json ('inputs' is missing"),
    (_edit_manifest(lambda m: m["outputs"].append(3)), "corrupt manifest.json (an input or output lacks"),
    (lambda art: os.remove(art / "lib.so"), "incomplete artifact, lib.so is missing"),
    (lambda art: os.remove(art / "model.mlir"), "incomplete artifact, model.mlir is missing"),
    (_flip_a_byte, "the compiled library is corrupt"),
    (_unchecked_garbage_library, "the compiled library is corrupt"),
    (_edit_manifest(lambda m: m.update(tvm="0.1.0")), "built with tvm 0.1.0"),
    (_edit_manifest(lambda m: m.update(braze="9.9")), "built with braze 9.9"),
    (_edit_manifest(lambda m: m.update(format=99)), "not a braze artifact of format"),
    (_edit_manifest(lambda m: m["requires"]["features"].append("avx9000")), "built for target"),
])
def test_corrupt_or_mismatched_artifact(braze, artifact, tmp_path, damage, message):
    art = tmp_path / "copy.braze"
    shutil.copytree(artifact, art)
    damage(art)
    np.savez(tmp_path / "in.npz", x=X, b=B)
    before = sorted(os.listdir(tmp_path))
    r = braze("run", art, "--inputs", tmp_path / "in.npz", "-o", tmp_path / "out.npz")
    fails(r, str(art), message)
    assert "rebuild it with `braze compile`" in r.stderr  # says what to do
    leaves_nothing(tmp_path, before)


@pytest.mark.parametrize("what", ["missing", "file"])
def test_not_an_artifact(braze, tmp_path, what):
    path = tmp_path / "m.braze"
    if what == "file":
        path.write_text("hello")
    np.savez(tmp_path / "in.npz", x=X, b=B)
    before = sorted(os.listdir(tmp_path))
    fails(braze("run", path, "--inputs", tmp_path / "in.npz", "-o", tmp_path / "out.npz"),
          f"{path}: {'no such artifact' if what == 'missing' else 'is a file, not an artifact'}")
    leaves_nothing(tmp_path, before)


# --- IR text and pass pipelines ---------------------------------------------------------------------
IR = """func.func @main(%x: tensor<2x3xf32>, %b: tensor<3xf32>) -> (tensor<2x3xf32> {name = "y"}) {
  %0 = "math.add"(%x, %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32> loc("Add_0" : "Add")
  %1 = "math.relu"(%0) : (tensor<2x3xf32>) -> tensor<2x3xf32> loc("Relu_1" : "Relu")
  "func.return"(%1) : (tensor<2x3xf32>) -> ()
}
"""


@pytest.mark.parametrize("edit, message", [
    (("%x, %b", "%x, %nope"), "in.mlir:2:23: use of undefined value %nope"),
    (('"math.add"(%x', '"math.add"((%x'), "in.mlir:2:19: expected an SSA value"),
    (("math.relu", "math.relux"), "in.mlir:3:8: unknown op 'math.relux'"),
    (("tensor<2x3xf32>) -> ()", "tensor<2x3xf32) -> ()"), "in.mlir:4:"),
])
def test_bad_ir_text_names_line_and_column(braze, tmp_path, edit, message):
    assert edit[0] in IR
    (tmp_path / "in.mlir").write_text(IR.replace(*edit, 1))
    before = sorted(os.listdir(tmp_path))
    fails(braze("opt", tmp_path / "in.mlir", "-p", "canonicalize", "-o", tmp_path / "out.mlir"), message)
    leaves_nothing(tmp_path, before)
    r = braze("opt", "-p", "dce", stdin=IR.replace(*edit, 1))
    fails(r, message.replace("in.mlir", "<stdin>"))
    assert r.stdout == ""


@pytest.mark.parametrize("pipeline, message", [
    ("canonicalize,nosuchpass", "unknown pass 'nosuchpass' (available: "),
    ("dce{aggressive=1}", "pass 'dce' has no option 'aggressive'"),
    ("fuse{level=high}", "pass 'fuse': option 'level' expects int, got 'high'"),
    ("fuse{level=7}", "pass 'fuse': fusion level must be 0 to 3, got 7"),
    ("fuse{max-group-size=-1}", "pass 'fuse': option 'max-group-size' must be 0 (unlimited) or more"),
    ("fuse{level=2", "unbalanced braces"),
    ("fuse{scope=re:(}", "scope 're:(' is not a valid regular expression"),
])
def test_unknown_pass_or_bad_option(braze, tmp_path, pipeline, message):
    (tmp_path / "in.mlir").write_text(IR)
    before = sorted(os.listdir(tmp_path))
    fails(braze("opt", tmp_path / "in.mlir", "-p", pipeline, "-o", tmp_path / "out.mlir"), message)
    leaves_nothing(tmp_path, before)


def test_bad_fusion_options_on_compile(braze, work):
    before = sorted(os.listdir(work))
    out = work / "m.braze"
    fails(braze("compile", work / "m.onnx", "-o", out, "--max-group-size", "-2"), "option 'max-group-size'")
    fails(braze("compile", work / "m.onnx", "-o", out, "--scope", "index:5-2"), "scope 'index:5-2'")
    fails(braze("compile", work / "m.onnx", "-o", out, "--threads", "-3"), "argument --threads", status=2)
    leaves_nothing(work, before)


# --- rules and switch files ---------------------------------------------------------------------------
@pytest.mark.parametrize("text, message", [
    ('{"rules": [{"name": "ok", "ops": ["Add", "Relu"]}, {"name": "lonely", "ops": ["Add"]}]}',
     "rule 'lonely': \"ops\" must list at least two op types"),
    ('[{"name": "both", "ops": ["Add", "Relu"], "nodes": ["Add_0"]}]', "rule 'both': needs exactly one of"),
    ('[{"name": "dag", "ops": ["Add", {"op": "Relu", "inputs": [3]}]}]', "rule 'dag': ops[1].inputs"),
    ('[{"name": "typo", "opz": ["Add", "Relu"]}]', "rule 'typo': unknown key(s)"),
    ('[{"name": "twice", "ops": ["Add", "Relu"]}, {"name": "twice", "nodes": ["Add_0"]}]',
     "rule 'twice' is defined 2 times"),
    ('[{"name": "attention", "ops": ["Add", "Relu"]}]', "manual rule 'attention' has the name of a built-in rule"),
    ('{"rules": [{"ops": ["Add", "Relu"]}]}', "needs a \"name\""),
    ('{"rules": [', "not valid JSON"),
])
def test_invalid_rules_file_names_the_rule(braze, work, text, message):
    (work / "rules.json").write_text(text)
    before = sorted(os.listdir(work))
    fails(braze("compile", work / "m.onnx", "-o", work / "m.braze", "--rules", work / "rules.json"), message)
    leaves_nothing(work, before)


def test_missing_rules_file(braze, work):
    before = sorted(os.listdir(work))
    fails(braze("compile", work / "m.onnx", "-o", work / "m.braze", "--rules", work / "nope.json"),
          f"rules file {work / 'nope.json'}: cannot read it")
    leaves_nothing(work, before)


@pytest.mark.parametrize("text, message", [
    ('{"ALL": "on", "attention": "maybe"}', "rule 'attention' must be on or off, got 'maybe'"),
    ('{"ALL": "on", "atention": "off"}', "rule switch names unknown rule(s) 'atention'"),
    ('["ALL"]', "expected an object like"),
    ("ALL=on", "cannot read it as JSON"),
])
def test_invalid_switch_file_names_the_rule(braze, work, text, message):
    (work / "switch.json").write_text(text)
    before = sorted(os.listdir(work))
    fails(braze("compile", work / "m.onnx", "-o", work / "m.braze", "--switch", work / "switch.json"), message)
    leaves_nothing(work, before)
    if "on or off" in message:
        fails(braze("compile", work / "m.onnx", "-o", work / "m.braze", "--switch", "ALL=on,attention=maybe"),
              message)


# --- output paths -------------------------------------------------------------------------------------
def test_output_that_is_not_an_artifact_is_never_replaced(braze, work):
    (work / "mine").mkdir()
    (work / "mine" / "notes.txt").write_text("keep me")
    fails(braze("compile", work / "m.onnx", "-o", work / "mine"), f"{work / 'mine'}: exists and is not a braze artifact")
    assert (work / "mine" / "notes.txt").read_text() == "keep me"
    fails(braze("compile", work / "m.onnx", "-o", work / "m.onnx"), "exists and is a file")
    assert onnx.load(work / "m.onnx").graph.node  # untouched


def test_unwritable_output_path(braze, work, artifact):
    before = sorted(os.listdir(work))
    missing = work / "no" / "such" / "dir"
    np.savez(work / "in.npz", x=X, b=B)
    before = sorted(os.listdir(work))
    fails(braze("import", work / "m.onnx", "-o", missing / "m.mlir"), f"{missing / 'm.mlir'}: No such file")
    fails(braze("run", artifact, "--inputs", work / "in.npz", "-o", missing / "o.npz"), f"{missing / 'o.npz'}: ")
    leaves_nothing(work, before)


# --- the same, as real processes ---------------------------------------------------------------------
def test_the_real_command(artifact, work):
    """A few of the cases above through `python -m braze.cli`: the exit status and
    stderr a shell sees (TVM's own logging included), and nothing left behind."""
    _random_bytes(work / "bad.onnx")
    np.savez(work / "in.npz", x=X[:1], b=B)
    (work / "rules.json").write_text('[{"name": "lonely", "ops": ["Add"]}]')
    broken = work / "broken.braze"
    shutil.copytree(artifact, broken)
    _flip_a_byte(broken)
    before = sorted(os.listdir(work))
    cases = [
        (["compile", work / "bad.onnx", "-o", work / "o.braze"], None, "not a readable ONNX model"),
        (["run", artifact, "--inputs", work / "in.npz", "-o", work / "o.npz"], None, "input 'x' has shape [1, 3]"),
        (["run", broken, "--inputs", work / "in.npz", "-o", work / "o.npz"], None, "the compiled library is corrupt"),
        (["opt", "-p", "dce", "-o", work / "o.mlir"], IR.replace("%x, %b", "%x, %nope"),
         "<stdin>:2:23: use of undefined value %nope"),
        (["compile", work / "m.onnx", "-o", work / "o.braze", "--rules", work / "rules.json"], None, "rule 'lonely'"),
    ]
    for args, stdin, message in cases:
        fails(braze_process(*args, stdin=stdin), message)
    leaves_nothing(work, before)


# --- targets ---------------------------------------------------------------------------------------------
def _descriptor(edit):
    from braze.targets import read_descriptor

    data, _ = read_descriptor("cpu")
    edit(data)
    return data


@pytest.mark.parametrize("descriptor, message", [
    (_descriptor(lambda d: d["cpu"].update(vector_bits="wide")), "field 'cpu.vector_bits' must be"),
    (_descriptor(lambda d: d["cpu"].update(colour=1)), "field 'cpu.colour' is unknown"),
    (_descriptor(lambda d: d.update(family="quantum")), "field 'family' must be one of"),
    ("{broken", "not valid JSON"),
])
def test_bad_target_descriptor_names_the_field(braze, work, descriptor, message):
    path = work / "target.json"
    path.write_text(descriptor if isinstance(descriptor, str) else json.dumps(descriptor))
    before = sorted(os.listdir(work))
    fails(braze("compile", work / "m.onnx", "-o", work / "m.braze", "--target", path), str(path), message)
    leaves_nothing(work, before)


def test_unknown_target_is_named(braze, work):
    before = sorted(os.listdir(work))
    fails(braze("compile", work / "m.onnx", "-o", work / "m.braze", "--target", "nosuch"), "unknown target 'nosuch'")
    fails(braze("compile", work / "m.onnx", "-o", work / "m.braze", "--target", work / "none.json"),
          f"target file {work / 'none.json'}: no such file")
    leaves_nothing(work, before)


def test_unknown_fusion_option_from_python_is_typed():
    from braze.pipeline import pipeline
    from braze.errors import PassError

    with pytest.raises(PassError, match="nofuse"):
        pipeline(2, {"nofuse": ["Relu"]})
