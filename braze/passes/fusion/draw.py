"""Pictures of the fused graph of ``@main``: Graphviz DOT and a standalone HTML page.

``to_dot`` draws every op as a node and every ``fuse.group`` as a coloured
cluster; edges run between the member ops themselves, so a group's operand
``i`` is followed to whatever its block argument ``i`` reads, and its result
``j`` to the producer of the ``fuse.yield`` operand ``j``. ``to_html`` needs
no Graphviz: it draws the kernels as an SVG graph (laid out by grandalf's
layered layout), each coloured by its rule and telling its ops, nodes and
time on hover, then lists the kernels in execution order, what each reads,
and (given the ``FusionReport``) the refused merges. Constants are weights,
not kernels, so both leave them out unless asked.
"""

from __future__ import annotations

import html
import itertools
import zlib

from ...ir import Block, BlockArgument, Func, Module, Operation, OpResult, TensorType, Value
from .explain import FusionReport
from .rules import RULES

# ColorBrewer Set3 with its grey swapped out: grey means "a kernel of one op".
PALETTE = ("#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462",
           "#b3de69", "#fccde5", "#a6cee3", "#bc80bd", "#ccebc5", "#ffed6f")
GREY = "#eeeeee"
NOT_DRAWN = ("const", "fuse.group", "fuse.yield", "func.return")


def rule_colour(rule: str) -> str:
    """The colour of a rule: built-in rules each have their own, manual rules
    one chosen by a hash of their name (stable from run to run)."""
    builtin = [r.name for r in RULES]
    index = builtin.index(rule) if rule in builtin else zlib.crc32(rule.encode())
    return PALETTE[index % len(PALETTE)]


def shape_text(ty: TensorType) -> str:
    return " ".join(filter(None, ["x".join(map(str, ty.shape)), ty.dtype]))


def op_label(op: Operation) -> str:
    """``node name (OpType)``, or the braze op name of an op with no location."""
    if op.loc is None:
        return op.name
    return f"{op.loc.name} ({op.loc.op_type or op.name})"


# --- following values across group boundaries ---------------------------------------------
def _group_of(block: Block | None) -> Operation | None:
    """The fuse.group whose region holds ``block``, if any."""
    region = block.parent if block is not None else None
    owner = region.parent if region is not None else None
    return owner if owner is not None and owner.name == "fuse.group" else None


def source(v: Value) -> Value:
    """The value as its real producer defines it: a member op's result, a
    graph input, or a constant, seen through any number of group boundaries."""
    while True:
        group = _group_of(v.block) if isinstance(v, BlockArgument) else None
        if group is not None:
            v = group.operands[v.index]
        elif isinstance(v, OpResult) and v.op.name == "fuse.group":
            v = v.op.regions[0].blocks[0].terminator.operands[v.index]
        else:
            return v


