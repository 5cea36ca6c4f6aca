"""The raise-attention pass: level 3 raises exported attention to one
``nn.attention`` op; below level 3, switched off or under a control it stays
decomposed (the exact IR is in tests/golden/passes/raise_attention.mlir)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import helper

import braze
from braze.compiler import compile as braze_compile
from braze.compiler import fuse_only, pipeline
from braze.ir import print_module
from braze.ir.interpret import interpret
from braze.passes import PassManager, parse_pass
from braze.passes.attention import RaiseAttention
from models import DATA, tiny
from onnx_check import float_model, run_ort
from models import assert_close

LAYERS = 2  # attention blocks in bert-tiny and vit-tiny


def ops(module, name: str) -> list:
    return [op for op in module.walk() if op.name == name]


# --- the tiny models -------------------------------------------------------------------------
@pytest.mark.parametrize("name, heads, hidden, mask, transposes", [
    ("bert-tiny", 2, (1, 32, 128), [(1, 1, 32, 32)], 0),
    ("vit-tiny", 3, (1, 17, 192), [], 1),  # the patch embedding's
])
def test_level_3_raises_one_attention_per_layer(name, heads, hidden, mask, transposes):
    module, report = fuse_only(tiny(name), level=3)
    text = print_module(module)
    assert "nn.softmax" not in text and "math.isnan" not in text and text.count('"tensor.transpose"') == transposes
    found = ops(module, "nn.attention")
    assert [str(op.loc) for op in found] == [f"node_scaled_dot_product_attention{n} (Attention)" for n in ("", "_1")]
    for op in found:  # q, k and v as the projections wrote them; the 3-D result
        scale = op.attributes.pop("scale")  # (d ** -0.25 in float32) ** 2
        assert scale == pytest.approx(0.125, rel=1e-7)
        nodes = op.attributes.pop("braze.raised_from")  # the ONNX nodes it replaced, as explain lists them
        assert "node_Softmax" in " ".join(nodes) and len(set(nodes)) == len(nodes)
        assert op.attributes == {"q_heads": heads, "kv_heads": heads, "braze.raised_by": "attention"}
        assert [v.type.shape for v in op.operands] == [hidden] * 3 + mask and op.result.type.shape == hidden
    rules = report.to_dict()["rules"]["attention"]  # what explain --json says
    assert (rules["matched"], rules["applied"]) == (LAYERS, LAYERS)
    raised = report.to_dict()["raised"]
    assert [(r["rule"], r["op"]) for r in raised] == [("attention", "nn.attention")] * LAYERS


@pytest.mark.parametrize("level, fusion, reason", [
    (2, {}, "level"),
    (3, {"switch": ["attention=off"]}, "switched_off"),
    (3, {"no_fuse": ["Softmax"]}, "blacklisted"),
])
def test_decomposed_below_level_3_or_when_kept(level, fusion, reason):
    module, report = fuse_only(tiny("bert-tiny"), level=level, fusion=fusion)
    assert not ops(module, "nn.attention") and len(ops(module, "nn.softmax")) == LAYERS
    assert [r.rule for r in report.refused if r.reason == reason].count("attention") == LAYERS
    assert report.rules["attention"].applied == 0


@pytest.mark.parametrize("name", ["bert-tiny", "vit-tiny"])
def test_level_3_matches_the_reference(name):
    artifact = braze_compile(str(tiny(name)), level=3)
    assert sum("nn.attention" in k["ops"] for k in artifact.manifest["kernels"]) == LAYERS
    assert_close(artifact.run(dict(np.load(DATA / f"{name}.inputs.npz"))), dict(np.load(DATA / f"{name}.ref.npz")))


def test_manual_rules_win(tmp_path):
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps([{"name": "self_attention",
                                  "ops": ["MatMul", "Add", "Softmax", "IsNaN", "Where", "MatMul"]}]))
    module, report = fuse_only(tiny("bert-tiny"), level=3, fusion={"rules": str(rules)})
    assert not ops(module, "nn.attention")
    assert report.rules["self_attention"].applied == LAYERS


# --- a small exported pattern ----------------------------------------------------------------
B, S, H, D = 2, 5, 2, 4


def node(op_type: str, inputs: list[str], output: str, **attrs):
    return helper.make_node(op_type, inputs, [output], name=output, **attrs)  # named after its result


def attention_model(k_input: str = "k", outputs: tuple[str, ...] = ("y",)):
    """Q and V projected from x; K a 4-D input (``k``: [B, H, S, D], or
    ``kt``: K^T itself); scale by Div after the scores MatMul; a mask input."""
    rng = np.random.default_rng(0)
    weights = {"wq": rng.standard_normal((H * D, H * D)).astype(np.float32),
               "wv": rng.standard_normal((H * D, H * D)).astype(np.float32),
               "c": np.array(np.sqrt(D), np.float32), "split": np.array([B, S, H, D]),
               "merge": np.array([B, S, H * D])}
    heads = [0, 2, 1, 3]
    nodes = [
        node("MatMul", ["x", "wq"], "qp"), node("Reshape", ["qp", "split"], "qs"),
        node("Transpose", ["qs"], "q", perm=heads),
        *([] if k_input == "kt" else [node("Transpose", ["k"], "kt", perm=[0, 1, 3, 2])]),
        node("MatMul", ["q", "kt"], "s"), node("Div", ["s", "c"], "d"), node("Add", ["d", "mask"], "a"),
        node("Softmax", ["a"], "p", axis=-1),
        node("MatMul", ["x", "wv"], "vp"), node("Reshape", ["vp", "split"], "vs"),
        node("Transpose", ["vs"], "v", perm=heads),
        node("MatMul", ["p", "v"], "o"), node("Transpose", ["o"], "ot", perm=heads),
        node("Reshape", ["ot", "merge"], "y"),
    ]
    k_shape = [B, H, D, S] if k_input == "kt" else [B, H, S, D]
    inputs = [("x", [B, S, H * D]), (k_input, k_shape), ("mask", [B, 1, 1, S])]
    return float_model(nodes, inputs, list(outputs), weights)


def feeds(k_input: str = "k") -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    k_shape = (B, H, D, S) if k_input == "kt" else (B, H, S, D)
    mask = np.where(rng.random((B, 1, 1, S)) < 0.3, -1e9, 0.0).astype(np.float32)
    return {"x": rng.standard_normal((B, S, H * D)).astype(np.float32),
            k_input: rng.standard_normal(k_shape).astype(np.float32), "mask": mask}


@pytest.mark.parametrize("k_input", ["k", "kt"])
def test_small_model_raises_and_matches_onnxruntime(k_input):
    model = attention_model(k_input)
    module = braze.load_onnx(model)
    pipeline(3).run(module)
    (op,) = ops(module, "nn.attention")
    assert [v.type.rank for v in op.operands] == [3, 4, 3, 4]  # q, v from the projections; K in 4-D; the mask
    assert op.attributes["scale"] == pytest.approx(D ** -0.5)
    assert len(ops(module, "tensor.transpose")) == (k_input == "kt")  # K^T alone: made K again
    expected = run_ort(model, feeds(k_input))
    artifact = braze_compile(model, level=3)
    assert_close(artifact.run(feeds(k_input)), expected)


@pytest.mark.parametrize("fusion", [{"skip_nodes": ["p"]}, {"scope": "q*"}, {"no_fuse": ["Div"]},
                                    {"only_fuse": ["MatMul", "Softmax"]},
                                    {"switch": {"ALL": "on", "attention": "off"}}])
def test_a_control_on_any_member_keeps_it_decomposed(fusion):
    module = braze.load_onnx(attention_model())
    pipeline(3, fusion).run(module)
    assert not ops(module, "nn.attention") and ops(module, "nn.softmax")


def test_braze_no_fuse_attribute_keeps_it_decomposed():
    module = braze.load_onnx(attention_model())
    PassManager.parse("canonicalize").run(module)
    ops(module, "math.div")[0].attributes["braze.no_fuse"] = True
    PassManager([RaiseAttention()]).run(module)
    assert not ops(module, "nn.attention")


def test_a_value_with_other_readers_is_not_raised_away():
    """The probabilities are a graph output: the pattern stays as it is."""
    model = attention_model(outputs=("y", "p"))
    module, report = fuse_only(model, level=3)
    assert not ops(module, "nn.attention") and report.rules["attention"].applied == 0
    np.testing.assert_allclose(interpret(module, feeds())["p"], run_ort(model, feeds())["p"], atol=1e-6)


def test_pass_options_round_trip():
    p = RaiseAttention(no_fuse=["Slice"], switch={"attention": "off"})
    assert str(p) == "raise-attention{no-fuse=Slice switch=attention=off}"
    assert parse_pass(str(p)) == p
    assert str(pipeline(3)).startswith("fold-quant,canonicalize,cse,dce,raise-attention,")
    assert "raise-attention" not in str(pipeline(2))
