"""One packed layout per weight across gears.

Each gear is scheduled for its own shapes, so two gears can pick different
register tiles for the same weight (a GEMM with one row takes wider panels
than one with 128) and so pack it twice. Before the build, every kernel's
rule is planned (cheap: no scheduling) in every gear; where the gears'
packings of a kernel differ, the gears that differ are pinned to the
packing of the gear with the most work (the largest inputs) by the rule's
``packed_by`` params only, so each keeps its own tiles otherwise and the
weight is stored once (assemble.assemble_functions stores equal bytes once).
"""

from __future__ import annotations

import math

from ..ir import Module
from ..targets import Target
from .kernel import partition
from .schedules import plan


def _packings(kernel, target, pins) -> dict[str, tuple[str, dict]] | None:
    """The kernel's planned packings: packing name per anchor, with the rule
    and its packed_by params; None if planning fails (the build says why)."""
    try:
        choices = plan(kernel, target, pins)
    except Exception:  # noqa: BLE001 -- a pin the build will reject with its own error
        return None
    out = {}
    for c in choices:
        if not c.rule.packed_by:
            continue
        try:
            found = c.rule.packings(kernel.ops[c.index], kernel, target, c.params)
        except Exception:  # noqa: BLE001 -- the rule cannot pack with these params: nothing to agree on
            continue
        for packing in found.values():
            out[f"{c.index}"] = (packing.name, c.rule.name, {k: c.params[k] for k in c.rule.packed_by if k in c.params})
    return out


def agree_packings(modules: list[Module], target: Target, schedules: dict | None = None) -> list[dict]:
    """Per gear (in order), the extra pins ``{kernel name: {"rule", "params"}}``
    that give every weight the packing of the largest gear planning it."""
    schedules = schedules or {}
    size = [sum(math.prod(a.type.shape) for a in m.main.args) for m in modules]
    planned: dict[str, list] = {}  # kernel name -> [(gear, packings)]
    for gear, module in enumerate(modules):
        for kernel in partition(module.main):
            if "function" in schedules.get(kernel.name, {}):
                continue
            found = _packings(kernel, target, schedules.get(kernel.name))
            if found:
                planned.setdefault(kernel.name, []).append((gear, found))
    pins: list[dict] = [{} for _ in modules]
    for name, entries in planned.items():
        if len({tuple(sorted((k, v[0]) for k, v in p.items())) for _, p in entries}) < 2:
            continue
        _, chosen = max(entries, key=lambda e: size[e[0]])
        if len(chosen) != 1:
            continue  # several packed anchors in one kernel: left to each gear
        for gear, found in entries:
            if found == chosen or set(found) != set(chosen):
                continue
            rules = {rule for _, rule, _ in chosen.values()}
            if len(rules) != 1 or {rule for _, rule, _ in found.values()} != rules:
                continue  # different rules: each gear keeps its own (and its own copy)
            params = {k: v for _, _, p in chosen.values() for k, v in p.items()}
            base = schedules.get(name, {})
            pins[gear][name] = {"rule": rules.pop(), "params": {**base.get("params", {}), **params}}
    return pins
