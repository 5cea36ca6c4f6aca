"""Dead code elimination."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..ir import Module
from .manager import Pass, register_pass
from .rewrite import remove_dead


@register_pass
@dataclass(frozen=True)
class DCE(Pass):
    """Remove ops whose results are unused (all ops are pure) and unused weights."""

    name: ClassVar[str] = "dce"
    title: ClassVar[str] = "DeadCodeElimination"

    def run(self, module: Module) -> bool:
        changed = False
        for op in list(module.walk()):
            for region in op.regions:
                for block in region.blocks:
                    changed |= remove_dead(block)
        for func in module.funcs:
            changed |= remove_dead(func.body)
        return prune_blobs(module) or changed


def prune_blobs(module: Module) -> bool:
    """Drop blob-store entries that no const op refers to any more."""
    used = {op.attributes["value"].handle for op in module.walk()
            if op.name == "const" and hasattr(op.attributes["value"], "handle")}
    dead = [h for h in module.blobs if h not in used]
    for h in dead:
        del module.blobs[h]
    return bool(dead)