# --- DOT -------------------------------------------------------------------------------------
def _q(text: str) -> str:
    """A DOT string: quotes and backslashes escaped, newlines as line breaks."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(module: Module, *, consts: bool = False) -> str:
    """Graphviz DOT of ``@main`` after fusion. ``consts=True`` adds the
    constants that groups read, as small grey notes."""
    func = module.main
    ids = {id(op): f"op{i}" for i, op in enumerate(o for o in func.walk() if o.name not in NOT_DRAWN)}
    lines = ["digraph fused {",
             '  node [shape=box, style="rounded,filled", fillcolor=white, fontname=Helvetica, fontsize=10];',
             '  edge [fontname=Helvetica, fontsize=8, fontcolor="#555555"];']
    lines += [f'  in{i} [label={_q(a.name or f"input_{i}")}, shape=oval, fillcolor="{GREY}"];'
              for i, a in enumerate(func.args)]
    lines += _dot_block(func.body.ops, ids, "  ", itertools.count())
    lines += [f'  out{i} [label={_q(name)}, shape=oval, fillcolor="{GREY}"];'
              for i, name in enumerate(func.result_names)]
    lines += _dot_edges(func, ids, consts)
    return "\n".join(lines + ["}"]) + "\n"


def _dot_block(ops: list[Operation], ids: dict, pad: str, clusters) -> list[str]:
    lines = []
    for op in ops:
        if op.name == "fuse.group":
            rule = op.attr("rule", "")
            title = _q(op.attr("name", "") + "\n" + rule)
            lines += [f"{pad}subgraph cluster_{next(clusters)} {{",
                      f'{pad}  label={title}; style="rounded,filled"; '
                      f'fillcolor="{rule_colour(rule)}"; color="#666666"; fontname=Helvetica; fontsize=10;']
            lines += _dot_block(op.regions[0].blocks[0].ops, ids, pad + "  ", clusters)
            lines.append(f"{pad}}}")
        elif op.name not in NOT_DRAWN:
            label = op.name if op.loc is None else "\n".join([op.loc.name, op.loc.op_type or op.name])
            lines.append(f"{pad}{ids[id(op)]} [label={_q(label)}];")
    return lines


def _dot_edges(func: Func, ids: dict, consts: bool) -> list[str]:
    """One edge per (producer, consumer) pair, labelled with the tensor's shape."""
    notes: dict[int, str] = {}
    lines, seen = [], set()

    def node_of(v: Value, reader: Operation | None) -> str | None:
        v = source(v)
        if isinstance(v, BlockArgument):
            return f"in{v.index}"
        if v.op.name != "const":
            return ids[id(v.op)]
        if not consts or reader is None or _group_of(reader.parent) is None:
            return None
        if id(v.op) not in notes:
            notes[id(v.op)] = f"c{len(notes)}"
            label = v.name or (v.op.loc.name if v.op.loc else "const")
            lines.append(f'  {notes[id(v.op)]} [label={_q(label)}, shape=note, fillcolor="{GREY}", '
                         'fontsize=7, height=0.2, color="#999999"];')
        return notes[id(v.op)]

    def edge(v: Value, reader: Operation | None, target: str) -> None:
        start = node_of(v, reader)
        if start is not None and (start, target) not in seen:
            seen.add((start, target))
            lines.append(f"  {start} -> {target} [label={_q(shape_text(v.type))}];")

    for op in func.walk():
        if op.name not in NOT_DRAWN:
            for v in op.operands:
                edge(v, op, ids[id(op)])
    for i, v in enumerate(func.outputs):
        edge(v, None, f"out{i}")
    return lines


# --- HTML ------------------------------------------------------------------------------------
_CSS = """
body { font: 14px/1.4 sans-serif; margin: 2em; color: #222; }
code { font-size: 12px; }
.kernel { border: 1px solid #888; border-radius: 6px; padding: 6px 10px; margin: 6px 0; }
.single { background: #eeeeee; color: #555; padding: 2px 10px; margin: 2px 0; font-size: 12px; }
.reads { color: #444; font-size: 12px; }
.single .reads { display: inline; margin-left: 1em; }
.swatch { display: inline-block; width: 1em; height: 1em; border: 1px solid #888; margin-right: 4px; }
table { border-collapse: collapse; } td, th { text-align: left; padding: 1px 8px; }
"""


