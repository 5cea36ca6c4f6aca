"""Fused compiles: numerics at every level, rollback of a group TVM cannot
build, and `braze explain` from the command line."""

import json
import subprocess
import sys

import numpy as np
import pytest

from braze.codegen import registry as lowering_registry
from braze.compiler import compile as braze_compile
from models import DATA, TINY, tiny
from models import assert_close


@pytest.mark.parametrize("level", [1, 2, 3])
@pytest.mark.parametrize("name", TINY)
def test_tiny_models_at_every_level(name, level):
    artifact = braze_compile(str(tiny(name)), level=level)
    feeds = dict(np.load(DATA / f"{name}.inputs.npz"))
    assert_close(artifact.run(feeds), dict(np.load(DATA / f"{name}.ref.npz")))
    assert artifact.manifest["fusion"]["level"] == level
    assert any(len(k["ops"]) > 1 for k in artifact.kernels)


def test_kernel_counts_fall_with_the_level():
    counts = [len(braze_compile(str(tiny("bert-tiny")), level=n).kernels) for n in range(4)]
    assert counts[0] > counts[1] > counts[2] >= counts[3]


def test_a_group_tvm_cannot_build_is_split_back(monkeypatch):
    """Rollback: the group fails in codegen, its ops become single kernels,
    the compile finishes and records codegen_failed."""
    real = lowering_registry.LOWERINGS["math.relu"]
    calls = {"n": 0}

    def relu_fails_inside_groups(x):
        calls["n"] += 1
        if not isinstance(x.op, __import__("tvm").te.PlaceholderOp):
            raise RuntimeError("forced failure for the test")
        return real(x)

    monkeypatch.setitem(lowering_registry.LOWERINGS, "math.relu", relu_fails_inside_groups)
    monkeypatch.delenv("BRAZE_CACHE_DIR", raising=False)
    from onnx_check import parse

    model = parse('<ir_version: 8, opset_import: ["" : 17]> g (float[2,3] x, float[3] b) => (float[2,3] y) '
                  '{ t = Add(x, b)\n y = Relu(t) }')
    artifact = braze_compile(model, level=1)
    assert [k["ops"] for k in artifact.kernels] == [["math.add"], ["math.relu"]]
    refused = artifact.manifest["fusion"]["refused"]
    assert [r["reason"] for r in refused if r["reason"] == "codegen_failed"] == ["codegen_failed"]
    assert "forced failure" in [r for r in refused if r["reason"] == "codegen_failed"][0]["detail"]
    x, b = np.ones((2, 3), "float32"), -np.arange(3, dtype="float32")
    np.testing.assert_array_equal(artifact.run({"x": x, "b": b})["y"], np.maximum(x + b, 0))


def braze(*args):
    return subprocess.run([sys.executable, "-m", "braze.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def test_explain_json_keys_and_controls():
    r = braze("explain", tiny("bert-tiny"), "--json", "--level", "2")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert {"ops_before", "kernels", "groups", "refused", "rules"} <= set(data)
    assert data["kernels"] < data["ops_before"]
    assert all({"name", "rule", "nodes"} <= set(g) for g in data["groups"])
    assert all({"nodes", "reason"} <= set(x) for x in data["refused"])
    r = braze("explain", tiny("bert-tiny"), "--json", "--no-fuse", "Softmax,MatMul")
    data = json.loads(r.stdout)
    assert any(x["reason"] == "blacklisted" for x in data["refused"])
    # by ONNX op type: the pooler's Gemm (also an nn.matmul in braze) may still fuse
    assert not any({"Softmax", "MatMul"} & set(g["op_types"]) for g in data["groups"])


def test_explain_table_and_bad_rules_file(tmp_path):
    r = braze("explain", tiny("mobilenetv2-tiny"), "--level", "1")
    assert r.returncode == 0 and "kernels" in r.stdout
    bad = tmp_path / "rules.json"
    bad.write_text('[{"name": "broken", "ops": 7}]')
    r = braze("explain", tiny("bert-tiny"), "--rules", bad)
    assert r.returncode == 1 and "broken" in r.stderr and "Traceback" not in r.stderr


def test_explain_draws_dot_and_html(tmp_path):
    r = braze("explain", tiny("bert-tiny"), "--dot", tmp_path / "g.dot", "--html", tmp_path / "g.html")
    assert r.returncode == 0, r.stderr
    dot, html = (tmp_path / "g.dot").read_text(), (tmp_path / "g.html").read_text()
    assert dot.startswith("digraph") and "subgraph cluster_" in dot
    assert html.startswith("<!DOCTYPE html>")
    assert "injective_producer" in html  # a level-2 rule of bert-tiny's groups


def test_per_group_verification_names_the_group_that_drifts(monkeypatch):
    from tvm import te

    from braze.compiler import fuse_only
    from braze.measure import verify_groups

    feeds = dict(np.load(DATA / "bert-tiny.inputs.npz"))
    module, report = fuse_only(str(tiny("bert-tiny")), level=2)
    rows = verify_groups(module, feeds)
    assert len(rows) == len(report.groups) and all(r.max_rel < 1e-5 for r in rows)

    real = lowering_registry.LOWERINGS["math.erf"]  # only inside the GELU groups

    def wrong_erf(x):
        return te.compute(x.shape, lambda *i: real(x)(*i) * 1.01, name="bad_erf")

    monkeypatch.setitem(lowering_registry.LOWERINGS, "math.erf", wrong_erf)
    module, _ = fuse_only(str(tiny("bert-tiny")), level=2)
    drifting = [r.name for r in verify_groups(module, feeds) if r.max_rel > 1e-4]
    assert drifting and all("gelu" in name for name in drifting), drifting


def test_verify_per_group_cli():
    r = braze("verify", tiny("mobilenetv2-tiny"), "--per-group", "--json", "-q", "--level", "1")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["ok"] and data["groups"] and set(data["groups"][0]) == {"name", "rule", "nodes", "max_abs", "max_rel"}
