"""Manual fusion rules (ATB-style): named patterns and explicit groups.

A rules file is JSON (or YAML), a list of rules or ``{"rules": [...]}``::

    {"rules": [
      {"name": "self_attention", "ops": ["MatMul", "Add", "Softmax", "IsNaN", "Where", "MatMul"]},
      {"name": "guarded_softmax", "ops": [{"op": "Softmax"}, {"op": "IsNaN", "inputs": [0]},
                                         {"op": "Where", "inputs": [1, 0]}]},
      {"name": "stem", "nodes": ["node_Conv_809", "n4"]}
    ]}

``ops`` is a pattern: op types (ONNX op types such as ``MatMul`` or braze
op names such as ``nn.matmul``); a plain string reads the result of the
entry before it, ``{"op": T, "inputs": [i, ...]}`` reads the results of the
listed earlier entries, which makes a small DAG. It is matched everywhere,
each op at most once. ``nodes`` is an explicit group of ONNX node names.
Manual rules run before the automatic ones and win over them; one that
cannot apply is refused with a reason, never changed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Iterator

from ...errors import FusionRuleError
from ...ir import Operation, lookup
from ...ir.registry import source_op_types
from .graph import Graph, node_name
from .planner import Planner

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


class ManualRule:
    """What the planner needs of a manual rule (see ``planner.Rule``)."""

    level: ClassVar[int] = 1
    max_heavy: ClassVar[int | None] = None  # the user knows what the kernel holds
    multi_output: ClassVar[bool] = True
    manual: ClassVar[bool] = True
    name: str

    def apply(self, plan: Planner) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class PatternNode:
    op: str  # ONNX op type or braze op name
    inputs: tuple[int, ...] = ()  # earlier pattern entries whose results it reads


@dataclass(frozen=True)
class PatternRule(ManualRule):
    name: str
    ops: tuple[PatternNode, ...]

    def apply(self, plan: Planner) -> None:
        graph = plan.graph
        unknown = [n.op for n in self.ops if not _known_type(n.op, graph)]
        if unknown:
            plan.refuse(self, [], "unknown_op_type", f"pattern op type(s) {', '.join(map(repr, unknown))} "
                        "are neither ONNX op types braze imports nor braze op names", nodes=[])
            return
        claimed: set[int] = set()
        for match in find_matches(self.ops, graph):
            if claimed.isdisjoint(match):  # overlapping occurrences are one occurrence
                claimed.update(match)
                plan.propose(self, match, match)


@dataclass(frozen=True)
class ExplicitGroup(ManualRule):
    name: str
    nodes: tuple[str, ...]

    def apply(self, plan: Planner) -> None:
        wanted = set(self.nodes)
        found = [i for i, op in enumerate(plan.graph.ops) if node_name(op) in wanted]
        missing = sorted(wanted - {node_name(plan.graph.ops[i]) for i in found})
        if missing:
            plan.report.rules[self.name].matched += 1
            plan.refuse(self, [], "unknown_node", "no such node in the graph", nodes=missing)
        elif len(found) == 1:
            plan.report.rules[self.name].matched += 1  # one op is one kernel already
        else:
            plan.propose(self, found, found)


# --- matching ------------------------------------------------------------------------------
def matches_type(op: Operation, op_type: str) -> bool:
    return op.name == op_type or (op.loc is not None and op.loc.op_type == op_type)


def find_matches(pattern: tuple[PatternNode, ...], graph: Graph) -> Iterator[list[int]]:
    """Each place the pattern matches, as node indices in pattern order; the
    first match from each start node, trying candidates in graph order."""
    for start, op in enumerate(graph.ops):
        if matches_type(op, pattern[0].op):
            match = _extend(pattern, graph, [start])
            if match is not None:
                yield match


def _extend(pattern: tuple[PatternNode, ...], graph: Graph, bound: list[int]) -> list[int] | None:
    if len(bound) == len(pattern):
        return bound
    node = pattern[len(bound)]
    candidates = set(graph.succs[bound[node.inputs[0]]])
    for j in node.inputs[1:]:
        candidates &= set(graph.succs[bound[j]])
    for c in sorted(candidates):
        if c not in bound and matches_type(graph.ops[c], node.op):
            match = _extend(pattern, graph, bound + [c])
            if match is not None:
                return match
    return None


def _known_type(op_type: str, graph: Graph) -> bool:
    if lookup(op_type) is not None or any(matches_type(op, op_type) for op in graph.ops):
        return True
    # Not in this graph: is it an ONNX op type at all? The importer declares
    # the ones it converts when it loads (a compile, `braze explain`, `braze opt`).
    return op_type in source_op_types()


# --- loading -------------------------------------------------------------------------------
def load_rules(path: str | Path) -> list[ManualRule]:
    """The rules of a JSON (or .yaml/.yml) file; FusionRuleError names what is wrong."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise FusionRuleError(f"rules file {path}: cannot read it: {e.strerror or e}") from None
    is_yaml = path.suffix in (".yaml", ".yml")
    parse = _yaml().safe_load if is_yaml else json.loads
    try:
        data = parse(text)
    except Exception as e:  # json and yaml raise their own error types
        raise FusionRuleError(f"rules file {path}: not valid {'YAML' if is_yaml else 'JSON'}: {e}") from None
    return parse_rules(data, str(path))


