"""The layout pass: a blocked channel layout (NCHWc) along conv chains.

A CPU conv kernel vectorizes best over channels: a vector of ``b`` output
channels per pixel, for which the input wants the same ``b`` channels of a
pixel side by side. In NCHW they are a map apart. The pass gives whole conv
chains the blocked layout ``(N, C/b, H, W, b)`` (docs/passes.md, "layout"):

- a 2-D float32 ``nn.conv`` with constant weights, dense, depthwise or
  grouped in whole blocks, whose output channels divide into blocks,
  becomes ``nn.conv_blocked``;
- elementwise ops follow a blocked operand when every other operand is a
  blocked value of the same shape, a per-channel or scalar constant (the
  constant is re-laid out now, at compile time) or a plain value of the
  same shape (converted): bias, BN, activations, residual adds; or one
  value per channel, blocked or plain (a squeeze-and-excitation scale);
- concat and split along the channels, when every part is whole blocks;
  pools over the two spatial dims; a global mean/max/min/sum (keepdims);
- ``layout.to_blocked`` and ``layout.from_blocked`` appear only where a
  chain begins and ends, in the IR for anyone to see. A first conv whose
  input channels fill no block (an RGB image) reads its plain input.

The block is the target's float32 vector lanes (``block``); a tensor whose
channels it does not divide takes half of it if that divides, else stays
plain. Chains with fewer than ``min_convs`` convs stay plain: converting in
and out costs about what one conv saves; so does a conv in half blocks that
feeds no other conv (``narrow_ends``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..ir import Builder, Module, Operation, Value, constant_value
from ..ir.ops.conv import is_depthwise
from ..ir.ops.layout import to_blocked_array
from ..ir.registry import Kind, lookup
from ..ir.types import Location
from .canonicalize import per_channel
from .dce import prune_blobs
from .manager import Pass, register_pass
from .rewrite import remove_dead


@register_pass
@dataclass(frozen=True)
class Layout(Pass):
    """Blocked channel layout (NCHWc) along conv chains; transforms only at their ends."""

    name: ClassVar[str] = "layout"
    title: ClassVar[str] = "Layout"
    block: int = 16  # channels a block: the target's float32 lanes
    min_convs: int = 2  # convs a chain needs to be worth converting

    def run(self, module: Module) -> bool:
        changed = False
        for func in module.funcs:
            if any(op.regions for op in func.body.ops):
                continue  # already fused: groups keep their layouts
            chains = _Chains(module, func, self.block)
            narrow = chains.narrow_ends()
            if narrow:
                chains = _Chains(module, func, self.block, skip=narrow)
            kept = chains.kept(self.min_convs)
            if kept:
                _rewrite(module, func, chains, kept)
                remove_dead(func.body)
                changed = True
        if changed:
            prune_blobs(module)
        return changed


def channel_block(channels: int, block: int) -> int | None:
    """The block a tensor of ``channels`` takes: ``block``, else half of it
    (not under 4), else None (it stays plain)."""
    for b in (block, block // 2):
        if b >= 4 and channels % b == 0:
            return b
    return None


#: binary ops that follow a blocked operand (elementwise in their operands)
_BINARY = frozenset({"math.add", "math.sub", "math.mul", "math.div", "math.max", "math.min", "math.pow",
                     "math.prelu"})
#: pools over the two spatial dims, blocked as 3-D pools with a window of 1 along the block
_POOLS = frozenset({"nn.max_pool", "nn.avg_pool"})
#: reductions over both spatial dims (keepdims): a global pool, blocked as it is
_REDUCTIONS = frozenset({"reduce.mean", "reduce.max", "reduce.min", "reduce.sum"})


def _per_channel_shape(small: tuple, shape: tuple) -> bool:
    """``small`` is one value per channel (and image) of an NCHW ``shape``."""
    return len(small) == 4 and small[1] == shape[1] and small[2:] == (1, 1) and small[0] in (1, shape[0])


class _Chains:
    """Which values can be blocked, grouped into chains (union-find)."""

    def __init__(self, module: Module, func, block: int, skip: frozenset[int] = frozenset()):
        self.module, self.block, self.skip = module, block, skip
        self.blocks: dict[int, int] = {}  # id(value) -> its block
        self.parent: dict[int, int] = {}
        self.convs: list[int] = []  # id(result) of each conv
        self.ops: list[Operation] = []  # the ops to rewrite, in order
        for op in func.body.ops:
            if op.regions or not op.results or op.name == "const" or id(op) in skip:
                continue
            blocks = self._blocks(op)
            if blocks is None:
                continue
            for r, b in zip(op.results, blocks):
                self.blocks[id(r)] = b
                self.parent[id(r)] = id(r)
            for v in [*op.operands, *op.results[1:]]:
                if id(v) in self.blocks:
                    self._join(id(op.results[0]), id(v))
            if op.name == "nn.conv":
                self.convs.append(id(op.result))
            self.ops.append(op)

    def _find(self, k: int) -> int:
        while self.parent[k] != k:
            self.parent[k] = self.parent[self.parent[k]]
            k = self.parent[k]
        return k

    def _join(self, a: int, b: int) -> None:
        self.parent[self._find(a)] = self._find(b)

    def _blocks(self, op: Operation) -> list[int] | None:
        """The block of each of ``op``'s results if it can run blocked, else None."""
        if op.name == "nn.conv":
            return self._conv(op)
        blocked = [self.blocks[id(v)] for v in op.operands if id(v) in self.blocks]
        if not blocked or any(r.type.rank != 4 for r in op.results):
            return None
        block = blocked[0]
        opdef = lookup(op.name)
        if opdef is not None and opdef.kind == Kind.ELEMWISE and len(op.operands) == 1:
            return [block]
        if op.name in _BINARY:
            # the other operand: blocked alike, a per-channel or scalar
            # constant, or a plain value of the same shape (converted, as a
            # residual add's shortcut from outside the chain); blocked or
            # plain, it may also be one value per channel, (N, C, 1, 1): a
            # squeeze-and-excitation scale
            shape = op.result.type.shape
            for v in op.operands:
                fits = v.type.shape == shape or _per_channel_shape(v.type.shape, shape)
                if id(v) in self.blocks:
                    if not fits or self.blocks[id(v)] != block:
                        return None
                elif constant_value(v, self.module) is not None:
                    if per_channel(constant_value(v, self.module), 4, 1, shape[1]) is None:
                        return None
                elif not fits:
                    return None
            return [block]
        attrs = opdef.normalize_attrs(op.attributes) if opdef is not None else {}
        if op.name == "tensor.concat" and attrs["axis"] == 1:
            # channel blocks of every operand, one after another: all in one block size
            if all(self.blocks.get(id(v)) == block for v in op.operands):
                return [block]
            return None
        if op.name == "tensor.split" and attrs["axis"] == 1:
            return [block] * len(op.results) if all(s % block == 0 for s in attrs["sizes"]) else None
        if op.name in _POOLS:
            return [block]
        if op.name in _REDUCTIONS and tuple(attrs["axes"]) == (2, 3) and attrs["keepdims"]:
            return [block]
        return None

    def _conv(self, op: Operation) -> list[int] | None:
        x, w = op.operands[0], op.operands[1]
        attrs = lookup(op.name).normalize_attrs(op.attributes)
        if x.type.rank != 4 or x.type.dtype != "f32" or constant_value(w, self.module) is None:
            return None
        m, c = w.type.shape[0], x.type.shape[1]
        group = attrs["group"]
        depthwise = is_depthwise(group, c, m, w.type.shape[1])
        if group == 1 or depthwise:
            block = channel_block(m, self.block)
        else:  # grouped: each group whole blocks of input and output channels
            block = channel_block(math.gcd(m // group, c // group), self.block)
        if block is None:
            return None
        if group != 1 and (self.blocks.get(id(x)) or channel_block(c, self.block)) != block:
            return None
        return [block]

    def narrow_ends(self) -> frozenset[int]:
        """Convs in half blocks (half a vector: 1000 output channels with
        AVX-512's 16 lanes take blocks of 8) that feed no other conv of
        their chain: their kernel would run on half-width vectors, where
        the plain rules pad the channels to whole vectors; and converting
        their output back costs what converting their input does (a
        classifier conv: SqueezeNet's 512 -> 1000 ran 2x onnxruntime's time
        blocked)."""
        ops = {id(op): op for op in self.ops}
        narrow = set()
        for op in self.ops:
            if op.name != "nn.conv" or self.blocks[id(op.result)] == self.block:
                continue
            seen, frontier, feeds_conv = set(), [op.result], False
            while frontier and not feeds_conv:
                v = frontier.pop()
                for user in v.users():
                    if id(user) in seen or id(user) not in ops:
                        continue
                    seen.add(id(user))
                    feeds_conv = feeds_conv or user.name == "nn.conv"
                    frontier.extend(user.results)
            if not feeds_conv:
                narrow.add(id(op))
        return frozenset(narrow)

    def kept(self, min_convs: int) -> set[int]:
        """The values (ids) of the chains with at least ``min_convs`` convs."""
        count: dict[int, int] = {}
        for k in self.convs:
            root = self._find(k)
            count[root] = count.get(root, 0) + 1
        return {k for k in self.blocks if count.get(self._find(k), 0) >= min_convs}


def _rewrite(module: Module, func, chains: _Chains, kept: set[int]) -> None:
    twins: dict[int, Value] = {}  # id(plain value) -> its blocked twin
    packed: dict[tuple[int, int], Value] = {}
    unpacked: dict[int, Value] = {}

    def to_blocked(v: Value, block: int, before: Operation) -> Value:
        key = (id(v), block)
        if key not in packed:
            builder = Builder(module, func.body, before=before)
            packed[key] = builder.value("layout.to_blocked", [v], {"block": block}, loc=_loc(v, "to_blocked"))
        return packed[key]

    rewritten = set()
    for op in chains.ops:
        if id(op.results[0]) not in kept:
            continue
        block = chains.blocks[id(op.results[0])]
        builder = Builder(module, func.body, before=op)
        attrs = dict(op.attributes)
        if op.name == "nn.conv":
            x = op.operands[0]
            inner = chains.block if lookup(op.name).normalize_attrs(attrs)["group"] == 1 else block
            if id(x) in twins:
                xb = twins[id(x)]
            elif channel_block(x.type.shape[1], inner) is not None:
                xb = to_blocked(x, channel_block(x.type.shape[1], inner), op)
            else:
                xb = x  # few input channels: read plain
            new = [builder.value("nn.conv_blocked", [xb, *op.operands[1:]], {**attrs, "block": block}, loc=op.loc)]
        elif op.name in _POOLS:
            a = lookup(op.name).normalize_attrs(attrs)
            pads = tuple(a["pads"])
            window = {"kernel": (*a["kernel"], 1), "strides": (*a["strides"], 1),
                      "dilations": (*a["dilations"], 1), "pads": (*pads[:2], 0, *pads[2:], 0)}
            new = [builder.value(op.name, [twins[id(op.operands[0])]], {**attrs, **window}, loc=op.loc)]
        elif op.name == "tensor.split":
            sizes = tuple(s // block for s in lookup(op.name).normalize_attrs(attrs)["sizes"])
            new = builder.create(op.name, [twins[id(op.operands[0])]], {**attrs, "sizes": sizes}, loc=op.loc).results
        else:
            operands = []
            for v in op.operands:
                if id(v) in twins:
                    operands.append(twins[id(v)])
                elif v.type.size == 1:
                    operands.append(v)  # a scalar broadcasts as it is
                elif constant_value(v, module) is None:  # a plain value from outside the chain
                    operands.append(to_blocked(v, block, op))
                else:  # a per-channel constant, re-laid out now
                    c = per_channel(constant_value(v, module), 4, 1, op.result.type.shape[1])
                    shaped = to_blocked_array(np.ascontiguousarray(c).reshape(1, -1, 1, 1), block)
                    operands.append(builder.const(np.ascontiguousarray(shaped), v.name, v.owner.loc))
            new = [builder.value(op.name, operands, attrs, loc=op.loc)]
        for r, twin in zip(op.results, new):
            twins[id(r)] = twin
        rewritten.add(id(op))
    # plain users of a blocked value read it converted back
    for op in list(func.body.ops):
        if id(op) in rewritten:
            continue
        for i, v in enumerate(op.operands):
            if id(v) in twins and twins[id(v)] is not v:
                if id(v) not in unpacked:
                    after = twins[id(v)].owner
                    builder = Builder(module, func.body, before=_next(func, after))
                    unpacked[id(v)] = builder.value("layout.from_blocked", [twins[id(v)]], loc=_loc(v, "from_blocked"))
                op.set_operand(i, unpacked[id(v)])


def _next(func, op: Operation) -> Operation:
    ops = func.body.ops
    return ops[func.body.index(op) + 1]


def _loc(v: Value, transform: str) -> Location:
    """Where an inserted layout transform comes from: ``<producer node>/<transform>``."""
    owner = v.owner
    source = owner.loc.name if owner is not None and owner.loc is not None else (v.name or "input")
    return Location(f"{source}/{transform}", "Layout")


def layout_summary(module: Module) -> dict:
    """What the layout pass left in ``module`` (fused or not), for
    ``braze explain``: convs in the blocked layout and in the plain one,
    the transforms, and the blocks used."""
    ops = [op for op in module.walk() if op.name in ("nn.conv", "nn.conv_blocked", "layout.to_blocked",
                                                      "layout.from_blocked")]
    blocks = sorted({op.results[0].type.shape[-1] for op in ops if op.name == "nn.conv_blocked"})
    return {"blocked_convs": sum(op.name == "nn.conv_blocked" for op in ops),
            "plain_convs": sum(op.name == "nn.conv" for op in ops),
            "to_blocked": sum(op.name == "layout.to_blocked" for op in ops),
            "from_blocked": sum(op.name == "layout.from_blocked" for op in ops),
            "blocks": blocks}


def summary_line(summary: dict) -> str:
    """``layout_summary`` as one line of text."""
    if not summary["blocked_convs"]:
        return f"layout: plain ({summary['plain_convs']} convs)" if summary["plain_convs"] else ""
    blocks = ", ".join(f"NCHW{b}c" for b in summary["blocks"])
    return (f"layout: {summary['blocked_convs']} of {summary['blocked_convs'] + summary['plain_convs']} convs "
            f"blocked ({blocks}), {summary['to_blocked']} to_blocked and {summary['from_blocked']} "
            f"from_blocked transforms")
