"""The layout pass's rewrite: each op of a kept chain replaced by its
blocked twin (``nn.conv`` by ``nn.conv_blocked``, per-channel constants
re-laid out now), and ``layout.to_blocked``/``layout.from_blocked`` where
a chain meets plain values (passes/layout.py decides the chains)."""

from __future__ import annotations

import numpy as np

from ..ir import Builder, Module, Operation, Value, constant_value
from ..ir.ops.conv import is_depthwise
from ..ir.ops.layout import to_blocked_array
from ..ir.registry import lookup
from ..ir.types import Location
from .canonicalize import per_channel
from .layout_blocks import INT8_GROUP, POOLS, blocking, integer_conv, pad_vector, padded_weights, padding_fill


def rewrite(module: Module, func, chains, kept: set[int]) -> None:
    """Each op of a kept chain replaced by its blocked twin; then the plain
    users of a blocked value read it converted back."""
    rewriter = _Rewriter(module, func, chains)
    for op in chains.ops:
        if id(op.results[0]) in kept:
            rewriter.rewrite(op)
    rewriter.convert_back()


class _Rewriter:
    def __init__(self, module: Module, func, chains):
        self.module, self.func, self.chains = module, func, chains
        self.twins: dict[int, Value] = {}  # id(plain value) -> its blocked twin
        self.packed: dict[tuple[int, int], Value] = {}  # (id(plain value), block) -> to_blocked of it
        self.rewritten: set[int] = set()

    def rewrite(self, op: Operation) -> None:
        block = self.chains.blocks[id(op.results[0])]
        builder = Builder(self.module, self.func.body, before=op)
        if op.name == "nn.conv":
            new = [self._conv(op, builder, block)]
        elif op.name in POOLS:
            a = lookup(op.name).normalize_attrs(dict(op.attributes))
            pads = tuple(a["pads"])
            window = {"kernel": (*a["kernel"], 1), "strides": (*a["strides"], 1),
                      "dilations": (*a["dilations"], 1), "pads": (*pads[:2], 0, *pads[2:], 0)}
            new = [builder.value(op.name, [self.twins[id(op.operands[0])]], {**op.attributes, **window},
                                 loc=op.loc)]
        elif op.name == "tensor.split":
            sizes = tuple(s // block for s in lookup(op.name).normalize_attrs(dict(op.attributes))["sizes"])
            new = builder.create(op.name, [self.twins[id(op.operands[0])]], {**op.attributes, "sizes": sizes},
                                 loc=op.loc).results
        else:
            operands = [self._operand(v, op, builder, block) for v in op.operands]
            new = [builder.value(op.name, operands, dict(op.attributes), loc=op.loc)]
        for r, twin in zip(op.results, new):
            self.twins[id(r)] = twin
        self.rewritten.add(id(op))

    def _conv(self, op: Operation, builder: Builder, block: int) -> Value:
        attrs = dict(op.attributes)
        x = op.operands[0]
        inner = blocking(x.type.shape[1], self.chains.block)
        if id(x) in self.twins:
            xb = self.twins[id(x)]
        elif inner is not None:
            xb = self._to_blocked(x, inner[0], op)
        elif integer_conv(op):
            xb = self._to_blocked(x, INT8_GROUP, op)  # few input channels: whole words of four, zeros after
        else:
            xb = x  # few input channels: read plain
        lanes = self.chains.lanes[id(op.result)]
        operands = padded_weights(self.module, builder, op, xb, lanes)
        w = op.operands[1].type.shape
        if is_depthwise(lookup(op.name).normalize_attrs(attrs)["group"], x.type.shape[1], w[0], w[1]):
            attrs["group"] = lanes  # a group a channel, padding included
        if self.chains.padded(op.result):  # for the reader of the IR: the channels before padding
            attrs["braze.channels"] = op.result.type.shape[1]
        return builder.value("nn.conv_blocked", [xb, *operands], {**attrs, "block": block}, loc=op.loc)

    def _operand(self, v: Value, op: Operation, builder: Builder, block: int) -> Value:
        """An elementwise op's operand in the blocked layout."""
        if id(v) in self.twins:
            return self.twins[id(v)]
        if v.type.size == 1:
            return v  # a scalar broadcasts as it is
        data = constant_value(v, self.module)
        if data is None:  # a plain value from outside the chain
            return self._to_blocked(v, block, op)
        c = per_channel(data, 4, 1, op.result.type.shape[1])  # a per-channel constant, re-laid out now
        c = pad_vector(c, self.chains.lanes[id(op.results[0])], padding_fill(op.name, op.operands.index(v)))
        shaped = to_blocked_array(np.ascontiguousarray(c).reshape(1, -1, 1, 1), block)
        return builder.const(np.ascontiguousarray(shaped), v.name, v.owner.loc)

    def _to_blocked(self, v: Value, block: int, before: Operation) -> Value:
        key = (id(v), block)
        if key not in self.packed:
            builder = Builder(self.module, self.func.body, before=before)
            self.packed[key] = builder.value("layout.to_blocked", [v], {"block": block},
                                             loc=_loc(v, "to_blocked"))
        return self.packed[key]

    def convert_back(self) -> None:
        """Plain users of a blocked value read it through one from_blocked."""
        unpacked: dict[int, Value] = {}
        for op in list(self.func.body.ops):
            if id(op) in self.rewritten:
                continue
            for i, v in enumerate(op.operands):
                twin = self.twins.get(id(v))
                if twin is None or twin is v:
                    continue
                if id(v) not in unpacked:
                    builder = Builder(self.module, self.func.body, before=_next(self.func, twin.owner))
                    back = {"channels": v.type.shape[1]} if self.chains.padded(v) else {}
                    unpacked[id(v)] = builder.value("layout.from_blocked", [twin], back,
                                                    loc=_loc(v, "from_blocked"))
                op.set_operand(i, unpacked[id(v)])


def _next(func, op: Operation) -> Operation:
    ops = func.body.ops
    return ops[func.body.index(op) + 1]


def _loc(v: Value, transform: str) -> Location:
    """Where an inserted layout transform comes from: ``<producer node>/<transform>``."""
    owner = v.owner
    source = owner.loc.name if owner is not None and owner.loc is not None else (v.name or "input")
    return Location(f"{source}/{transform}", "Layout")