def to_html(module: Module, report: FusionReport | None = None, times: dict[str, float] | None = None,
            names: list[str] | None = None) -> str:
    """A self-contained HTML page: counts, the graph of the kernels, the
    kernels in order with what they read, a legend of the rules and, given
    ``report``, the refused merges. ``names`` are the kernels' names in
    execution order (as codegen's ``partition`` and ``braze profile`` give
    them); with them, ``times`` (name -> ms) adds each kernel's time to its
    tooltip."""
    func = module.main
    kernels = [op for op in func.body.ops if op.name not in ("const", "func.return")]
    number = {id(op): k for k, op in enumerate(kernels, 1)}
    groups = [op for op in kernels if op.name == "fuse.group"]
    title = f"Fused graph of @{_e(func.name)}"
    parts = ["<!DOCTYPE html>", '<html><head><meta charset="utf-8">',
             f"<title>braze: {title}</title><style>{_CSS}</style></head><body>", f"<h1>{title}</h1>",
             f"<p>{_e(_counts(func, kernels, groups, report))}</p>",
             "<h2>The kernels and their data flow</h2>", svg_graph(func, kernels, number, times, names),
             "<h2>Kernels, in execution order</h2>"]
    parts += [_html_kernel(op, number) for op in kernels]
    outputs = [f"<code>{_e(name)}</code> &larr; {_e(_reads(v, number))}"
               for name, v in zip(func.result_names, func.outputs)]
    parts.append(f"<p>Outputs: {'; '.join(outputs)}</p>")
    rules = dict.fromkeys(g.attr("rule", "") for g in groups)
    legend = [(rule_colour(r), r) for r in rules] + [(GREY, "a kernel of one op")]
    parts += ["<h2>Rules</h2>", "<ul>"]
    parts += [f'<li><span class="swatch" style="background:{c}"></span>{_e(r)}</li>' for c, r in legend]
    parts.append("</ul>")
    if report is not None:
        parts.append(_html_refusals(report))
    return "\n".join(parts + ["</body></html>"]) + "\n"


# --- the graph, as SVG ------------------------------------------------------------------------
_NODE_H, _CHAR_W, _GAP = 34, 7, 28


class _Box:
    """What grandalf lays out: a node's size, and where it puts it."""

    def __init__(self, w: float, h: float):
        self.w, self.h, self.xy = w, h, (0.0, 0.0)


class _Route:
    """What grandalf routes: an edge's points."""

    def __init__(self):
        self.points = []

    def setpath(self, points):
        self.points = [tuple(p) for p in points]


def svg_graph(func: Func, kernels: list, number: dict, times: dict[str, float] | None = None,
              names: list[str] | None = None) -> str:
    """The kernels (and the graph's inputs and outputs) as nodes and the
    values between them as edges, laid out top to bottom in layers by
    grandalf's Sugiyama layout: one ``<g class="kernel">`` per kernel, one
    ``<path class="edge">`` per edge."""
    nodes = _graph_nodes(func, kernels, number, times, names)
    vertices, edges, width, height = _lay_out(nodes, _graph_edges(func, kernels, number))
    out = [f'<svg class="graph" width="{width + 20:.0f}" '
           f'height="{height + 20:.0f}" viewBox="-10 -10 {width + 20:.0f} {height + 20:.0f}">',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
           'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#666"/></marker></defs>']
    out += [_svg_edge(e) for e in edges]
    out += [_svg_node(key, nodes[key], v.view) for key, v in vertices.items()]
    out.append("</svg>")
    return "\n".join(out)


def _graph_nodes(func: Func, kernels: list, number: dict, times, names) -> dict[str, dict]:
    """Node key -> its label, kind and tooltip: the inputs, the kernels, the outputs."""
    names = {id(op): name for op, name in zip((op for op in kernels if not op.name.startswith("cf.")), names or [])}
    nodes: dict[str, dict] = {}
    for a in func.args:
        nodes[f"in:{a.name}"] = {"label": a.name, "kind": "input", "tip": f"input {a.name}: {shape_text(a.type)}"}
    for op in kernels:
        nodes[f"k{number[id(op)]}"] = _kernel_node(op, number, names, times)
    for n, v in zip(func.result_names, func.outputs):
        nodes[f"out:{n}"] = {"label": n, "kind": "output", "tip": f"output {n}: {shape_text(v.type)}"}
    return nodes


