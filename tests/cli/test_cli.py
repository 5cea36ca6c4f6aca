"""The braze command: import, opt, ops, demo; errors are one line, no traceback."""

import json
import subprocess
import sys

import pytest

from models import TINY, tiny


def braze(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "braze.cli", *map(str, args)], input=stdin,
                          capture_output=True, text=True, timeout=300)


def test_import_writes_text_and_weights(tmp_path):
    out = tmp_path / "m.mlir"
    r = braze("import", tiny("mobilenetv2-tiny"), "-o", out)
    assert r.returncode == 0, r.stderr
    assert out.read_text().startswith("func.func @main(%input: tensor<1x3x96x96xf32>)")
    assert (tmp_path / "m.weights.npz").exists()


def test_opt_pipeline_over_stdin_and_files(tmp_path):
    out = tmp_path / "m.mlir"
    assert braze("import", tiny("bert-tiny"), "-o", out).returncode == 0
    r = braze("opt", out, "-p", "canonicalize,cse,dce", "--timing", "-o", tmp_path / "c.mlir")
    assert r.returncode == 0, r.stderr
    assert "total" in r.stderr
    text = (tmp_path / "c.mlir").read_text()
    assert '"tensor.shape"' not in text
    # text without its weights still parses and transforms (handles are kept)
    r = braze("opt", "-p", "dce", "--print-ir-after-all", stdin=text)
    assert r.returncode == 0, r.stderr
    assert "// -----// IR Dump After DeadCodeElimination (dce) //----- //" in r.stderr
    assert r.stdout == text


def test_opt_without_a_pipeline_round_trips(tmp_path):
    """As mlir-opt does: parse, verify, print back; bad IR is still an error."""
    out = tmp_path / "m.mlir"
    assert braze("import", tiny("mobilenetv2-tiny"), "-o", out).returncode == 0
    r = braze("opt", out)
    assert r.returncode == 0, r.stderr
    assert r.stdout == out.read_text()
    r = braze("opt", stdin=out.read_text().replace("%input", "%nosuch", 2).replace("%nosuch", "%input", 1))
    assert r.returncode != 0 and "%nosuch" in r.stderr and "Traceback" not in r.stderr


def test_a_manual_rule_that_can_never_apply_is_a_warning_or_with_strict_rules_an_error(tmp_path):
    from onnx import TensorProto, helper, save

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="act")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "m.onnx")
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"rules": [{"name": "ghost", "ops": ["NoSuchOp", "Relu"]}]}))
    r = braze("compile", tmp_path / "m.onnx", "--rules", rules, "-o", tmp_path / "m.braze", "-q")
    assert r.returncode == 0, r.stderr
    assert "warning: manual rule 'ghost' can never apply" in r.stderr and "NoSuchOp" in r.stderr
    r = braze("compile", tmp_path / "m.onnx", "--rules", rules, "--strict-rules", "-o", tmp_path / "s.braze", "-q")
    assert r.returncode == 1 and "error: manual rule 'ghost'" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "s.braze").exists()


def test_fusion_result_agrees_with_explain(tmp_path):
    """CANN's fusion_result.json shape: per rule match_times/effect_times (strings), as explain counts them."""
    model = tiny("bert-tiny")
    r = braze("compile", model, "--level", "3", "-o", tmp_path / "m.braze", "-q", "--fusion-result", tmp_path / "f.json")
    assert r.returncode == 0, r.stderr
    (result,) = json.loads((tmp_path / "f.json").read_text()).values()
    explained = json.loads(braze("explain", model, "--level", "3", "--json").stdout)
    assert {name: (int(v["match_times"]), int(v["effect_times"])) for name, v in result["graph_fusion"].items()} \
        == {name: (v["matched"], v["applied"]) for name, v in explained["rules"].items()}
    assert int(result["graph_fusion"]["attention"]["effect_times"]) == 2  # one per layer
    assert [g["name"] for g in result["groups"]] == [g["name"] for g in explained["groups"]]


def test_ops_json():
    r = braze("ops", "--json")
    data = json.loads(r.stdout)
    assert {"Conv", "MatMul", "Reshape", "Softmax"} <= set(data["onnx"])
    assert {"nn.conv", "math.add", "tensor.reshape", "fuse.group"} <= set(data["ir"])


@pytest.mark.parametrize("args, message", [
    (["import", "/nonexistent.onnx"], "/nonexistent.onnx: no such file"),
    (["opt", "-p", "nosuchpass"], "unknown pass 'nosuchpass'"),
    (["opt", "-p", "dce"], "<stdin>:1:1: expected 'func.func'"),
])
def test_errors_are_one_line_without_traceback(args, message):
    r = braze(*args, stdin="")
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    assert r.stderr.startswith("error: ") and message in r.stderr


def test_truncated_model_names_the_file(tmp_path):
    bad = tmp_path / "cut.onnx"
    bad.write_bytes(tiny("bert-tiny").read_bytes()[:5000])
    r = braze("import", bad)
    assert r.returncode == 1 and str(bad) in r.stderr and "Traceback" not in r.stderr


def test_dynamic_dimension_points_to_input_shape(tmp_path):
    import onnx

    model = onnx.parser.parse_model('<ir_version: 8, opset_import: ["" : 17]> g (float[N,3] x) => (float[N,3] y) { y = Relu(x) }')
    path = tmp_path / "dyn.onnx"
    onnx.save(model, path)
    r = braze("import", path)
    assert r.returncode == 1 and "'x'" in r.stderr and "'N'" in r.stderr and "--input-shape x=Nx3" in r.stderr
    r = braze("import", path, "--input-shape", "x=4x3")
    assert r.returncode == 0 and "tensor<4x3xf32>" in r.stdout


def test_unsupported_ops_are_listed_together(tmp_path):
    import onnx

    model = onnx.parser.parse_model('<ir_version: 8, opset_import: ["" : 17]> g (float[2] x) => (float[2] y) { a = Det(x)\n b = Det(a)\n y = Celu2(b) }')
    path = tmp_path / "u.onnx"
    onnx.save(model, path)
    r = braze("import", path)
    assert r.returncode == 1
    assert "Det: Det_0, Det_1" in r.stderr and "Celu2: Celu2_2" in r.stderr


def test_demo_runs():
    r = braze("demo")
    assert r.returncode == 0, r.stderr
    assert "mobilenetv2-tiny" in r.stdout
