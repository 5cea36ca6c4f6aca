"""The ``fuse`` pass: plan groups with the rules, then build ``fuse.group`` ops.

``fuse_module`` reads top to bottom as the steps: build the graph, run the
manual rules, run the automatic rules level by level, materialize each
cluster of two or more ops as a ``fuse.group``, and keep the record
(``module.fusion_report``, a ``FusionReport``).

A group's operands are the values its members read from outside it,
constants included (constants are never members, so every weight stays one
named blob); its region's block arguments mirror them; its results are the
members' values used outside it or returned, yielded by ``fuse.yield``.
"""

from __future__ import annotations

import heapq
import warnings
from dataclasses import dataclass, fields
from typing import ClassVar

from ...errors import FusionRuleError, FusionRuleWarning
from ...ir import Block, Func, Module, Operation, Region
from ...ir.registry import Kind
from ..manager import Pass, register_pass
from ..precision import group_dtype
from .controls import Controls, FusionOptions, unmatched_controls
from .explain import FusionReport, GroupRecord, Quantized, Raised, RegionReport, Refusal, RuleStats
from .graph import SKIPPED, Graph, node_name, node_names
from .manual import ManualRule, load_rules, parse_rules
from .planner import Cluster, Planner
from .rules import RAISED_BY, RAISED_FROM, RULES


@register_pass
@dataclass(frozen=True)
class Fuse(FusionOptions, Pass):
    """Group ops into fuse.group kernels by level, manual rules and controls."""

    name: ClassVar[str] = "fuse"
    title: ClassVar[str] = "Fusion"

    def run(self, module: Module) -> bool:
        return bool(fuse_module(module, self).groups)


def fuse_module(module: Module, options: FusionOptions | None = None, *, rules=None,
                **overrides) -> FusionReport:
    """Fuse ``module`` in place and return the record (also ``module.fusion_report``).

    ``options`` (a ``FusionOptions`` or the ``Fuse`` pass) with ``overrides``
    as keywords (``level=3, no_fuse=["Slice"]``); ``rules`` adds manual rules:
    ``PatternRule``/``ExplicitGroup`` objects or their JSON form.
    """
    options = _options(options, overrides)
    manual = _manual_rules(options, rules)
    func = module.main
    if func.body.parent is None:  # the model, not one of its control-flow regions: check once, over all
        _unmatched_controls(options, list(module.walk()))
    graph = Graph(func)
    controls = Controls(options, graph, [r.name for r in manual] + [r.name for r in RULES])
    report = FusionReport(level=options.level, ops_before=count_ops(func))
    for rule in [*manual, *RULES]:
        report.rules[rule.name] = RuleStats(rule.level, "manual" if rule.manual else "auto",
                                            on=controls.rule_on(rule.name))
    plan = Planner(graph, controls, options.level, report)
    for rule in manual:
        rule.apply(plan)
    # Rules above the requested level run too: the gate refuses their merges
    # with `level`, so the record says what a higher level would do.
    for level in (1, 2, 3):
        plan.allow_multi_output = level == 3 and options.level >= 3 and controls.rule_on("multi_output")
        for rule in (r for r in RULES if r.level == level and not r.last):
            _run_to_fixpoint(rule, plan)
    for rule in (r for r in RULES if r.last):
        _run_to_fixpoint(rule, plan)
    plan.write_refusals(report)
    _control_flow_refusals(func, report)
    _unusable_rules(report, options.strict_rules)
    report.quantized = quantized_ops(func)
    report.groups = materialize(func, graph, plan, options.level)
    report.raised = raised_ops(func)
    report.kernels = count_ops(func)
    module.fusion_report = report
    return report


def explain(module: Module, options: FusionOptions | None = None, *, rules=None, **overrides) -> FusionReport:
    """The fusion record of ``module`` (fused in place): what ``braze explain`` shows.
    ``explain(m, level=2).to_dict()`` has the keys of ``braze explain --json``."""
    return fuse_module(module, options, rules=rules, **overrides)


def count_ops(func: Func) -> int:
    """Kernels the function would run: top-level ops other than constants,
    the return and control flow (whose regions have kernels of their own)."""
    return sum(1 for op in func.body.ops if op.name not in SKIPPED and not op.name.startswith("cf."))


REGION_NAMES = {"cf.if": ("then", "else"), "cf.loop": ("body",)}


