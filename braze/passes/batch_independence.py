"""Does a model keep the samples of a batch apart? (``--pad-batch``)

A batch between two gears can run on the larger gear, padded with zeros, and
have the padding sliced off its outputs, only if no sample's outputs depend
on another sample's inputs. This analysis proves that over the IR, before
fusion: it follows the batch axis (axis 0 of every graph input) through every
op and refuses, naming the ONNX node, where an op would mix samples: a
reduction, softmax or norm over the batch axis, a matmul contracting it, a
reshape that merges or splits it, a gather, slice, concat, pad, tile or
resize along it, or an op it knows nothing about. Values computed from
constants only carry no batch axis. Each graph output must carry the batch
axis (that is where the padding is sliced off).
"""

from __future__ import annotations

import math
from typing import NoReturn

from ..ir import Func, Operation, Value
from ..ir.registry import contraction, lookup

#: ops whose every operand and result are the same shape, or broadcast to it
_POINTWISE_KINDS = ("elemwise", "broadcast")
#: reductions and normalizations over ``axis`` / ``axes``
_OVER_AXES = ("reduce.sum", "reduce.mean", "reduce.max", "reduce.min", "reduce.prod", "reduce.l2")
_OVER_AXIS = ("reduce.argmax", "reduce.argmin", "nn.softmax", "nn.log_softmax", "nn.cumsum", "nn.topk")
#: besides the convs: ops over images (N, C, ...) that take the batch on axis 0 only
_IMAGE_OPS = ("nn.max_pool", "nn.avg_pool", "nn.instance_norm", "nn.lrn", "tensor.resize", "layout.to_blocked",
              "layout.from_blocked")


class Mixes(Exception):
    """The reason the model cannot be proven to keep samples apart."""


def batch_outputs(func: Func) -> list[int]:
    """The batch axis of each graph output; Mixes (with the reason) if the
    model may mix samples across the batch, or an output has no batch axis."""
    axes: dict[int, int | None] = {id(a): 0 for a in func.args}
    for op in func.body.ops:
        if op.name == "func.return":
            continue
        for r, axis in zip(op.results, _through(op, [axes.get(id(v)) for v in op.operands])):
            axes[id(r)] = axis
    out = []
    for name, v in zip(func.result_names, func.outputs):
        axis = axes.get(id(v))
        if axis is None:
            raise Mixes(f"output '{name}' does not depend on the batch, so there is no batch axis to slice")
        out.append(axis)
    return out


def _where(op: Operation) -> str:
    node = op.loc.name if op.loc else "?"
    return f"node {node} ({op.name})"


def _rank(v: Value) -> int:
    return len(v.type.shape)


