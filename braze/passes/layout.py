"""The layout pass: a blocked channel layout (NCHWc) along conv chains.

A CPU conv kernel vectorizes best over channels: a vector of ``b`` output
channels per pixel, for which the input wants the same ``b`` channels of a
pixel side by side. In NCHW they are a map apart. The pass gives whole conv
chains the blocked layout ``(N, C/b, H, W, b)`` (docs/passes.md, "layout"):

- a 2-D float ``nn.conv`` with constant weights, dense, depthwise or
  grouped in whole blocks, whose output channels divide into blocks,
  becomes ``nn.conv_blocked``; so does a quantized one (uint8 input, int8
  weight, int32 result; not depthwise), whose int32 output takes the
  float32 block (the int32 lanes of a vector) and whose input blocks are
  whole words of four uint8 channels (``INT8_GROUP``): a first conv whose
  input channels fill no block (an RGB image) reads them padded to a
  multiple of four, in blocks of four, rather than plain, so that the
  integer rule (``vnni_conv``) takes it too; the spatial padding keeps the
  conv's ``pad_value``, the padded channels zeros (their weights are
  zero);
- elementwise ops follow a blocked operand when every other operand is a
  blocked value of the same shape, a per-channel or scalar constant (the
  constant is re-laid out now, at compile time) or a plain value of the
  same shape (converted): bias, BN, activations, residual adds; or one
  value per channel, blocked or plain (a squeeze-and-excitation scale); a
  quantize or dequantize with constant scale and zero point (a quantized
  conv's epilogue);
- concat and split along the channels, when every part is whole blocks;
  pools over the two spatial dims; a global mean/max/min/sum (keepdims);
- ``layout.to_blocked`` and ``layout.from_blocked`` appear only where a
  chain begins and ends, in the IR for anyone to see. A first conv whose
  input channels fill no block (an RGB image) reads its plain input.

The block is the target's float32 vector lanes (``block``). A tensor whose
channels it does not divide is padded up to whole blocks when that adds at
most ``MAX_PADDING`` of them (a third: 24 -> 32 channels with AVX-512's 16
lanes; whole vectors, where half blocks would run every FMA at half width), else
takes half a block if that divides, else stays plain. A padded tensor's
padding channels hold zeros as they leave a conv (its weights and bias get
zero rows, and zero columns for a padded input, at compile time); the ops
that follow compute on them as on any channel, and the pass checks, by
running each op on the padding's value, that they stay finite (a conv
multiplies them by zero weights: an infinity would make a NaN); an op that
would not keeps the plain layout. Concat and split take no padded tensor.
Chains with fewer than ``min_convs`` convs stay plain: converting in and out
costs about what one conv saves; so does a conv in half blocks that feeds no
other conv (``narrow_ends``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..ir import Module, Operation, Value, constant_value
from ..ir.ops.conv import is_depthwise
from ..ir.registry import Kind, lookup
from .canonicalize import per_channel
from .layout_blocks import INT8_GROUP, POOLS, blocking, channel_block, integer_conv, padding_fill
from .layout_rewrite import rewrite
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
                rewrite(module, func, chains, kept)
                remove_dead(func.body)
                changed = True
        if changed:
            prune_blobs(module)
        return changed


#: binary ops that follow a blocked operand (elementwise in their operands)
_BINARY = frozenset({"math.add", "math.sub", "math.mul", "math.div", "math.max", "math.min", "math.pow",
                     "math.prelu"})
#: quantize and dequantize: elementwise in x, their scale and zero point constants (scalar or per channel)
_QUANT = frozenset({"quant.quantize", "quant.dequantize"})
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
        self.lanes: dict[int, int] = {}  # id(value) -> its channels blocked, padding included
        self.padding: dict[int, float] = {}  # id(value) -> what its padding channels hold
        self.parent: dict[int, int] = {}
        self.convs: list[int] = []  # id(result) of each conv
        self.ops: list[Operation] = []  # the ops to rewrite, in order
        for op in func.body.ops:
            if op.regions or not op.results or op.name == "const" or id(op) in skip:
                continue
            blocked = self._blocks(op)
            if blocked is None:
                continue
            for r, (b, lanes, fill) in zip(op.results, blocked):
                self.blocks[id(r)], self.lanes[id(r)], self.padding[id(r)] = b, lanes, fill
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

    def padded(self, v: Value) -> bool:
        return self.lanes[id(v)] != v.type.shape[1]

    def _blocks(self, op: Operation) -> list[tuple[int, int, float]] | None:
        """(block, channels blocked, padding's value) of each of ``op``'s
        results if it can run blocked, else None."""
        if op.name == "nn.conv":
            return self._conv(op)
        blocked = [v for v in op.operands if id(v) in self.blocks]
        if not blocked or any(r.type.rank != 4 for r in op.results):
            return None
        block, lanes = self.blocks[id(blocked[0])], self.lanes[id(blocked[0])]
        padded = self.padded(blocked[0])
        opdef = lookup(op.name)
        attrs = opdef.normalize_attrs(op.attributes) if opdef is not None else {}
        if opdef is not None and opdef.kind == Kind.ELEMWISE and len(op.operands) == 1:
            fill = self._fill(op, attrs, [self.padding[id(blocked[0])]]) if padded else 0.0
            return None if fill is None else [(block, lanes, fill)]
        if op.name in _BINARY or op.name in _QUANT:
            # the other operand: blocked alike, a per-channel or scalar
            # constant, or a plain value of the same shape (converted, as a
            # residual add's shortcut from outside the chain); blocked or
            # plain, it may also be one value per channel, (N, C, 1, 1): a
            # squeeze-and-excitation scale
            shape = op.result.type.shape
            fills: list[float | None] = []
            for i, v in enumerate(op.operands):
                fits = v.type.shape == shape or _per_channel_shape(v.type.shape, shape)
                c = constant_value(v, self.module)
                if i > 0 and op.name in _QUANT and c is None:
                    return None  # a scale or zero point computed at run time
                if id(v) in self.blocks:
                    if not fits or self.blocks[id(v)] != block or self.lanes[id(v)] != lanes:
                        return None
                    fills.append(self.padding[id(v)])
                elif c is not None:
                    if per_channel(c, 4, 1, shape[1]) is None:
                        return None
                    fills.append(float(c.reshape(-1)[0]) if c.size == 1 else padding_fill(op.name, i))
                elif not fits:
                    return None
                else:  # converted: zeros in its padding; a runtime scalar: unknown
                    fills.append(None if v.type.size == 1 else 0.0)
            fill = self._fill(op, attrs, fills) if padded else 0.0
            return None if fill is None else [(block, lanes, fill)]
        fill = self.padding[id(blocked[0])]
        if op.name == "tensor.concat" and attrs["axis"] == 1:
            # channel blocks of every operand, one after another: all in one block size, none padded
            if all(self.blocks.get(id(v)) == block and not self.padded(v) for v in op.operands):
                return [(block, op.result.type.shape[1], 0.0)]
            return None
        if op.name == "tensor.split" and attrs["axis"] == 1:
            if padded or any(s % block for s in attrs["sizes"]):
                return None
            return [(block, r.type.shape[1], 0.0) for r in op.results]
        if op.name in POOLS:
            # a max over a window of padding is its value; an average, where it
            # counts the border's zeros, only when that is zero
            return [(block, lanes, fill)] if op.name == "nn.max_pool" or fill == 0.0 else None
        if op.name in _REDUCTIONS and tuple(attrs["axes"]) == (2, 3) and attrs["keepdims"]:
            if op.name == "reduce.sum":
                fill *= math.prod(op.operands[0].type.shape[2:])
            return [(block, lanes, fill)] if math.isfinite(fill) else None
        return None

    @staticmethod
    def _fill(op: Operation, attrs: dict, fills: list[float | None]) -> float | None:
        """What an elementwise op makes of its operands' padding values
        (None: unknown), if finite; else None (the op stays plain)."""
        if any(f is None for f in fills):
            return None
        opdef = lookup(op.name)
        args = [np.full((1, 1, 1, 1), f, v.type.np_dtype) for f, v in zip(fills, op.operands)]
        try:
            with np.errstate(all="ignore"):
                out = np.asarray(opdef.evaluate(*args, **attrs), dtype=np.float64).reshape(-1)
        except Exception:  # an op the check cannot run: no padding through it
            return None
        return float(out[0]) if out.size == 1 and math.isfinite(out[0]) else None

    def _conv(self, op: Operation) -> list[tuple[int, int, float]] | None:
        x, w = op.operands[0], op.operands[1]
        attrs = lookup(op.name).normalize_attrs(op.attributes)
        integer = integer_conv(op)
        if x.type.rank != 4 or (x.type.dtype not in ("f32", "f16", "bf16") and not integer) \
                or constant_value(w, self.module) is None:
            return None
        m, c = w.type.shape[0], x.type.shape[1]
        group = attrs["group"]
        depthwise = is_depthwise(group, c, m, w.type.shape[1])
        if integer and depthwise:
            return None  # no integer rule takes a blocked depthwise conv: the plain generic schedule
        if group == 1 or depthwise:
            choice = blocking(m, self.block)
        else:  # grouped: each group whole blocks of input and output channels, no padding
            b = channel_block(math.gcd(m // group, c // group), self.block)
            choice = None if b is None or (id(x) in self.blocks and self.padded(x)) else (b, m)
        if choice is None:
            return None
        block, lanes = choice
        if group != 1:  # the input in the output's blocks
            inner = (self.blocks[id(x)], self.lanes[id(x)]) if id(x) in self.blocks else blocking(c, self.block)
            if inner != (block, lanes if depthwise else c) or (integer and block % INT8_GROUP):
                return None
        bias = op.operands[2] if len(op.operands) > 2 else None
        if lanes != m and bias is not None and constant_value(bias, self.module) is None:
            return None  # a padded output needs a constant bias to pad
        return [(block, lanes, 0.0)]

    def narrow_ends(self) -> frozenset[int]:
        """Convs in half blocks (half a vector: 8 output channels with
        AVX-512's 16 lanes) that feed no other conv of their chain: their
        kernel would run on half-width vectors, where the plain rules pad
        the channels to whole vectors; and converting their output back
        costs what converting their input does (a classifier conv, 512 ->
        1000 channels)."""
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