def _graph_edges(func: Func, kernels: list, number: dict) -> list[tuple[str, str]]:
    """(source node, target node) of every value between two nodes, once each."""

    def node_of(v: Value) -> str | None:
        v = source(v)
        if isinstance(v, BlockArgument):
            return f"in:{v.name}" if v.block is func.body else None
        if _is_const(v):
            return None
        op = v.op
        while op.parent is not None and op.parent is not func.body:  # a member: its group is the kernel
            op = op.parent.parent.parent
        return f"k{number[id(op)]}" if id(op) in number else None

    edges = []
    for op in kernels:
        for v in dict.fromkeys(op.operands):
            src = node_of(v)
            if src is not None:
                edges.append((src, f"k{number[id(op)]}"))
    for n, v in zip(func.result_names, func.outputs):
        src = node_of(v)
        if src is not None:
            edges.append((src, f"out:{n}"))
    return list(dict.fromkeys(edges))


def _lay_out(nodes: dict[str, dict], edges: list[tuple[str, str]]):
    """(vertices by key, edges, width, height): grandalf's Sugiyama layout of
    each connected piece, the pieces side by side."""
    from grandalf.graphs import Edge, Graph, Vertex
    from grandalf.layouts import SugiyamaLayout

    vertices = {key: Vertex(key) for key in nodes}
    for key, v in vertices.items():
        v.view = _Box(max(60, _CHAR_W * len(nodes[key]["label"]) + 16), _NODE_H)
    graph_edges = []
    for a, b in edges:
        e = Edge(vertices[a], vertices[b])
        e.view = _Route()
        graph_edges.append(e)
    graph = Graph(list(vertices.values()), graph_edges)
    x0 = 0.0
    for component in graph.C:
        layout = SugiyamaLayout(component)
        layout.xspace, layout.yspace = _GAP, _GAP + _NODE_H
        layout.init_all()
        layout.draw()
        left = min(v.view.xy[0] - v.view.w / 2 for v in component.sV)
        shift = x0 - left
        for v in component.sV:
            v.view.xy = (v.view.xy[0] + shift, v.view.xy[1])
        for e in component.sE:
            e.view.points = [(x + shift, y) for x, y in e.view.points]
        x0 = max(v.view.xy[0] + v.view.w / 2 for v in component.sV) + 2 * _GAP
    height = max(v.view.xy[1] + v.view.h / 2 for v in vertices.values()) + _GAP
    return vertices, graph_edges, x0, height


def _svg_edge(e) -> str:
    points = list(e.view.points or [e.v[0].view.xy, e.v[1].view.xy])
    a, b = e.v[0].view, e.v[1].view  # from the source's bottom edge to the target's top edge
    points[0] = (points[0][0], a.xy[1] + a.h / 2)
    points[-1] = (points[-1][0], b.xy[1] - b.h / 2)
    d = " ".join(f"{'M' if i == 0 else 'L'} {x:.1f} {y:.1f}" for i, (x, y) in enumerate(points))
    return f'<path class="edge" d="{d}" fill="none" stroke="#666" marker-end="url(#arrow)"/>'


def _svg_node(key: str, node: dict, box) -> str:
    x, y = box.xy
    w, h = box.w, box.h
    kind = node["kind"]
    fill = {"input": "#ffffff", "output": "#ffffff"}.get(kind, node.get("fill", GREY))
    radius = 16 if kind in ("input", "output") else 5
    return (f'<g class="{"kernel" if kind == "kernel" else "io"}" data-name="{_e(node.get("name", key))}">'
            f"<title>{_e(node['tip'])}</title>"
            f'<rect x="{x - w / 2:.1f}" y="{y - h / 2:.1f}" width="{w:.1f}" height="{h:.1f}" rx="{radius}" '
            f'fill="{fill}" stroke="#555"/>'
            f'<text x="{x:.1f}" y="{y + 4:.1f}" text-anchor="middle" font-size="12">{_e(node["label"])}</text>'
            "</g>")