def _norm(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _through(op: Operation, inputs: list[int | None]) -> list[int | None]:
    """The batch axis of each result, given those of the operands."""
    if all(a is None for a in inputs):
        return [None] * len(op.results)
    name = op.name
    if _kind(name) in _POINTWISE_KINDS or name in ("tensor.identity", "tensor.broadcast_to"):
        return _pointwise(op, inputs)
    if contraction(name) == "conv" or name in _IMAGE_OPS:
        return _image(op, inputs)
    if name == "nn.matmul":
        return _matmul(op, inputs)
    if name in _OVER_AXES or name in _OVER_AXIS or name == "nn.layer_norm":
        return _reduction(op, inputs)
    if name == "tensor.transpose":
        return [list(op.attributes["perm"]).index(inputs[0])]
    if name == "tensor.reshape":
        return [_reshape_axis(op, inputs[0])]
    if name in ("tensor.gather", "tensor.gather_elements"):
        return _gather(op, inputs)
    if name in ("tensor.slice", "tensor.pad", "tensor.tile", "tensor.split", "tensor.concat"):
        return _cut_or_join(op, inputs)
    if name == "tensor.shape":
        return [None]  # the shape is the gear's, a constant once the gear is bound
    _refuse(op, "is not one braze can prove keeps the samples of a batch apart")


def _refuse(op: Operation, why: str) -> NoReturn:
    raise Mixes(f"{_where(op)} {why}")


def _pointwise(op: Operation, inputs: list[int | None]) -> list[int]:
    if op.name == "nn.batch_norm" and inputs[0] != 0:
        _refuse(op, "normalizes with the batch axis elsewhere than axis 0")
    out_rank = _rank(op.results[0])
    # broadcasting aligns the shapes from the right
    found = {a + out_rank - _rank(v) for a, v in zip(inputs, op.operands) if a is not None}
    if len(found) != 1:
        _refuse(op, "lines up two operands' batch axes on different axes")
    axis = found.pop()
    if any(r.type.shape[axis] != v.type.shape[x] for x, v in zip(inputs, op.operands) if x is not None
           for r in op.results):
        _refuse(op, "broadcasts along the batch axis")
    return [axis] * len(op.results)


def _image(op: Operation, inputs: list[int | None]) -> list[int]:
    """A conv, pool or other op over images (N, C, ...): the batch on axis 0 only."""
    if any(x is not None for x in inputs[1:]):
        _refuse(op, "takes its weights from the batch")
    if inputs[0] != 0:
        _refuse(op, "works on images with the batch axis elsewhere than axis 0")
    if op.name == "tensor.resize" and op.results[0].type.shape[0] != op.operands[0].type.shape[0]:
        _refuse(op, "resizes the batch axis")
    return [0]


def _matmul(op: Operation, inputs: list[int | None]) -> list[int]:
    ra, rb, out_rank = _rank(op.operands[0]), _rank(op.operands[1]), _rank(op.results[0])
    a, b = inputs[0], inputs[1]
    axes = []
    if a is not None:
        if a == ra - 1 or ra == 1:
            _refuse(op, "contracts the batch axis (it is the rows' length)")
        axes.append(out_rank - 2 if a == ra - 2 else a + out_rank - ra)
    if b is not None:
        if b == rb - 2 or rb == 1:
            _refuse(op, "contracts the batch axis (it is the columns' length)")
        axes.append(out_rank - 1 if b == rb - 1 else b + out_rank - rb)
    if len(set(axes)) != 1:
        _refuse(op, "multiplies two operands whose batch axes land on different axes")
    return [axes[0]]


def _reduction(op: Operation, inputs: list[int | None]) -> list[int]:
    """A reduction, softmax or norm: over axes other than the batch's."""
    name, attrs, a = op.name, op.attributes, inputs[0]
    rank = _rank(op.operands[0])
    if name in _OVER_AXES:
        axes = [_norm(x, rank) for x in attrs.get("axes") or range(rank)]
    elif name == "nn.layer_norm":
        axes = list(range(_norm(attrs.get("axis", -1), rank), rank))
    else:
        axes = [_norm(attrs.get("axis", -1), rank)]
    if a in axes:
        _refuse(op, "reduces over the batch axis")
    if any(x is not None for x in inputs[1:]):
        _refuse(op, "takes its parameters from the batch")
    keep = attrs.get("keepdims", 1) or name in ("nn.softmax", "nn.log_softmax", "nn.cumsum", "nn.topk",
                                                "nn.layer_norm")
    axis = a if keep else a - sum(1 for x in axes if x < a)
    return [axis] * len(op.results)


def _gather(op: Operation, inputs: list[int | None]) -> list[int]:
    a, idx = inputs[0], inputs[1]
    axis = _norm(op.attributes.get("axis", 0), _rank(op.operands[0]))
    if op.name == "tensor.gather":
        if a is not None and (a == axis or idx is not None):
            _refuse(op, "gathers along the batch axis" if a == axis else "indexes the batch with the batch")
        if a is not None:
            return [a if a < axis else a + _rank(op.operands[1]) - 1]
        return [axis + idx]
    if a == axis or (a is not None and idx is not None and a != idx):
        _refuse(op, "gathers along the batch axis")
    return [idx if idx is not None else a]


def _cut_or_join(op: Operation, inputs: list[int | None]) -> list[int]:
    """slice, pad, tile, split, concat: along any axis but the batch's."""
    found = {x for x in inputs if x is not None}
    if len(found) != 1:
        _refuse(op, "lines up operands' batch axes on different axes")
    a = found.pop()
    joins = op.name == "tensor.concat" and _norm(op.attributes.get("axis", 0), _rank(op.results[0])) == a
    if joins or any(r.type.shape[a] != op.operands[inputs.index(a)].type.shape[a] for r in op.results):
        _refuse(op, "cuts, pads, repeats or joins along the batch axis")
    return [a] * len(op.results)


def _reshape_axis(op: Operation, a: int) -> int:
    """The batch axis after a reshape: the dims before it must multiply to
    the same count on both sides, and the batch dim itself must survive."""
    before, after = op.operands[0].type.shape, op.results[0].type.shape
    lead = math.prod(before[:a])
    for b in range(len(after) + 1):
        if math.prod(after[:b]) == lead and b < len(after) and after[b] == before[a]:
            return b
    _refuse(op, "merges or splits the batch axis")


def _kind(name: str) -> str:
    op = lookup(name)
    return op.kind.value if op is not None else ""
