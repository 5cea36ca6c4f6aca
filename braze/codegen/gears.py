"""One packed layout per weight across gears.

Each gear is scheduled for its own shapes, so two gears can pick different
register tiles for the same weight (a GEMM with one row takes wider panels
than one with 128) and so pack it twice. Before the build, every kernel's
rule is planned (cheap: no scheduling) in every gear; where the gears'
packings of a kernel differ, the gears that differ are pinned to the
packing of the gear with the most work (the largest inputs) by the rule's
params that fix the packed layout (``Param.packs``) only, so each keeps its own tiles otherwise and the
weight is stored once (assemble.assemble_functions stores equal bytes once).
"""

from __future__ import annotations

import math

from ..ir import Module
from ..targets import Target
from .kernel import partition
from .schedules import plan


def _packing(kernel, target, pins) -> tuple[str, str, dict] | None:
    """(packing name, rule, its layout-fixing params) of the kernel's one
    packed weight; None if it packs none or several, or planning fails (the
    build then says why)."""
    try:
        choices = plan(kernel, target, pins)
    except Exception:  # noqa: BLE001 -- a pin the build will reject with its own error
        return None
    found = []
    for c in choices:
        if not c.rule.packed_by:
            continue
        try:
            packings = c.rule.packings(kernel.ops[c.index], kernel, target, c.full)
        except Exception:  # noqa: BLE001 -- the rule cannot pack with these params: nothing to agree on
            continue
        found += [(p.name, c.rule.name, {k: c.params[k] for k in c.rule.packed_by if k in c.params})
                  for p in packings.values()]
    return found[0] if len(found) == 1 else None


def agree_packings(modules: list[Module], target: Target, schedules: dict | None = None) -> list[dict]:
    """Per gear (in order), the extra pins ``{kernel name: {"rule", "params"}}``
    that give every weight the packing of the largest gear planning it."""
    schedules = schedules or {}
    size = [sum(math.prod(a.type.shape) for a in m.main.args) for m in modules]
    planned: dict[str, list] = {}  # kernel name -> [(gear, (packing, rule, params))]
    for gear, module in enumerate(modules):
        for kernel in partition(module.main):
            if "function" in schedules.get(kernel.name, {}):
                continue
            found = _packing(kernel, target, schedules.get(kernel.name))
            if found:
                planned.setdefault(kernel.name, []).append((gear, found))
    pins: list[dict] = [{} for _ in modules]
    for name, entries in planned.items():
        _, (packing, rule, params) = max(entries, key=lambda e: size[e[0]])
        for gear, (own, own_rule, _) in entries:
            if own != packing and own_rule == rule:  # a different rule: that gear keeps its own copy
                base = schedules.get(name, {})
                pins[gear][name] = {"rule": rule, "params": {**base.get("params", {}), **params}}
    return pins
