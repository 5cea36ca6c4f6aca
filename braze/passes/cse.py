"""Common subexpression elimination.

Two ops are the same computation when they have the same name, operands,
attributes and result types; two constants are the same when their data is
(blobs are compared by content, so duplicated weights are shared too).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import ClassVar

from ..ir import Module
from ..ir.core import Block
from ..ir.types import DenseResource
from .manager import Pass, register_pass
from .rewrite import remove_dead


@register_pass
@dataclass(frozen=True)
class CSE(Pass):
    """Merge identical ops and identical constants."""

    name: ClassVar[str] = "cse"
    title: ClassVar[str] = "CSE"

    def run(self, module: Module) -> bool:
        digests: dict[str, str] = {}
        changed = False
        for func in module.funcs:
            changed |= _cse_block(func.body, module, digests)
        return changed


def _key(op, module: Module, digests: dict[str, str]):
    attrs = []
    for k in sorted(op.attributes):
        v = op.attributes[k]
        if isinstance(v, DenseResource) and v.handle in module.blobs:
            if v.handle not in digests:
                data = module.blobs[v.handle]
                digests[v.handle] = hashlib.sha1(data.tobytes()).hexdigest() + str(data.dtype)
            v = ("blob", digests[v.handle])
        attrs.append((k, v))
    return (op.name, tuple(id(v) for v in op.operands), tuple(attrs), tuple(r.type for r in op.results))


def _cse_block(block: Block, module: Module, digests: dict) -> bool:
    seen: dict = {}
    changed = False
    for op in block.ops:
        if op.regions:
            for region in op.regions:
                for inner in region.blocks:
                    changed |= _cse_block(inner, module, digests)
            continue
        if not op.results:
            continue
        key = _key(op, module, digests)
        first = seen.setdefault(key, op)
        if first is not op:
            for old, new in zip(op.results, first.results):
                old.replace_all_uses_with(new)
            changed = True
    if changed:
        remove_dead(block)
    return changed
