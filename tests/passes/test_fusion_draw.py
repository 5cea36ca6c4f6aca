"""Drawing the fused graph (braze/passes/fusion/draw.py): the DOT is checked
by a small parser here (and rendered when Graphviz's ``dot`` is installed),
the HTML by html.parser with a tag-balance check."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from braze.frontend import import_onnx
from braze.ir import parse_module
from braze.passes import PassManager
from braze.passes.fusion import fuse_module
from braze.passes.fusion.draw import rule_colour, to_dot, to_html
from models import tiny
from cases import MLP as FUSION_MLP

MODELS = ["bert-tiny", "mobilenetv2-tiny"]
NOT_NODES = ("const", "fuse.group", "fuse.yield", "func.return")
ODD = 'a<b>&"c"'

# Two matmul layers; the first node's name needs escaping in DOT and HTML.
# With no_fuse=Tanh, act1 stays alone and its merge is refused.
MLP = FUSION_MLP.replace('loc("fc0"', 'loc("a<b>&\\"c\\""')


@pytest.fixture(scope="module", params=MODELS)
def fused(request):
    module = import_onnx(tiny(request.param))
    PassManager.parse("canonicalize,cse,dce").run(module)
    return module, fuse_module(module, level=2)


@pytest.fixture
def mlp():
    module = parse_module(MLP)
    return module, fuse_module(module, level=1, no_fuse=["Tanh"])


# --- a check of the DOT we write, without Graphviz -----------------------------------------
TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|->|[{}\[\];=,]|[\w.]+|\S')


def parse_dot(text: str):
    """Tokens, braces and statements of a digraph. Returns ({node id: attrs},
    [(from, to)], [cluster ids]); fails on anything it does not expect."""
    tokens = TOKEN.findall(text)
    bad = [t for t in tokens if not re.fullmatch(r'->|[{}\[\];=,]|[\w.]+|".*"', t, re.S)]
    assert not bad, f"unexpected tokens (an unclosed string?) {bad[:5]}"
    assert tokens[:3] == ["digraph", "fused", "{"] and tokens[-1] == "}"
    nodes, edges, clusters, depth, i = {}, [], [], 1, 3
    while i < len(tokens) - 1:
        t = tokens[i]
        depth += {"{": 1, "}": -1}.get(t, 0)
        assert depth >= 1, f"token {i} closes the graph early"
        if t == "->":
            edges.append((tokens[i - 1], tokens[i + 1]))
        elif t == "subgraph":
            assert tokens[i + 1].startswith("cluster_") and tokens[i + 2] == "{"
            clusters.append(tokens[i + 1])
        elif t == "[":
            end = tokens.index("]", i)
            if tokens[i - 1] not in ("node", "edge") and tokens[i - 2] != "->":
                assert tokens[i - 1] not in nodes, f"{tokens[i - 1]} declared twice"
                nodes[tokens[i - 1]] = attributes(tokens[i + 1:end])
            i = end
        i += 1
    assert depth == 1, "unbalanced braces"
    return nodes, edges, clusters


def attributes(tokens: list[str]) -> dict[str, str]:
    """``key = value`` pairs separated by commas; DOT strings read as JSON strings."""
    out = {}
    for k in range(0, len(tokens), 4):
        key, eq, value = tokens[k:k + 3]
        assert eq == "=" and tokens[k + 3:k + 4] in ([], [","]), tokens
        out[key] = json.loads(value) if value.startswith('"') else value
    return out


def leaf_ops(module):
    return [op for op in module.walk() if op.name not in NOT_NODES]


def dot_label(op) -> str:
    return f"{op.loc.name}\n{op.loc.op_type or op.name}" if op.loc else op.name


# --- DOT -------------------------------------------------------------------------------------
def test_dot_has_a_cluster_per_group_and_a_node_per_op(fused):
    module, report = fused
    text = to_dot(module)
    nodes, edges, clusters = parse_dot(text)
    assert len(clusters) == len(report.groups) == sum(op.name == "fuse.group" for op in module.main.body.ops)
    for g in report.groups:
        assert json.dumps(f"{g.name}\n{g.rule}") in text  # the cluster's label
    ops = {k: v for k, v in nodes.items() if k.startswith("op")}
    assert sorted(v["label"] for v in ops.values()) == sorted(dot_label(op) for op in leaf_ops(module))
    assert not any(k.startswith("c") for k in nodes), "constants are left out by default"
    assert all(a in nodes and b in nodes for a, b in edges)
    touched = {n for e in edges for n in e}
    assert set(ops) <= touched, "every op reads or feeds something"
    outputs = [k for k in nodes if k.startswith("out")]
    assert len(outputs) == len(module.main.outputs)
    assert all(sum(b == out for _, b in edges) == 1 for out in outputs)


def test_dot_with_constants_is_valid(fused):
    module, _ = fused
    nodes, edges, _ = parse_dot(to_dot(module, consts=True))
    notes = [k for k in nodes if k.startswith("c")]
    assert notes and all(nodes[k]["shape"] == "note" for k in notes)
    assert all(a in nodes and b in nodes for a, b in edges)


def test_dot_edges_connect_member_ops(mlp):
    module, _ = mlp
    nodes, edges, clusters = parse_dot(to_dot(module))
    name = {k: v["label"].split("\n")[0] for k, v in nodes.items()}
    assert len(clusters) == 2
    assert sorted((name[a], name[b]) for a, b in edges) == sorted([
        ("x", ODD), (ODD, "bias0"), ("bias0", "act0"), ("act0", "fc1"),
        ("fc1", "bias1"), ("bias1", "act1"), ("act1", "y")])
    assert nodes[next(k for k in nodes if name[k] == "act1")]["label"] == "act1\nTanh"

    nodes, edges, _ = parse_dot(to_dot(module, consts=True))
    name = {k: v["label"].split("\n")[0] for k, v in nodes.items()}
    from_consts = sorted((name[a], name[b]) for a, b in edges if a.startswith("c"))
    # Constants feeding a group are drawn; bias1 is in a group, act1 reads none.
    assert from_consts == sorted([("w", ODD), ("b", "bias0"), ("w", "fc1"), ("b", "bias1")])


needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="Graphviz's dot is not installed: only parse_dot checks the DOT")


def render(text: str) -> None:
    done = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "<svg" in done.stdout and "syntax error" not in done.stderr


@needs_dot
def test_dot_renders(fused):
    module, _ = fused
    render(to_dot(module))
    render(to_dot(module, consts=True))


@needs_dot
def test_dot_renders_odd_node_names(mlp):
    module, _ = mlp
    render(to_dot(module, consts=True))


# --- HTML -------------------------------------------------------------------------------------
ALLOWED = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "div", "b", "code", "span",
           "table", "tr", "th", "td", "ul", "li",
           "svg", "defs", "marker", "path", "g", "rect", "text"}  # the inline SVG graph


class Checker(HTMLParser):
    """Every tag known and closed in order; collects the text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.text = [], []

    def handle_starttag(self, tag, attrs):
        assert tag in ALLOWED, f"unexpected <{tag}>"
        if tag != "meta":
            self.stack.append(tag)

    def handle_endtag(self, tag):
        assert self.stack and self.stack.pop() == tag, f"</{tag}> closes nothing open"

    def handle_data(self, data):
        self.text.append(data)