def _kernel_node(op: Operation, number: dict, names: dict, times: dict | None) -> dict:
    k = number[id(op)]
    name = names.get(id(op), "")
    if op.name == "fuse.group":
        members = [m for m in op.regions[0].blocks[0].ops if m.name not in NOT_DRAWN]
        rule = op.attr("rule", "")
        tip = [f"#{k} {name}", f"rule: {rule}", "ops: " + ", ".join(m.name for m in members),
               "nodes: " + ", ".join(m.loc.name for m in members if m.loc)]
        label, fill = f"#{k} {rule} ({len(members)})", rule_colour(rule)
    else:
        tip = [f"#{k} {name}", f"op: {op.name}", f"node: {op_label(op)}"]
        label, fill = f"#{k} {op.loc.op_type if op.loc and op.loc.op_type else op.name}", GREY
    if times and name in times:
        tip.append(f"time: {times[name]:.3f} ms")
    tip.append("out: " + ", ".join(shape_text(r.type) for r in op.results))
    return {"label": label, "kind": "kernel", "fill": fill, "tip": "\n".join(tip), "name": name}


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _counts(func: Func, kernels: list, groups: list, report: FusionReport | None) -> str:
    if report is not None:
        return (f"fusion level {report.level}: {report.ops_before} ops → {report.kernels} kernels "
                f"({len(report.groups)} groups)")
    ops = sum(1 for op in func.walk() if op.name not in NOT_DRAWN)
    return f"{ops} ops → {len(kernels)} kernels ({len(groups)} groups)"


def _row(*cells: str, tag: str = "td") -> str:
    return "<tr>" + "".join(f"<{tag}>{_e(c)}</{tag}>" for c in cells) + "</tr>"


def _is_const(v: Value) -> bool:
    return isinstance(v, OpResult) and v.op.name == "const"


def _reads(v: Value, number: dict) -> str:
    """Where a kernel's operand comes from: a graph input, a constant, or an earlier kernel."""
    if isinstance(v, BlockArgument):
        where = f"input {v.name or v.index}"
    elif _is_const(v):
        where = f"const {v.name or ''}".rstrip()
    else:
        name = v.op.attr("name") if v.op.name == "fuse.group" else op_label(v.op)
        where = f"#{number[id(v.op)]} {name}" + (f" [{v.index}]" if len(v.op.results) > 1 else "")
    return f"{where} ({shape_text(v.type)})"


def _reads_html(op: Operation, number: dict) -> str:
    values = sorted(dict.fromkeys(op.operands), key=_is_const)  # constants last: weights are noise here
    reads = [_e(_reads(v, number)) for v in values]
    return f'<div class="reads">reads: {"; ".join(reads) or "nothing"}</div>'


def _html_kernel(op: Operation, number: dict) -> str:
    k = number[id(op)]
    if op.name != "fuse.group":
        return f'<div class="single">#{k} {_e(op_label(op))} {_reads_html(op, number)}</div>'
    rule = op.attr("rule", "")
    members = [m for m in op.regions[0].blocks[0].ops if m.name not in NOT_DRAWN]
    rows = [_row(m.loc.name if m.loc else "", (m.loc and m.loc.op_type) or "", m.name) for m in members]
    return (f'<div class="kernel" style="background:{rule_colour(rule)}">'
            f"<b>#{k} {_e(op.attr('name', ''))}</b> &middot; rule <code>{_e(rule)}</code>"
            f"<table>{''.join(rows)}</table>{_reads_html(op, number)}</div>")


def _html_refusals(report: FusionReport) -> str:
    if not report.refused:
        return "<h2>Refused merges</h2><p>none</p>"
    rows = [_row(" + ".join(r.nodes), r.reason, r.rule, r.detail) for r in report.refused]
    header = _row("nodes", "reason", "rule", "detail", tag="th")
    return f"<h2>Refused merges ({len(rows)})</h2><table>{header}{''.join(rows)}</table>"
