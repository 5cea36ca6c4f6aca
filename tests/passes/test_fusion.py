"""The fuse pass: manual rules, controls, explain, convexity, and numerics
on the tiny models (the golden files tests/golden/passes/fuse_*.mlir show
the IR per level and per control)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import braze
from braze.errors import FusionRuleError, FusionRuleWarning, PassError
from braze.ir import Block, Func, Module, Operation, TensorType, parse_module, print_module, verify
from braze.ir.interpret import interpret
from braze.passes import PassManager
from braze.passes.fusion import REASONS, FusionOptions, PatternRule, explain, fuse_module, load_rules, parse_rules
from braze.passes.fusion.graph import Graph
from cases import MLP
from models import DATA, TINY, tiny

ATTENTION = {"name": "self_attention", "ops": ["MatMul", "Add", "Softmax", "IsNaN", "Where", "MatMul"]}

# A diamond: a -> t -> c and a -> c. Fusing a and c alone would leave the
# transpose t both after and before the group.
DIAMOND = """
func.func @main(%x: tensor<4x4xf32>) -> (tensor<4x4xf32> {name = "y"}) {
  %0 = "math.relu"(%x) : (tensor<4x4xf32>) -> tensor<4x4xf32> loc("a" : "Relu")
  %1 = "tensor.transpose"(%0) {perm = [1, 0]} : (tensor<4x4xf32>) -> tensor<4x4xf32> loc("t" : "Transpose")
  %2 = "math.add"(%1, %0) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> loc("c" : "Add")
  "func.return"(%2) : (tensor<4x4xf32>) -> ()
}
"""


def load(name: str) -> Module:
    module = braze.load_onnx(tiny(name))
    PassManager.parse("canonicalize,cse,dce").run(module)
    return module


def groups(module: Module) -> list[Operation]:
    return [op for op in module.main.body.ops if op.name == "fuse.group"]


def refused(report, reason: str) -> list[list[str]]:
    return [r.nodes for r in report.refused if r.reason == reason]


# --- the tiny models ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fused():
    """{(model, level): (module, report)} for every tiny model and level."""
    out = {}
    for name in TINY:
        for level in range(4):
            module = load(name)
            out[name, level] = module, fuse_module(module, level=level)
    return out


@pytest.fixture(scope="module")
def references(fused):
    """{model: (inputs, outputs of the unfused module)} through the interpreter."""
    out = {}
    for name in TINY:
        inputs = dict(np.load(DATA / f"{name}.inputs.npz"))
        out[name] = inputs, interpret(fused[name, 0][0], inputs)
    return out


@pytest.mark.parametrize("name", TINY)
def test_kernel_counts_fall_with_the_level(fused, name):
    kernels = [fused[name, level][1].kernels for level in range(4)]
    assert kernels[0] == fused[name, 0][1].ops_before  # level 0: one kernel per op
    assert kernels[0] > kernels[1] > kernels[2] >= kernels[3], kernels


@pytest.mark.parametrize("name", TINY)
@pytest.mark.parametrize("level", [1, 2, 3])
def test_fused_models_verify_round_trip_and_compute_the_same(fused, references, name, level):
    module, report = fused[name, level]
    verify(module)
    text = print_module(module)
    assert print_module(parse_module(text)) == text
    assert report.kernels == sum(1 for op in module.main.body.ops if op.name not in ("const", "func.return"))
    inputs, reference = references[name]
    for key, value in interpret(module, inputs).items():
        np.testing.assert_array_equal(value, reference[key], err_msg=f"{name} level {level}: {key}")


def test_level_0_makes_no_groups_and_says_why(fused):
    module, report = fused["bert-tiny", 0]
    assert not groups(module) and not report.groups
    assert {r.reason for r in report.refused} == {"level"}


def test_levels_add_their_rules_on_bert(fused):
    rules = {level: {g.rule for g in fused["bert-tiny", level][1].groups} for level in (1, 2, 3)}
    assert rules[1] == {"matmul_epilogue", "elemwise_chain"}
    assert {"gelu_epilogue", "norm_epilogue", "injective_producer"} <= rules[2]
    assert {"attention", "horizontal_matmul"} <= rules[3]
    # level 1 explains what the higher levels would do
    level1 = fused["bert-tiny", 1][1]
    assert [r.rule for r in level1.refused if r.reason == "level"].count("attention") == 2


def test_multi_output_groups_only_at_level_3(fused):
    for name in TINY:
        for level in (1, 2):
            module = fused[name, level][0]
            returned = {id(v) for v in module.main.outputs}
            for g in groups(module):
                live = [r for r in g.results if any(u.name != "func.return" for u in r.users())]
                assert len(live) <= 1 or all(id(r) in returned for r in g.results), g.attributes["name"]
    assert any(len(g.results) > 1 for g in groups(fused["vit-tiny", 3][0]))


def test_group_names_are_readable_and_unique(fused):
    names = [g.attributes["name"] for g in groups(fused["mobilenetv2-tiny", 1][0])]
    assert "node_Conv_809.conv_epilogue" in names
    assert len(names) == len(set(names))


# --- manual rules -------------------------------------------------------------------------------
def test_self_attention_pattern_applies_once_per_bert_layer():
    module = load("bert-tiny")
    report = fuse_module(module, level=2, rules=[ATTENTION])
    assert (report.rules["self_attention"].matched, report.rules["self_attention"].applied) == (2, 2)
    mine = [g for g in report.groups if g.rule == "self_attention"]
    assert len(mine) == 2
    assert all(g.op_types == ["MatMul", "Add", "Softmax", "IsNaN", "Where"] and len(g.ops) == 6 for g in mine)
    assert report.rules["attention"].applied == 0  # manual rules win


def test_rules_file_patterns_dags_and_explicit_groups(tmp_path):
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"rules": [
        {"name": "guarded_softmax", "ops": [{"op": "Softmax"}, {"op": "IsNaN", "inputs": [0]},
                                           {"op": "Where", "inputs": [1, 0]}]},
        {"name": "embeddings", "nodes": ["node_embedding", "node_embedding_1", "node_add"]},
    ]}))
    module = load("bert-tiny")
    PassManager.parse(f'fuse{{level=1 rules="{path}"}}').run(module)
    report = module.fusion_report
    by_rule = {g.rule: g for g in report.groups}
    assert by_rule["embeddings"].nodes == ["node_embedding", "node_embedding_1", "node_add"]
    assert report.rules["guarded_softmax"].applied == 2
    assert [g.ops for g in report.groups if g.rule == "guarded_softmax"][0] == \
        ["nn.softmax", "math.isnan", "math.where"]


def test_manual_group_is_not_extended_by_automatic_rules():
    module = parse_module(MLP)
    report = fuse_module(module, level=1, rules=[{"name": "mm_bias", "ops": ["MatMul", "Add"]}])
    assert [(g.name, g.nodes) for g in report.groups] == [("fc0.mm_bias", ["fc0", "bias0"]),
                                                          ("fc1.mm_bias", ["fc1", "bias1"])]


def test_manual_rules_that_cannot_apply_are_refused_with_a_reason():
    module = parse_module(DIAMOND)
    with pytest.warns(FusionRuleWarning) as caught:
        report = fuse_module(module, level=1, rules=[
            {"name": "typo", "ops": ["Relu", "Tanspose"]},
            {"name": "ghost", "nodes": ["a", "nowhere"]},
            {"name": "not_convex", "nodes": ["a", "c"]},
            {"name": "first", "nodes": ["a", "t"]},
            {"name": "second", "ops": ["Transpose", "Add"]},
        ])
    # the two that can never apply on this graph are also warnings naming the rule and what it names
    assert sorted(str(w.message).split("'")[1] for w in caught) == ["ghost", "typo"]
    assert any("'Tanspose'" in str(w.message) for w in caught) and any("nowhere" in str(w.message) for w in caught)
    with pytest.raises(FusionRuleError, match="manual rule 'typo' can never apply"):
        fuse_module(parse_module(DIAMOND), level=1, strict_rules=True, rules=[{"name": "typo", "ops": ["Relu", "Tanspose"]}])
    reasons = {r.rule: (r.reason, r.nodes) for r in report.refused}
    assert reasons["typo"][0] == "unknown_op_type"
    assert reasons["ghost"] == ("unknown_node", ["nowhere"])
    assert reasons["not_convex"] == ("would_create_cycle", ["a", "c"])
    assert reasons["second"] == ("overlap", ["t", "c"])
    assert [g.name for g in report.groups] == ["a.first"]


def test_manual_rules_obey_level_0_and_switches():
    report = fuse_module(parse_module(MLP), level=0, rules=[{"name": "mine", "nodes": ["fc0", "bias0"]}])
    assert refused(report, "level") and not report.groups
    # (a refusal is dropped when another rule joins the same nodes anyway)
    report = fuse_module(parse_module(MLP), level=1, switch={"mine": "off", "matmul_epilogue": "off"},
                         rules=[{"name": "mine", "nodes": ["fc0", "bias0"]}])
    assert ("mine", ["fc0", "bias0"]) in [(r.rule, r.nodes) for r in report.refused if r.reason == "switched_off"]
    assert report.rules["mine"].on is False


@pytest.mark.parametrize("data, message", [
    ({"rules": [{"ops": ["MatMul", "Add"]}]}, "rule #0: needs a \"name\""),
    ([{"name": "r", "ops": ["MatMul"]}], "rule 'r': \"ops\" must list at least two"),
    ([{"name": "r", "ops": ["MatMul", "Add"], "nodes": ["n"]}], "rule 'r': needs exactly one of"),
    ([{"name": "r", "ops": ["MatMul", {"op": "Add", "inputs": [3]}]}], "rule 'r': ops[1].inputs"),
    ([{"name": "r", "nodes": []}], "rule 'r': \"nodes\" must be a non-empty list"),
    ([{"name": "r", "pattern": ["A"]}], "rule 'r': unknown key(s) ['pattern']"),
    ([{"name": "r", "nodes": ["a"]}, {"name": "r", "nodes": ["b"]}], "rule 'r' is defined 2 times"),
    ({"groups": []}, "expected {\"rules\": [...]}"),
])
def test_invalid_rules_are_typed_errors_naming_the_rule(data, message):
    with pytest.raises(FusionRuleError) as info:
        parse_rules(data, "my_rules.json")
    assert message in str(info.value) and "my_rules.json" in str(info.value)


def test_invalid_rules_files_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(FusionRuleError, match="bad.json: not valid JSON"):
        load_rules(bad)
    with pytest.raises(FusionRuleError, match="missing.json: cannot read"):
        load_rules(tmp_path / "missing.json")
    with pytest.raises(FusionRuleError, match="name of a built-in rule"):
        fuse_module(parse_module(MLP), rules=[{"name": "attention", "nodes": ["fc0"]}])


def test_yaml_rules_file(tmp_path):
    pytest.importorskip("yaml")
    path = tmp_path / "rules.yaml"
    path.write_text("rules:\n  - name: mm_bias\n    ops: [MatMul, Add]\n")
    assert load_rules(path) == [PatternRule("mm_bias", parse_rules([{"name": "x", "ops": ["MatMul", "Add"]}])[0].ops)]


# --- convexity ---------------------------------------------------------------------------------
def test_diamond_merge_is_refused_as_a_cycle():
    module = parse_module(DIAMOND)
    graph = Graph(module.main)
    assert not graph.is_convex({0, 2}) and graph.is_convex({0, 1, 2}) and graph.is_convex({1, 2})
    report = fuse_module(module, level=1)
    assert refused(report, "would_create_cycle") == [["a", "c"]]
    assert not report.groups  # the transpose needs level 2 ...
    report = fuse_module(parse_module(DIAMOND), level=2)
    assert [g.nodes for g in report.groups] == [["a", "t", "c"]]  # ... which makes the diamond one kernel


# A conv and its SiLU, x * sigmoid(x): the Mul reads the conv and the Sigmoid.
SILU = """
func.func @main(%x: tensor<1x4x6x6xf32>) -> (tensor<1x4x6x6xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4x1x1xf32>
  %0 = "nn.conv"(%x, %w) {dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x4x6x6xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x6x6xf32> loc("conv" : "Conv")
  %1 = "math.sigmoid"(%0) : (tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32> loc("sig" : "Sigmoid")
  %2 = "math.mul"(%0, %1) : (tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32> loc("mul" : "Mul")
  "func.return"(%2) : (tensor<1x4x6x6xf32>) -> ()
}
"""


def test_an_epilogue_that_closes_a_diamond_joins_in_one_merge():
    """Conv + Sigmoid alone has two outputs, Conv + Mul a path out and back
    in: the Mul closes the diamond, so the three join together, at level 1."""
    report = fuse_module(parse_module(SILU), level=1)
    assert [g.nodes for g in report.groups] == [["conv", "sig", "mul"]]
    assert not report.refused


# --- controls ----------------------------------------------------------------------------------
def test_controls_from_python_and_their_reason_codes(tmp_path):
    switch = tmp_path / "switch.json"
    switch.write_text(json.dumps({"ALL": "on", "matmul_epilogue": "off"}))
    cases = {
        "blacklisted": dict(no_fuse=["Relu"]),
        "not_whitelisted": dict(only_fuse=["MatMul", "Add"]),
        "out_of_scope": dict(scope="re:1$"),
        "switched_off": dict(switch=(str(switch),)),
        "max_group_size": dict(max_group_size=2),
        "memory_limit": dict(memory_limit=100),
    }
    for reason, options in cases.items():
        report = fuse_module(parse_module(MLP), level=1, **options)
        assert refused(report, reason), (reason, report.table())
    report = fuse_module(parse_module(MLP), level=1, skip_nodes=["bias1"])
    assert {tuple(n) for n in refused(report, "blacklisted")} >= {("fc1", "bias1")}


def test_dynamic_shapes_are_refused():
    block = Block([TensorType((-1, 4), "f32")])
    relu = block.append(Operation("math.relu", [block.args[0]], [TensorType((-1, 4), "f32")]))
    neg = block.append(Operation("math.neg", [relu.result], [TensorType((-1, 4), "f32")]))
    block.append(Operation("func.return", [neg.result]))
    report = fuse_module(Module([Func("main", block)]), level=1)
    assert [r.reason for r in report.refused] == ["dynamic_shape"] and not report.groups


def test_switch_errors_and_pipeline_strings():
    with pytest.raises(FusionRuleError, match="unknown rule"):
        fuse_module(parse_module(MLP), switch={"atention": "off"})
    with pytest.raises(FusionRuleError, match="must be on or off"):
        fuse_module(parse_module(MLP), switch=["attention=maybe"])
    with pytest.raises(PassError, match="fusion level must be 0 to 3"):
        PassManager.parse("fuse{level=7}")
    text = "fuse{level=3 no-fuse=Slice,Concat scope=encoder.layer.[0-5] switch=ALL=on,attention=off}"
    assert str(PassManager.parse(text)) == text
    assert str(PassManager.parse("fuse{level=2}")) == "fuse"
    assert FusionOptions(switch={"ALL": True}).switch == ("ALL=on",)


# --- explain -----------------------------------------------------------------------------------
def test_explain_record_has_the_design_keys():
    module = load("bert-tiny")
    report = explain(module, level=1, rules=[ATTENTION])
    assert module.fusion_report is report
    d = json.loads(report.to_json())
    assert {"ops_before", "kernels", "groups", "refused", "rules"} <= set(d)
    assert d["ops_before"] == 93 and d["kernels"] < 93
    assert all({"name", "rule", "nodes"} <= set(g) for g in d["groups"])
    assert all({"nodes", "reason"} <= set(r) and r["reason"] in REASONS for r in d["refused"])
    assert all({"matched", "applied"} <= set(s) for s in d["rules"].values())
    assert d["rules"]["self_attention"] == {"level": 1, "source": "manual", "on": True, "matched": 2, "applied": 2}
    text = report.table()
    assert "93 ops -> " in text and "node_MatMul_90.self_attention" in text and "refused merges" in text


def test_pass_manager_leaves_the_report_on_the_module():
    module = parse_module(MLP)
    PassManager.parse("fuse{level=1}").run(module)
    assert [g.name for g in module.fusion_report.groups] == ["fc0.matmul_epilogue", "fc1.matmul_epilogue"]
    assert module.fusion_report.kernels == 2


# --- docs/fusion.md stays true -------------------------------------------------------------------
def test_docs_name_every_rule_and_reason_and_the_kernel_counts(fused):
    from braze.passes.fusion import RULES

    text = (DATA.parent.parent / "docs" / "fusion.md").read_text()
    for name in [r.name for r in RULES] + list(REASONS):
        assert f"`{name}`" in text, name
    for name in TINY:
        counts = " | ".join(str(fused[name, level][1].kernels) for level in range(4))
        assert f"| {name} | {fused[name, 0][1].ops_before} | {counts} |" in text, name