def _yaml():
    try:
        import yaml  # optional: JSON needs nothing beyond the standard library
    except ImportError:
        raise FusionRuleError("YAML rules files need PyYAML (pip install pyyaml); JSON works without it") from None
    return yaml


def parse_rules(data, source: str = "<rules>") -> list[ManualRule]:
    """Rules from parsed JSON (a list, or ``{"rules": [...]}``) or rule objects."""
    if isinstance(data, dict):
        extra = sorted(set(data) - {"rules"})
        if extra or "rules" not in data:
            found = extra or list(data)
            raise FusionRuleError(f"{source}: expected {{\"rules\": [...]}}, found key(s) {found}")
        data = data["rules"]
    if not isinstance(data, (list, tuple)):
        raise FusionRuleError(f"{source}: expected a list of rules, got {type(data).__name__}")
    rules = [_parse_rule(item, source, k) for k, item in enumerate(data)]
    names = [r.name for r in rules]
    for name in names:
        if names.count(name) > 1:
            raise FusionRuleError(f"{source}: rule '{name}' is defined {names.count(name)} times")
    return rules


def _parse_rule(item, source: str, k: int) -> ManualRule:
    if isinstance(item, ManualRule):
        return item
    if not isinstance(item, dict):
        raise FusionRuleError(f"{source}: rule #{k} must be an object with a name, got {item!r}")
    name = item.get("name")
    where = f"{source}: rule '{name}'" if isinstance(name, str) else f"{source}: rule #{k}"
    if not isinstance(name, str) or not _NAME.match(name):
        raise FusionRuleError(f"{where}: needs a \"name\" of letters, digits, '_', '.' or '-'")
    extra = sorted(set(item) - {"name", "ops", "nodes", "doc"})
    if extra:
        raise FusionRuleError(f"{where}: unknown key(s) {extra} (keys: name, ops or nodes, doc)")
    if ("ops" in item) == ("nodes" in item):
        raise FusionRuleError(f"{where}: needs exactly one of \"ops\" (a pattern) or \"nodes\" (a group)")
    if "nodes" in item:
        nodes = item["nodes"]
        if not isinstance(nodes, list) or not nodes or not all(isinstance(n, str) for n in nodes):
            raise FusionRuleError(f"{where}: \"nodes\" must be a non-empty list of ONNX node names")
        return ExplicitGroup(name, tuple(nodes))
    return PatternRule(name, _parse_pattern(item["ops"], where))


def _parse_pattern(ops, where: str) -> tuple[PatternNode, ...]:
    if not isinstance(ops, list) or len(ops) < 2:
        raise FusionRuleError(f"{where}: \"ops\" must list at least two op types")
    return tuple(_parse_node(entry, k, where) for k, entry in enumerate(ops))


def _parse_node(entry, k: int, where: str) -> PatternNode:
    if isinstance(entry, str):
        return PatternNode(entry, (k - 1,) if k else ())
    if not isinstance(entry, dict) or not isinstance(entry.get("op"), str) or set(entry) - {"op", "inputs"}:
        raise FusionRuleError(f"{where}: ops[{k}] must be an op type or {{\"op\": T, \"inputs\": [i, ...]}}")
    inputs = entry.get("inputs", [k - 1] if k else [])
    if not isinstance(inputs, list) or not all(isinstance(i, int) and 0 <= i < k for i in inputs):
        raise FusionRuleError(f"{where}: ops[{k}].inputs must list indices of earlier entries (0 to {k - 1})")
    if k and not inputs:
        raise FusionRuleError(f"{where}: ops[{k}] reads no earlier entry; a pattern must be connected")
    if not k and inputs:
        raise FusionRuleError(f"{where}: ops[0] cannot have inputs")
    return PatternNode(entry["op"], tuple(dict.fromkeys(inputs)))