def _control_flow_refusals(func: Func, report: FusionReport) -> None:
    """A control-flow op ends fusion: what produces its operands and what
    reads its results stay out of its regions' kernels (``control_flow``)."""
    for op in func.body.ops:
        if not op.name.startswith("cf."):
            continue
        around = [v.owner for v in op.operands if v.owner is not None and v.owner.name != "const"]
        around += [user for r in op.results for user, _ in r.uses if user.name != "func.return"]
        names = list(dict.fromkeys(node_name(o) for o in [op] + around))
        regions = " and ".join(REGION_NAMES[op.name])
        report.refuse(Refusal(names, "control_flow", "-", f"{names[0]}'s {regions} fuse only inside themselves"))


def attach_regions(module: Module) -> None:
    """Give ``module``'s fusion report its control-flow regions' reports
    (after the pipeline ran on them: PassManager.run_in_regions), nested
    ones inside theirs."""
    from ...ir import control_regions

    report = module.fusion_report
    if report is None:
        return
    report.regions = []
    for op, i, sub in control_regions(module):
        if sub.fusion_report is not None:
            attach_regions(sub)
            report.regions.append(RegionReport(node_name(op), op.name, REGION_NAMES[op.name][i], sub.fusion_report))


def _options(options: FusionOptions | None, overrides: dict) -> FusionOptions:
    base = options or FusionOptions()
    values = {f.name: getattr(base, f.name) for f in fields(FusionOptions)}
    unknown = sorted(set(overrides) - set(values))
    if unknown:
        raise TypeError(f"unknown fusion option(s) {unknown} (options: {', '.join(values)})")
    return FusionOptions(**{**values, **overrides})


def _manual_rules(options: FusionOptions, extra) -> list[ManualRule]:
    rules = load_rules(options.rules) if options.rules else []
    rules += parse_rules(list(extra or []), "rules argument")
    builtin = {r.name for r in RULES}
    names = [r.name for r in rules]
    for name in names:
        if name in builtin:
            raise FusionRuleError(f"manual rule '{name}' has the name of a built-in rule; choose another")
        if names.count(name) > 1:
            raise FusionRuleError(f"manual rule '{name}' is defined more than once")
    return rules


#: the refusals that say a manual rule can never apply to this graph
UNUSABLE = ("unknown_op_type", "unknown_node")


def _unmatched_controls(options: FusionOptions, ops) -> None:
    """Warn about (or, with ``strict_rules``, refuse) controls that match nothing."""
    for message in unmatched_controls(options, ops):
        if options.strict_rules:
            raise FusionRuleError(f"{message} (strict: fix or remove the control)")
        warnings.warn(message, FusionRuleWarning, stacklevel=3)


def _unusable_rules(report: FusionReport, strict: bool) -> None:
    """Warn about (or, ``strict``, refuse) manual rules that can never apply."""
    for refusal in report.refused:
        if refusal.reason not in UNUSABLE:
            continue
        what = f"{refusal.detail}: {', '.join(refusal.nodes)}" if refusal.nodes else refusal.detail
        message = f"manual rule '{refusal.rule}' can never apply ({refusal.reason}): {what}"
        if strict:
            raise FusionRuleError(f"{message} (strict rules: fix or remove the rule)")
        warnings.warn(message, FusionRuleWarning, stacklevel=3)


def _run_to_fixpoint(rule, plan: Planner) -> None:
    """Run a rule until it merges nothing more (a merge can enable another)."""
    while True:
        before = plan.merges
        rule.apply(plan)
        if plan.merges == before:
            return


# --- materializing -----------------------------------------------------------------------
def materialize(func: Func, graph: Graph, plan: Planner, level: int) -> list[GroupRecord]:
    """One ``fuse.group`` per cluster of two or more ops; the records, in order."""
    taken = {op.attributes.get("name") for op in func.body.ops if op.name == "fuse.group"}
    records = []
    for cluster in plan.clusters():
        if len(cluster.members) < 2:
            continue
        members, rule = sorted(cluster.members), group_rule(cluster)
        name = _unique(_group_name(graph, members, rule), taken)
        records.append(_record(graph, cluster, name, rule))
        _build_group(func, graph, members, {"name": name, "rule": rule, "level": level})
    topo_sort(func.body)
    return records


def group_rule(cluster: Cluster) -> str:
    """The rule a group is named after: the last that shaped it. Rules run
    by level, so that is the most specific one; multi_output and cast_fold
    only widen a group another rule shaped, so they name a group only on
    their own."""
    shaping = [r for r in cluster.rules if r not in ("multi_output", "cast_fold")]
    return (shaping or cluster.rules)[-1]


def _group_name(graph: Graph, members: list[int], rule: str) -> str:
    """``<anchor node>.<rule>``: the anchor is the first matmul/conv/pool,
    else the first reduction, else the first op."""
    kinds = [graph.kinds[i] for i in members]
    for kind in (Kind.ANCHOR, Kind.REDUCE):
        if kind in kinds:
            return f"{node_name(graph.ops[members[kinds.index(kind)]])}.{rule}"
    return f"{node_name(graph.ops[members[0]])}.{rule}"


