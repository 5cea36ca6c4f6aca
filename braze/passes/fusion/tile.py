"""The working tile of a group: the on-chip bytes one tile of it needs.

An Ascend-like NPU runs a fused kernel tile by tile: every tensor the
vector unit touches passes through the unified buffer (UB), double-buffered
so that transfers overlap compute, while a cube (conv/matmul) reads its
operands from L1. A group fits the chip when the smallest tile it can run
with fits the UB; ``FusionOptions.tile_limit`` refuses a merge whose tile
would not (reason ``memory_limit``).

The smallest tile covers the same fraction ``f`` of every tensor of the
group (a tile of the output needs the matching part of each input and
intermediate). ``f`` is the largest of what the members need at least:

- a cube op: one 16x16 fractal of its output;
- a reduction (reduce.*, softmax, LayerNorm...): whole reduced rows of its
  input, and all of its per-row operands (a LayerNorm's scale and bias);
- any op: one 256-byte vector repeat of its largest tensor.

Each tensor's share is rounded up to a 32-byte UB block. The figures are
Ascend's (cube fractal, vector repeat, UB block); they are the same on the
chips braze describes.
"""

from __future__ import annotations

import math

from ...ir import Operation, Value
from ...ir.registry import Kind, contraction, lookup
from .graph import Graph

FRACTAL = 16 * 16  # elements of the cube's output fractal
REPEAT = 256  # bytes of one vector instruction repeat
BLOCK = 32  # bytes of one unified-buffer block
BUFFERS = 2  # double buffering


def reduced_extent(op: Operation) -> int:
    """Elements of one reduced row of a reduce-kind op's first operand (1 if none)."""
    opdef = lookup(op.name)
    if opdef is None or opdef.kind != Kind.REDUCE or not op.operands:
        return 1
    shape = op.operands[0].type.shape
    rank = len(shape)
    if rank == 0:
        return 1
    attrs = opdef.normalize_attrs(op.attributes)
    if op.name == "nn.instance_norm":
        axes = range(2, rank)
    elif op.name == "nn.layer_norm":
        axes = range(attrs["axis"] % rank, rank)
    elif "axes" in attrs:
        axes = attrs["axes"] or range(rank)
    elif "axis" in attrs:
        axes = [attrs["axis"] % rank]
    else:
        axes = range(rank)
    return math.prod(shape[a] for a in axes)


def working_tile(graph: Graph, members: set[int]) -> int:
    """Bytes of the unified buffer one tile of a kernel of ``members`` needs."""
    ops = [graph.ops[i] for i in sorted(members)]
    inputs = graph.inputs(members)
    defined = [r for op in ops for r in op.results]
    largest = max((v.type.size for v in inputs + defined), default=1) or 1

    fraction = 0.0
    per_row: dict[int, int] = {}  # operands a reduction needs whole rows of, with the row's elements
    for op in ops:
        out = op.results[0].type if op.results else None
        if out is None or out.size == 0:
            continue
        # a vector repeat over the op's largest tensor: a reduction's input, an elementwise op's output
        widest = max([v.type for v in op.operands] + [out], key=lambda t: t.size)
        fraction = max(fraction, REPEAT / widest.np_dtype.itemsize / max(widest.size, 1))
        if contraction(op.name):  # the cube (matrix) unit, reading its operands from L1
            fraction = max(fraction, FRACTAL / out.size)
        row = reduced_extent(op)
        if row > 1:
            fraction = max(fraction, row / max(op.operands[0].type.size, 1))
            for v in op.operands[1:]:
                per_row[id(v)] = max(per_row.get(id(v), 0), row)
    fraction = min(1.0, fraction or 1.0 / largest)

    total = 0
    for v in _in_buffer(inputs, defined, ops):
        share = v.type.nbytes * fraction
        if id(v) in per_row:
            share = max(share, min(v.type.nbytes, per_row[id(v)] * v.type.np_dtype.itemsize))
        total += _blocks(min(share, v.type.nbytes) if v.type.nbytes else 0)
    return BUFFERS * total


def _in_buffer(inputs: list[Value], defined: list[Value], ops: list[Operation]) -> list[Value]:
    """The tensors that pass through the unified buffer: everything the group
    computes, and its inputs except those only a cube op reads (from L1)."""
    vector_reads = {id(v) for op in ops if not contraction(op.name) for v in op.operands}
    return [v for v in inputs if id(v) in vector_reads] + defined


def _blocks(nbytes: float) -> int:
    return BLOCK * math.ceil(nbytes / BLOCK) if nbytes > 0 else 0
