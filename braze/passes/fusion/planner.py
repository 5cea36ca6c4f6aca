"""The fusion plan: clusters of nodes, and the one gate every merge goes through.

Rules (automatic and manual) only *propose* merges; ``Planner.propose``
decides. It checks, in this order, and refuses with the first reason that
applies: the controls on each op, ``braze.fusion_scope`` labels, the rule's
switch, the rule's level, the kinds of the ops, convexity, the number of
outputs, ``max_group_size``, ``memory_limit`` and ``tile_limit``. A merge is never retried in
the same form, so every rule terminates.

Clusters are what ends up as ``fuse.group`` ops. A cluster that a manual rule
made (or a group already in the IR) is *sealed*: automatic rules leave it
alone, because manual rules win.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Protocol

from ...ir.registry import Kind
from .controls import Controls
from .explain import FusionReport, Refusal
from .graph import HEAVY, LIGHT, Graph, node_names
from .tile import working_tile


_FROM_RULE = object()


class Rule(Protocol):
    """What the gate needs to know about the rule that proposes a merge."""

    name: str
    level: int  # the lowest fusion level at which it applies
    max_heavy: int | None  # heavy (anchor/reduce) ops it may join; None: any
    multi_output: bool  # whether its groups may have several outputs at any level
    manual: bool


@dataclass
class Cluster:
    members: set[int]
    rules: list[str] = field(default_factory=list)  # the rules that merged into it, in order
    sealed: bool = False


class Planner:
    """Clusters of the graph's nodes, merged by rules through ``propose``."""

    def __init__(self, graph: Graph, controls: Controls, level: int, report: FusionReport):
        self.graph, self.controls, self.level, self.report = graph, controls, level, report
        self._cluster = [Cluster({i}) for i in range(len(graph))]
        for i, op in enumerate(graph.ops):
            # A group already in the IR (fuse run twice) stays as it is.
            self._cluster[i].sealed = bool(op.regions)
        self.merges = 0
        #: Level 3 turns this on for its own rules; see ``_check_outputs``.
        self.allow_multi_output = False
        #: Merges refused only because they need several outputs, for level 3 to retry.
        self.deferred: list[tuple[list[int], list[int], int | None]] = []
        self._tried: set[tuple[str, frozenset[int]]] = set()
        self._refusals: list[tuple[Refusal, list[int]]] = []

    # --- reading the plan ---------------------------------------------------------
    def cluster(self, i: int) -> Cluster:
        return self._cluster[i]

    def kind(self, i: int) -> Kind:
        return self.graph.kinds[i]

    def kinds(self, members: Iterable[int]) -> set[Kind]:
        return {self.graph.kinds[i] for i in members}

    def heavy(self, members: Iterable[int]) -> int:
        return sum(1 for i in members if self.graph.kinds[i] in HEAVY)

    def is_light(self, i: int) -> bool:
        """Whether node i's cluster holds only elementwise/broadcast/injective ops."""
        return self.kinds(self.cluster(i).members) <= LIGHT

    def consumers(self, i: int) -> list[tuple[int, int]]:
        """(member, user) pairs: nodes outside i's cluster that read one of its
        results, each user once, in graph order."""
        members = self.cluster(i).members
        pairs = {}
        for m in sorted(members):
            for u in self.graph.succs[m]:
                if u not in members:
                    pairs.setdefault(u, m)
        return [(m, u) for u, m in sorted(pairs.items())]

    def clusters(self) -> list[Cluster]:
        """Every cluster once, ordered by its first member."""
        seen, out = set(), []
        for c in self._cluster:
            if id(c) not in seen:
                seen.add(id(c))
                out.append(c)
        return sorted(out, key=lambda c: min(c.members))

    # --- deciding -----------------------------------------------------------------
    def propose(self, rule: Rule, nodes: Iterable[int], edge: Iterable[int], max_heavy=_FROM_RULE) -> bool:
        """Merge the clusters of ``nodes`` if every check passes; record why
        not otherwise. ``edge`` are the nodes to name in a refusal;
        ``max_heavy`` overrides the rule's (for retried merges)."""
        parts = list({id(c): c for c in (self._cluster[i] for i in nodes)}.values())
        if len(parts) < 2:
            return False
        if any(c.sealed for c in parts) and not rule.manual:
            return False  # a manual group won this ground
        union = set().union(*(c.members for c in parts))
        key = (rule.name, frozenset(union))
        if key in self._tried:
            return False
        self._tried.add(key)
        edge = sorted(set(edge))
        stats = self.report.rules[rule.name]
        stats.matched += 1
        limit = rule.max_heavy if max_heavy is _FROM_RULE else max_heavy
        refusal = self._check(rule, parts, union, limit)
        if refusal is not None:
            if refusal[0] == "deferred":
                self.deferred.append((sorted(union), edge, limit))
            else:
                self.refuse(rule, edge, *refusal)
            return False
        self._merge(parts, union, rule)
        stats.applied += 1
        return True

    def refuse(self, rule: Rule, edge: list[int], reason: str, detail: str = "",
               nodes: list[str] | None = None) -> None:
        names = node_names(self.graph.ops[i] for i in edge) if nodes is None else nodes
        self._refusals.append((Refusal(names, reason, rule.name, detail), edge))

    def _merge(self, parts: list[Cluster], union: set[int], rule: Rule) -> None:
        # Each rule once, in the order they last applied.
        rules = [r for r in dict.fromkeys(r for c in parts for r in c.rules) if r != rule.name]
        merged = Cluster(union, rules + [rule.name], sealed=rule.manual)
        for i in union:
            self._cluster[i] = merged
        self.merges += 1

    def _check(self, rule: Rule, parts: list[Cluster], union: set[int],
               max_heavy: int | None) -> tuple[str, str] | None:
        controls = self.controls
        for i in sorted(union):
            refused = controls.refuse_node(i)
            if refused:
                return refused
        if any(c.sealed for c in parts) and rule.manual:
            return "overlap", "some of these ops already belong to an earlier manual group"
        return (controls.refuse_labels(union) or self._check_rule(rule)
                or self._check_kinds(union, parts, max_heavy) or self._check_convex(union)
                or self._check_outputs(rule, union) or self._check_limits(union))

    def _check_rule(self, rule: Rule) -> tuple[str, str] | None:
        if not self.controls.rule_on(rule.name):
            return "switched_off", f"rule {rule.name} is switched off"
        if rule.level > self.level:
            return "level", f"{rule.name} needs level {rule.level}"
        return None

    def _check_kinds(self, union: set[int], parts: list[Cluster], max_heavy: int | None):
        opaque = [i for i in sorted(union) if self.graph.kinds[i] == Kind.OPAQUE]
        if opaque:
            op = self.graph.ops[opaque[0]]
            return "incompatible_kinds", f"{op.name} is opaque and cannot join a kernel"
        if max_heavy is None:
            return None
        # A rule may not put more heavy ops together than it allows, but light
        # ops may still join a cluster that another rule made heavier.
        allowed = max([max_heavy] + [self.heavy(c.members) for c in parts])
        if self.heavy(union) > allowed:
            return "incompatible_kinds", f"{self.heavy(union)} anchor/reduce ops in one kernel"
        return None

    def _check_convex(self, union: set[int]):
        if not self.graph.is_convex(union):
            return "would_create_cycle", "a path leaves the group and comes back into it"
        return None

    def _check_outputs(self, rule: Rule, union: set[int]):
        """One output per group below level 3 (values only returned do not
        count); level 3 retries such merges in its ``multi_output`` rule."""
        live = self.graph.live_outputs(union)
        if len(live) <= 1 or rule.multi_output or self.allow_multi_output:
            return None
        if self.level < 3:
            return "level", f"a group with {len(live)} outputs needs level 3"
        if not self.controls.rule_on("multi_output"):
            return "switched_off", "rule multi_output is switched off"
        return "deferred", ""

    def _check_limits(self, union: set[int]):
        limit = self.controls.max_group_size
        if limit and len(union) > limit:
            return "max_group_size", f"{len(union)} ops > max_group_size {limit}"
        limit = self.controls.memory_limit
        if limit:
            size = self.graph.working_set(union)
            if size > limit:
                return "memory_limit", f"working set {size} bytes > memory_limit {limit}"
        limit = self.controls.tile_limit
        if limit:
            size = working_tile(self.graph, union)
            if size > limit:
                return "memory_limit", f"working tile {size} bytes > tile_limit {limit}, the on-chip buffer"
        return None

    # --- the record -------------------------------------------------------------------
    def write_refusals(self, report: FusionReport) -> None:
        """Refusals into the report, except those whose nodes ended up in one
        group anyway (another rule, or a later retry, joined them)."""
        for refusal, edge in self._refusals:
            if len(edge) > 1 and len({id(self._cluster[i]) for i in edge}) == 1:
                continue
            report.refuse(refusal)