def _unique(name: str, taken: set) -> str:
    candidate, n = name, 1
    while candidate in taken:
        candidate, n = f"{name}_{n}", n + 1
    taken.add(candidate)
    return candidate


def _record(graph: Graph, cluster: Cluster, name: str, rule: str) -> GroupRecord:
    members = sorted(cluster.members)
    ops = [graph.ops[i] for i in members]
    return GroupRecord(
        name=name, rule=rule, nodes=node_names(ops), ops=[op.name for op in ops],
        op_types=list(dict.fromkeys(op.loc.op_type for op in ops if op.loc and op.loc.op_type)),
        rules=list(cluster.rules), inputs=len(graph.inputs(cluster.members)),
        outputs=len(graph.outputs(cluster.members)), bytes=graph.working_set(cluster.members),
        dtype=group_dtype([r.type for op in ops if op.name != "math.cast" for r in op.results]))


def _build_group(func: Func, graph: Graph, members: list[int], attrs: dict) -> Operation:
    """Move the members into a new group's region, reading block arguments
    instead of outside values; outside users read the group's results."""
    ops = [graph.ops[i] for i in members]
    inputs, outputs = graph.inputs(set(members)), graph.outputs(set(members))
    block = Block([v.type for v in inputs])
    args = {id(v): a for v, a in zip(inputs, block.args)}
    for op in ops:
        for k, v in enumerate(op.operands):
            if id(v) in args:
                op.set_operand(k, args[id(v)])
    group = Operation("fuse.group", inputs, [v.type for v in outputs], attrs, regions=[Region([block])])
    inside = {id(op) for op in ops}
    for v, result in zip(outputs, group.results):
        for user, k in list(v.uses):
            if id(user) not in inside:
                user.set_operand(k, result)
    func.body.insert_before(ops[0], group)
    func.body.remove_many(ops)
    for op in ops:
        block.append(op)
    block.append(Operation("fuse.yield", outputs, []))
    return group


def ungroup(group: Operation) -> None:
    """Undo a ``fuse.group``: its members go back into the enclosing block
    where the group stood, reading the group's operands again (the way back
    when TVM cannot build the group as one kernel)."""
    block = group.regions[0].blocks[0]
    outer = group.parent
    yielded = list(block.terminator.operands)
    for arg, operand in zip(block.args, group.operands):
        arg.replace_all_uses_with(operand)
    members = block.ops[:-1]
    block.terminator.drop_operands()
    block.ops = []
    for op in members:
        outer.insert_before(group, op)
    for result, value in zip(group.results, yielded):
        result.replace_all_uses_with(value)
    group.erase()


def topo_sort(block: Block) -> None:
    """Reorder ``block`` so that every op follows its operands' producers,
    keeping the given order wherever it already works (the return stays last)."""
    ops = block.ops[:-1]
    position = {id(op): i for i, op in enumerate(ops)}
    waiting = {id(op): 0 for op in ops}
    users: dict[int, list[Operation]] = {}
    for op in ops:
        for producer in {id(v.owner) for v in op.operands if v.owner is not None and id(v.owner) in position}:
            waiting[id(op)] += 1
            users.setdefault(producer, []).append(op)
    ready = [(position[id(op)], op) for op in ops if waiting[id(op)] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, op = heapq.heappop(ready)
        order.append(op)
        for user in users.get(id(op), []):
            waiting[id(user)] -= 1
            if waiting[id(user)] == 0:
                heapq.heappush(ready, (position[id(user)], user))
    assert len(order) == len(ops), "fusion left a cycle in the graph"
    block.ops = order + block.ops[-1:]


def quantized_ops(func: Func) -> list[Quantized]:
    """The products the fold-quant pass looked at (``braze.quant``): folded, or kept and why."""
    from ..quant import QUANT, QUANT_FROM

    found = []
    for op in func.body.ops:
        state = op.attributes.get(QUANT)
        if state is not None:
            folded = state == "folded"
            found.append(Quantized(node_name(op), op.name, folded, "" if folded else state.removeprefix("kept: "),
                                   list(op.attributes.get(QUANT_FROM, ()))))
    return found


def raised_ops(func: Func) -> list[Raised]:
    """The ops a rule made by raising a pattern (``braze.raised_by``), with the nodes they replace."""
    return [Raised(node_name(op), op.attributes[RAISED_BY], op.name, list(op.attributes.get(RAISED_FROM, ())))
            for op in func.body.ops if RAISED_BY in op.attributes]