def check_html(page: str) -> str:
    """The page's text, once it is known to be well-formed and self-contained."""
    assert page.startswith("<!DOCTYPE html>")
    for external in ("<script", "<link", "src=", "http:", "https:"):
        assert external not in page
    assert not re.search(r"url\((?!#)", page)  # only references within the page (the arrowhead marker)
    checker = Checker()
    checker.feed(page)
    checker.close()
    assert not checker.stack, f"unclosed {checker.stack}"
    return "".join(checker.text)


def test_html_lists_every_group(fused):
    module, report = fused
    page = to_html(module, report)
    text = check_html(page)
    assert f"{report.ops_before} ops \u2192 {report.kernels} kernels ({len(report.groups)} groups)" in text
    for g in report.groups:
        assert g.name in text and rule_colour(g.rule) in page
    assert text.count("reads:") == report.kernels
    assert ("Refused merges" in text) == bool(report.refused)


def test_html_draws_one_node_per_kernel_and_one_edge_per_value_passed(fused):
    """The SVG: a node per kernel, an edge per (producer, consumer) pair of
    kernels or graph inputs and outputs, with tooltips; times when given."""
    module, report = fused
    from braze.codegen.kernel import partition

    kernels = partition(module.main)
    page = to_html(module, report, times={k.name: 0.125 for k in kernels}, names=[k.name for k in kernels])
    assert page.count('<g class="kernel"') == report.kernels == len(kernels)
    func = module.main
    top = {id(k.group if k.group is not None else k.ops[0]): i for i, k in enumerate(kernels)}
    pairs = set()
    for op in func.body.ops:
        if id(op) not in top:
            continue
        for v in op.operands:
            owner = v.owner
            if owner is None:
                pairs.add((v.name, top[id(op)]))
            elif owner.name != "const":
                pairs.add((top[id(owner)], top[id(op)]))
    outputs = {(top[id(v.owner)] if v.owner is not None else v.name, n) for n, v in zip(func.result_names, func.outputs)}
    assert page.count('<path class="edge"') == len(pairs) + len(outputs)
    assert page.count("time: 0.125 ms") == len(kernels)
    assert page.count('<g class="io"') == len(func.args) + len(func.outputs)


def test_html_without_report_counts_from_the_module(mlp):
    module, report = mlp
    text = check_html(to_html(module))
    assert f"6 ops \u2192 {report.kernels} kernels (2 groups)" in text
    assert "Refused merges" not in text


def test_html_escapes_node_names(mlp):
    module, report = mlp
    page = to_html(module, report)
    assert ODD not in page and html.escape(ODD) in page
    text = check_html(page)
    assert f"{ODD}.matmul_epilogue" in text
    assert "reads: input x (2x4 f32)" in text and f"#1 {ODD}.matmul_epilogue (2x4 f32)" in text
    assert "y \u2190 #3 act1 (Tanh) (2x4 f32)" in text
    assert "<td>bias1 + act1</td><td>blacklisted</td>" in page
