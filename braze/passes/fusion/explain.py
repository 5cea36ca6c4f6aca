"""The record of every fusion decision: groups, refused merges, rule counts.

``FusionReport.to_dict()`` has the stable keys of ``braze explain --json``::

    {"ops_before", "kernels", "groups": [{"name", "rule", "nodes", ...}],
     "refused": [{"nodes", "reason", ...}], "rules": {NAME: {"matched", "applied", ...}}}

plus ``level``; ``table()`` is the same record for people. For an
Ascend-like target, ``estimate`` holds the roofline estimate of every kernel
(braze.targets.roofline): then each group also has ``estimate_us``, and the
dict an ``"estimate": {"target", "total_us", "kernels": [...]}``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

#: Why a merge was refused. The first ten are the DESIGN's; the next four
#: only concern manual rules and switched-off rules; codegen_failed is
#: recorded by the compiler when TVM cannot build a group.
REASONS = (
    "blacklisted",        # no_fuse op type, braze.no_fuse, or skip_nodes
    "not_whitelisted",    # only_fuse is set and the op type is not in it
    "out_of_scope",       # outside `scope`, or different braze.fusion_scope labels
    "dynamic_shape",      # a shape not known at compile time
    "control_flow",       # an op holding regions
    "incompatible_kinds",  # an opaque op, or more heavy ops than the rule allows
    "level",              # the rule (or a multi-output group) needs a higher level
    "memory_limit",       # the working set would exceed memory_limit, or the working tile tile_limit
    "would_create_cycle",  # the group would not be convex
    "max_group_size",     # more ops than max_group_size
    "switched_off",       # the rule is switched off
    "unknown_op_type",    # a pattern names an op type braze does not know
    "unknown_node",       # an explicit group names a node that is not in the graph
    "overlap",            # the ops already belong to an earlier manual group
    "codegen_failed",     # TVM could not build the group: it was split back into single ops
)


@dataclass
class GroupRecord:
    name: str
    rule: str
    nodes: list[str]  # ONNX node names of the members
    ops: list[str]  # braze op names of the members, in order
    op_types: list[str]  # ONNX op types of the members, each once
    rules: list[str]  # every rule that merged into this group, in order
    inputs: int
    outputs: int
    bytes: int  # working set: distinct input and output tensor bytes
    dtype: str = "f32"  # what it computes in: f16/bf16 if the precision pass put any of it in 16 bits


@dataclass
class Raised:
    name: str  # the ONNX node the op is located at
    rule: str
    op: str  # the braze op that replaced the pattern
    nodes: list[str]  # the ONNX nodes it replaced


@dataclass
class Quantized:
    """A conv or matmul of dequantized operands (the fold-quant pass)."""

    name: str  # its ONNX node
    op: str
    folded: bool  # computed on the integers
    reason: str  # why it was kept in float ("" when folded)
    nodes: list[str]  # the dequantize nodes folded into it


@dataclass
class Refusal:
    nodes: list[str]  # the ONNX nodes the rule tried to put together
    reason: str  # one of REASONS
    rule: str
    detail: str = ""

    def __post_init__(self):
        assert self.reason in REASONS, self.reason


@dataclass
class RegionReport:
    """The fusion record of one control-flow region (a branch of an If, the
    body of a Loop): its ops fuse among themselves only."""
    node: str  # the ONNX node of the If or Loop
    op: str  # cf.if or cf.loop
    region: str  # then, else or body
    report: "FusionReport"


@dataclass
class RuleStats:
    level: int
    source: str  # "auto" or "manual"
    on: bool = True
    matched: int = 0  # candidate merges (manual: occurrences) the rule found
    applied: int = 0  # of those, the ones that happened


@dataclass
class FusionReport:
    level: int
    ops_before: int = 0
    kernels: int = 0
    groups: list[GroupRecord] = field(default_factory=list)
    #: ops a rule made by raising a pattern (level 3's ``nn.attention``):
    #: one kernel each, with the ONNX nodes they replace
    raised: list[Raised] = field(default_factory=list)
    #: the products of dequantized operands: folded to integers, or kept in float and why
    quantized: list[Quantized] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    rules: dict[str, RuleStats] = field(default_factory=dict)
    estimate: dict | None = None  # ModelEstimate.to_dict() on an Ascend-like target
    #: the control-flow regions' own records (``ops_before`` and ``kernels``
    #: above count this function's ops only; ``to_dict`` and ``table`` give totals)
    regions: list[RegionReport] = field(default_factory=list)
    _seen: set = field(default_factory=set, repr=False, compare=False)

    def refuse(self, refusal: Refusal) -> None:
        """Record the first refusal of a set of nodes only: later attempts
        (by other rules, or with grown groups) are the same decision."""
        key = tuple(refusal.nodes)
        if key not in self._seen:
            self._seen.add(key)
            self.refused.append(refusal)

    def reasons(self) -> dict[str, int]:
        """How many refusals per reason code."""
        counts: dict[str, int] = {}
        for r in self.refused:
            counts[r.reason] = counts.get(r.reason, 0) + 1
        return counts

    def total(self, key: str) -> int:
        """``ops_before`` or ``kernels`` with those of every region inside."""
        return getattr(self, key) + sum(r.report.total(key) for r in self.regions)

    def to_dict(self) -> dict:
        data = {
            "level": self.level,
            "ops_before": self.total("ops_before"),
            "kernels": self.total("kernels"),
            "groups": [asdict(g) for g in self.groups],
            "raised": [asdict(r) for r in self.raised],
            "quantized": [asdict(q) for q in self.quantized],
            "refused": [asdict(r) for r in self.refused],
            "rules": {name: asdict(s) for name, s in self.rules.items()},
        }
        if self.estimate is not None:
            times = self._group_times()
            for g in data["groups"]:
                g["estimate_us"] = times.get(g["name"])
            data["estimate"] = self.estimate
        if self.regions:
            data["regions"] = [{"node": r.node, "op": r.op, "region": r.region, **r.report.to_dict()}
                               for r in self.regions]
        return data

    def _group_times(self) -> dict[str, float]:
        return {k["name"]: k["estimate_us"] for k in (self.estimate or {}).get("kernels", [])}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def table(self, rules: bool = True) -> str:
        """The report as text: a summary line, the groups, refusals, each
        control-flow region's own, rule counts (``rules``)."""
        groups = len(self.groups) + sum(len(r.report.groups) for r in self.regions)
        lines = [f"fusion level {self.level}: {self.total('ops_before')} ops -> {self.total('kernels')} kernels "
                 f"({groups} groups)"]
        times = self._group_times()
        if self.estimate is not None:
            lines.append(f"estimated {self.estimate['total_us']:.2f} us on {self.estimate['target']} "
                         f"(roofline, all {len(self.estimate['kernels'])} kernels; docs/targets.md)")
        if self.groups:
            width = max(len(g.name) for g in self.groups)
            est = f"  {'est. us':>8}" if times else ""
            mixed = any(g.dtype != "f32" for g in self.groups)  # a dtype column only when it says something
            dt = f"  {'dtype':<5}" if mixed else ""
            lines += ["", f"  {'group':<{width}}  {'rule':<18}  ops{dt}{est}  nodes"]
            for g in self.groups:
                est = f"  {times[g.name]:8.3f}" if g.name in times else ""
                dt = f"  {g.dtype:<5}" if mixed else ""
                lines.append(f"  {g.name:<{width}}  {g.rule:<18}  {len(g.ops):>3}{dt}{est}  {', '.join(g.nodes)}")
        if self.raised:
            lines += ["", f"  raised to one op ({len(self.raised)}):"]
            for r in self.raised:
                lines.append(f"  {r.name}  {r.rule}  {r.op}  <- {', '.join(r.nodes)}")
        if self.quantized:
            folded = sum(q.folded for q in self.quantized)
            lines += ["", f"  quantized products: {folded} folded to integer kernels, "
                          f"{len(self.quantized) - folded} kept in float:"]
            for q in self.quantized:
                state = f"folded  <- {', '.join(q.nodes)}" if q.folded else f"kept    ({q.reason})"
                lines.append(f"  {q.name}  {q.op}  {state}")
        if self.refused:
            lines += ["", f"  refused merges ({len(self.refused)}):"]
            for r in self.refused:
                detail = f"  ({r.detail})" if r.detail else ""
                lines.append(f"  {r.reason:<18}  {r.rule:<18}  {' + '.join(r.nodes) or '-'}{detail}")
        for r in self.regions:
            inner = r.report.table(rules=False).splitlines()
            lines += ["", f"  region {r.region} of {r.node} ({r.op}): {inner[0].split(': ', 1)[1]}"]
            lines += ["  " + line if line else line for line in inner[1:]]
        if self.rules and rules:
            lines += ["", f"  {'rule':<20}  level  matched  applied"]
            for name, s in self.rules.items():
                state = "" if s.on else "  (off)"
                lines.append(f"  {name:<20}  {s.level:>5}  {s.matched:>7}  {s.applied:>7}{state}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def fusion_result(report: dict | None, model: str = "model") -> dict:
    """A report (``FusionReport.to_dict()``; None: nothing fused) as the
    Ascend graph engine's ``fusion_result.json`` has it: per rule
    ``match_times`` (candidate merges, or a manual rule's occurrences) and
    ``effect_times`` (the merges that happened), as strings like CANN's,
    under ``graph_fusion``; plus braze's groups."""
    report = report or {"level": 0, "rules": {}, "groups": []}
    rules = {name: {"match_times": str(s["matched"]), "effect_times": str(s["applied"]), "source": s["source"],
                    "level": s["level"], "on": s["on"]} for name, s in report["rules"].items()}
    return {model: {"graph_fusion": rules, "level": report["level"],
                    "groups": [{"name": g["name"], "rule": g["rule"], "nodes": g["nodes"]} for g in report["groups"]]}}
