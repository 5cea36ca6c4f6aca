"""Fusion: group ops into ``fuse.group`` kernels (docs/fusion.md).

- ``graph``: the dataflow graph and convexity;
- ``controls``: ``FusionOptions`` and what they say about each op;
- ``planner``: clusters and the one gate every merge goes through;
- ``rules``: the automatic rules by level, as data;
- ``manual``: pattern rules and explicit groups, and the rules file;
- ``explain``: the record of every decision;
- ``fuse``: the ``fuse`` pass and ``fuse_module``;
- ``draw``: the fused graph as Graphviz DOT or a self-contained HTML page.
"""

from .controls import FusionOptions
from .explain import REASONS, FusionReport, GroupRecord, Refusal, RuleStats
from .fuse import Fuse, attach_regions, explain, fuse_module, ungroup
from .manual import ExplicitGroup, PatternNode, PatternRule, load_rules, parse_rules
from .rules import RULES, FusionRule

__all__ = ["REASONS", "RULES", "attach_regions", "ExplicitGroup", "Fuse", "FusionOptions", "FusionReport", "FusionRule",
           "GroupRecord", "PatternNode", "PatternRule", "Refusal", "RuleStats", "explain", "fuse_module",
           "load_rules", "parse_rules", "ungroup"]
