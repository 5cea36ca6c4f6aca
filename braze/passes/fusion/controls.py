"""The user's controls over fusion: options, and what they say about each op.

Every control is a field of ``FusionOptions`` (and so an option of the
``fuse`` pass): ``no_fuse`` / ``only_fuse`` (op types, ONNX or braze),
``skip_nodes`` (ONNX node names), ``scope``, ``switch`` (rules on/off, with
``ALL`` as the default), ``max_group_size``, ``memory_limit`` and
``tile_limit``. Two also
live in the IR text, so that a script can mark ops by editing it:
``braze.no_fuse = true`` and ``braze.fusion_scope = "label"``.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from ...errors import FusionRuleError, PassError
from ...ir import Operation
from .graph import Graph, node_name


@dataclass(frozen=True)
class FusionOptions:
    """How the ``fuse`` pass groups ops (docs/fusion.md has examples).

    ``switch`` holds ``NAME=on|off`` items (``ALL`` is the default for every
    rule) or paths to JSON files ``{"ALL": "on", "attention": "off"}``; a
    mapping is accepted from Python. ``rules`` is a JSON file of manual rules.
    ``max_group_size`` (ops) and ``memory_limit`` (bytes) are 0 when unlimited.
    ``tile_limit`` (bytes, 0: unlimited) bounds a group's working tile, the
    on-chip buffer one tile of it needs (tile.py); an Ascend-like target sets
    it to its unified buffer. A manual rule that can never apply (an op type
    braze does not know, a node not in the graph) is a ``FusionRuleWarning``,
    or with ``strict_rules`` a ``FusionRuleError``.
    
    Example::

        braze.compile("model.onnx", fusion=braze.FusionOptions(level=3, no_fuse=("Slice",), scope="encoder*"))
    """

    level: int = 2
    no_fuse: tuple[str, ...] = ()
    only_fuse: tuple[str, ...] = ()
    skip_nodes: tuple[str, ...] = ()
    scope: str = ""
    switch: tuple[str, ...] = ()
    rules: str = ""
    max_group_size: int = 0
    memory_limit: int = 0
    tile_limit: int = 0
    strict_rules: bool = False

    def __post_init__(self):
        # From Python, lists and dicts are natural; keep the fields hashable
        # and printable as pipeline options.
        for key in ("no_fuse", "only_fuse", "skip_nodes"):
            value = getattr(self, key)
            object.__setattr__(self, key, (value,) if isinstance(value, str) else tuple(value))
        switch = self.switch
        if isinstance(switch, Mapping):
            switch = tuple(f"{k}={_on_off(v)}" for k, v in switch.items())
        object.__setattr__(self, "switch", (switch,) if isinstance(switch, str) else tuple(switch))
        if not 0 <= self.level <= 3:
            raise PassError(f"pass 'fuse': fusion level must be 0 to 3, got {self.level}")
        for key in ("max_group_size", "memory_limit", "tile_limit"):
            if getattr(self, key) < 0:
                raise PassError(f"pass 'fuse': option '{key.replace('_', '-')}' must be 0 (unlimited) or more, "
                                f"got {getattr(self, key)}")


def _on_off(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


# --- rule switches --------------------------------------------------------------------
def parse_switch(items: tuple[str, ...], known: list[str]) -> dict[str, bool]:
    """``{"ALL": bool, rule: bool}`` from ``NAME=on|off`` items and JSON files."""
    table: dict[str, bool] = {}
    for item in items:
        if "=" in item:
            name, _, value = item.partition("=")
            table[name.strip()] = _switch_value(name.strip(), value.strip(), "switch option")
        else:
            table.update(_switch_file(item))
    unknown = [n for n in table if n != "ALL" and n not in known]
    if unknown:
        raise FusionRuleError(f"rule switch names unknown rule(s) {', '.join(map(repr, unknown))} "
                              f"(rules: ALL, {', '.join(known)})")
    return table


def _switch_file(path: str) -> dict[str, bool]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise FusionRuleError(f"switch file {path}: cannot read it as JSON: {e}") from None
    if not isinstance(data, dict):
        raise FusionRuleError(f"switch file {path}: expected an object like "
                              '{"ALL": "on", "attention": "off"}')
    return {str(k): _switch_value(str(k), v, f"switch file {path}") for k, v in data.items()}


def _switch_value(name: str, value, where: str) -> bool:
    text = _on_off(value).lower()
    if text not in ("on", "off", "true", "false", "1", "0"):
        raise FusionRuleError(f"{where}: rule '{name}' must be on or off, got {value!r}")
    return text in ("on", "true", "1")


# --- scope ----------------------------------------------------------------------------
def parse_scope(text: str, graph: Graph) -> Callable[[int], bool] | None:
    """A predicate on node indices, or None when everything is in scope.

    Forms (alternatives separated by ``;``): a glob on node names, matched
    against the whole name or a prefix of it (``encoder.layer.[0-5]``);
    ``re:REGEX`` searched in node names; ``index:A-B`` node indices
    (positions of the non-constant ops in the function before fusion,
    inclusive); ``between:A..B`` the ops on paths from A to B, where A and B
    are node names or graph input / output names. Globs and regexes also
    match an op's ``braze.fusion_scope`` label.
    """
    if not text.strip():
        return None
    inside: set[int] = set()
    tests: list[Callable[[str], bool]] = []
    for part in (p.strip() for p in text.split(";") if p.strip()):
        if part.startswith("index:"):
            inside |= _index_range(part[6:], len(graph))
        elif part.startswith("between:"):
            inside |= _between(part[8:], graph)
        elif part.startswith("re:"):
            tests.append(_regex(part[3:]))
        else:
            tests.append(_glob(part))

    def in_scope(i: int) -> bool:
        if i in inside:
            return True
        op = graph.ops[i]
        names = [node_name(op), op.attributes.get("braze.fusion_scope", "")]
        return any(test(n) for test in tests for n in names if n)

    return in_scope


def _glob(pattern: str) -> Callable[[str], bool]:
    # A prefix matches too: `encoder.layer.[0-5]` selects whole layers.
    return lambda name: fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(name, pattern + "*")


def _regex(text: str) -> Callable[[str], bool]:
    try:
        pattern = re.compile(text)
    except re.error as e:
        raise FusionRuleError(f"scope 're:{text}' is not a valid regular expression: {e}") from None
    return lambda name: pattern.search(name) is not None


def _index_range(text: str, n: int) -> set[int]:
    m = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", text)
    if not m or int(m.group(1)) > int(m.group(2)):
        raise FusionRuleError(f"scope 'index:{text}' must be index:A-B with A <= B")
    return set(range(int(m.group(1)), min(int(m.group(2)), n - 1) + 1))


def _between(text: str, graph: Graph) -> set[int]:
    start, sep, end = text.partition("..")
    if not sep:
        raise FusionRuleError(f"scope 'between:{text}' must be between:A..B")
    first = _endpoint(start.strip(), graph, side="start")
    last = _endpoint(end.strip(), graph, side="end")
    return graph.descendants(first) & graph.ancestors(last)


def _endpoint(name: str, graph: Graph, side: str) -> set[int]:
    nodes = {i for i, op in enumerate(graph.ops) if node_name(op) == name}
    func = graph.func
    if not nodes and side == "start":
        nodes = {u for a in func.args if a.name == name for u in graph.users(a)}
    if not nodes and side == "end":
        nodes = {graph.producer(v) for n, v in zip(func.result_names, func.outputs) if n == name} - {None}
    if not nodes:
        raise FusionRuleError(f"scope between: '{name}' is neither a node name nor a graph "
                              f"{'input' if side == 'start' else 'output'}")
    return nodes


# --- what the controls say about one op ------------------------------------------------
class Controls:
    """Answers, per node: may it join a group at all, and if not, why."""

    def __init__(self, options: FusionOptions, graph: Graph, rule_names: list[str]):
        self.graph = graph
        self.no_fuse = frozenset(options.no_fuse)
        self.only_fuse = frozenset(options.only_fuse)
        self.skip_nodes = frozenset(options.skip_nodes)
        self.in_scope = parse_scope(options.scope, graph)
        self.switch = parse_switch(options.switch, rule_names)
        self.max_group_size = options.max_group_size
        self.memory_limit = options.memory_limit
        self.tile_limit = options.tile_limit

    def rule_on(self, name: str) -> bool:
        return self.switch.get(name, self.switch.get("ALL", True))

    def refuse_node(self, i: int) -> tuple[str, str] | None:
        """(reason, detail) when node ``i`` may not join any group."""
        op = self.graph.ops[i]
        types = _types(op)
        if op.attributes.get("braze.no_fuse", False):
            return "blacklisted", f"{node_name(op)} has braze.no_fuse"
        if types & self.no_fuse:
            return "blacklisted", f"{node_name(op)} is a {sorted(types & self.no_fuse)[0]}, in no_fuse"
        if node_name(op) in self.skip_nodes:
            return "blacklisted", f"{node_name(op)} is in skip_nodes"
        if self.only_fuse and not types & self.only_fuse:
            return "not_whitelisted", f"{node_name(op)} ({op.name}) is not in only_fuse"
        if self.in_scope is not None and not self.in_scope(i):
            return "out_of_scope", f"{node_name(op)} is outside the scope"
        if op.regions:
            return "control_flow", f"{node_name(op)} ({op.name}) holds regions"
        if any(d < 0 for v in list(op.operands) + op.results for d in v.type.shape):
            return "dynamic_shape", f"{node_name(op)} has a shape not known at compile time"
        return None

    def refuse_labels(self, members: set[int]) -> tuple[str, str] | None:
        """Ops with different ``braze.fusion_scope`` labels never share a group."""
        labels = {self.graph.ops[i].attributes.get("braze.fusion_scope", "") for i in members}
        if len(labels) > 1:
            shown = ", ".join(repr(x) if x else "(none)" for x in sorted(labels))
            return "out_of_scope", f"different braze.fusion_scope labels: {shown}"
        return None


# --- controls that match nothing -------------------------------------------------------
def unmatched_controls(options: FusionOptions, ops: list[Operation]) -> list[str]:
    """A message for each control that matches none of ``ops`` (every op of
    the model, its control-flow regions' included), naming what the model
    has instead: such a control is almost always a typo or a name from
    another export, and would otherwise change nothing (or, for a scope,
    turn all fusion off) without a word."""
    ops = [op for op in ops if op.name not in ("const", "func.return", "fuse.yield", "fuse.group")]
    names = [node_name(op) for op in ops]
    types = set().union(*(_types(op) for op in ops)) if ops else set()
    onnx_types = sorted({op.loc.op_type for op in ops if op.loc and op.loc.op_type})
    messages = []
    for key in ("no_fuse", "only_fuse"):
        for t in getattr(options, key):
            if t not in types:
                messages.append(f"no op matches {key} '{t}'; the model's op types are {_sample(onnx_types, 12)}")
    for name in options.skip_nodes:
        if name not in names:
            messages.append(f"no node matches skip_nodes '{name}'; node names look like {_sample(names, 3)}")
    for part in (p.strip() for p in options.scope.split(";") if p.strip()):
        if part.startswith(("index:", "between:")):
            continue  # checked where they are parsed
        test = _regex(part[3:]) if part.startswith("re:") else _glob(part)
        labels = [op.attributes.get("braze.fusion_scope", "") for op in ops]
        if not any(test(n) for n in names + labels if n):
            messages.append(f"no node matches scope '{part}'; node names look like {_sample(names, 3)}")
    return messages


def _sample(items: list[str], n: int) -> str:
    shown = ", ".join(repr(x) for x in items[:n])
    return shown + (f", ... ({len(items)} in all)" if len(items) > n else "") if items else "(none)"


def _types(op: Operation) -> frozenset[str]:
    """The names an op answers to in no_fuse/only_fuse: its ONNX op type and braze name."""
    return frozenset(filter(None, (op.loc.op_type if op.loc else None, op.name)))
