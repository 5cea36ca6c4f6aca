"""Data movement: ``tensor.*`` (injective ops whose output shapes are static).

Gathers live in ``gather.py`` and ``tensor.resize`` in ``resize.py``.
"""

from __future__ import annotations

import numpy as np

from ...errors import VerifyError
from ..registry import Float, Int, Ints, Kind, OpDef, Str, broadcast_shapes, register
from ..types import TensorType


@register
class Reshape(OpDef):
    """Same data, new static shape (ONNX Reshape/Flatten/Squeeze/Unsqueeze)."""

    name = "tensor.reshape"
    kind = Kind.INJECTIVE
    operands = ("x",)
    attrs = {"shape": Ints()}

    def infer(self, x: TensorType, *, shape):
        if any(d < 0 for d in shape):
            raise VerifyError(f"shape {list(shape)} must be fully static (no -1 or 0 placeholders)")
        if TensorType(shape, x.dtype).size != x.size:
            raise VerifyError(f"cannot reshape {x} ({x.size} elements) to {list(shape)}")
        return x.with_shape(shape)

    def evaluate(self, x, *, shape):
        return x.reshape(shape)


@register
class Transpose(OpDef):
    """Permute dimensions: result dim i is input dim ``perm[i]``."""

    name = "tensor.transpose"
    kind = Kind.INJECTIVE
    operands = ("x",)
    attrs = {"perm": Ints()}

    def infer(self, x: TensorType, *, perm):
        if sorted(perm) != list(range(x.rank)):
            raise VerifyError(f"perm {list(perm)} is not a permutation of {x.rank} dims")
        return x.with_shape([x.shape[p] for p in perm])

    def evaluate(self, x, *, perm):
        return np.transpose(x, perm)


@register
class Identity(OpDef):
    """The operand itself (ONNX Identity, inference-mode Dropout)."""

    name = "tensor.identity"
    kind = Kind.INJECTIVE
    operands = ("x",)

    def infer(self, x: TensorType):
        return x

    def evaluate(self, x):
        return x


@register
class Concat(OpDef):
    """Join the operands along ``axis`` (non-negative); every other dim and
    the element type must agree."""

    name = "tensor.concat"
    kind = Kind.INJECTIVE
    operands = ("inputs*",)
    attrs = {"axis": Int()}

    def infer(self, *inputs: TensorType, axis):
        if not inputs:
            raise VerifyError("needs at least one operand")
        first = inputs[0]
        if not 0 <= axis < first.rank:
            raise VerifyError(f"axis {axis} is out of range for rank {first.rank}")
        for t in inputs[1:]:
            if t.dtype != first.dtype or t.rank != first.rank or any(
                    a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != axis):
                raise VerifyError(f"operands {first} and {t} differ outside axis {axis}")
        shape = list(first.shape)
        shape[axis] = sum(t.shape[axis] for t in inputs)
        return first.with_shape(shape)

    def evaluate(self, *inputs, axis):
        return np.concatenate(inputs, axis=axis)


@register
class Split(OpDef):
    """Cut ``x`` along ``axis`` into consecutive pieces of ``sizes``; one
    result per size."""

    name = "tensor.split"
    kind = Kind.INJECTIVE
    operands = ("x",)
    attrs = {"axis": Int(), "sizes": Ints()}

    def infer(self, x: TensorType, *, axis, sizes):
        if not 0 <= axis < x.rank:
            raise VerifyError(f"axis {axis} is out of range for rank {x.rank}")
        if any(s < 0 for s in sizes) or sum(sizes) != x.shape[axis]:
            raise VerifyError(f"sizes {list(sizes)} do not add up to dim {axis} of {x}")
        return [x.with_shape(x.shape[:axis] + (s,) + x.shape[axis + 1:]) for s in sizes]

    def evaluate(self, x, *, axis, sizes):
        return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


@register
class Slice(OpDef):
    """Strided slice (ONNX Slice) with one normalized ``starts``/``ends``/
    ``steps`` entry per dim: result dim i has ``ceil((ends[i] - starts[i])
    / steps[i])`` elements (at least 0); for a negative step an end of -1
    means "through index 0".

    The entries are clamped as ONNX Slice does: ``0 <= start, end <= dim``
    for a positive step; ``0 <= start <= dim - 1`` and ``-1 <= end <= dim - 1``
    for a negative one (where -1 is not Python's "last element").
    """

    name = "tensor.slice"
    kind = Kind.INJECTIVE
    operands = ("x",)
    attrs = {"starts": Ints(), "ends": Ints(), "steps": Ints()}

    def infer(self, x: TensorType, *, starts, ends, steps):
        if not len(starts) == len(ends) == len(steps) == x.rank:
            raise VerifyError(f"starts, ends and steps need one entry per dim of {x}")
        shape = []
        for dim, start, end, step in zip(x.shape, starts, ends, steps):
            if step > 0:
                ok = 0 <= start <= dim and 0 <= end <= dim
            else:
                ok = step < 0 and 0 <= start <= dim - 1 and -1 <= end <= dim - 1
            if not ok:
                raise VerifyError(f"slice {start}:{end}:{step} is not normalized for a dim of size {dim}")
            shape.append(max(0, -((start - end) // step)))  # ceil((end - start) / step)
        return x.with_shape(shape)

    def evaluate(self, x, *, starts, ends, steps):
        return x[tuple(slice(s, e if e >= 0 else None, st) for s, e, st in zip(starts, ends, steps))]


@register
class BroadcastTo(OpDef):
    """Broadcast ``x`` (numpy rules, aligned to the right) to exactly
    ``shape`` (ONNX Expand, whose bidirectional result the converter computes)."""

    name = "tensor.broadcast_to"
    kind = Kind.BROADCAST
    operands = ("x",)
    attrs = {"shape": Ints()}

    def infer(self, x: TensorType, *, shape):
        if len(shape) < x.rank or broadcast_shapes(x.shape, shape) != tuple(shape):
            raise VerifyError(f"{x} does not broadcast to {list(shape)}")
        return x.with_shape(shape)

    def evaluate(self, x, *, shape):
        return np.broadcast_to(x, shape)


@register
class Tile(OpDef):
    """Repeat ``x`` ``repeats[i]`` times along each dim i."""

    name = "tensor.tile"
    kind = Kind.INJECTIVE
    operands = ("x",)
    attrs = {"repeats": Ints()}

    def infer(self, x: TensorType, *, repeats):
        if len(repeats) != x.rank or any(r < 0 for r in repeats):
            raise VerifyError(f"repeats {list(repeats)} need one non-negative entry per dim of {x}")
        return x.with_shape([d * r for d, r in zip(x.shape, repeats)])

    def evaluate(self, x, *, repeats):
        return np.tile(x, repeats)


PAD_MODES = ("constant", "reflect", "edge", "wrap")


@register
class Pad(OpDef):
    """Pad (or, for negative amounts, crop) every dim by ``pads``, in ONNX
    order: the amounts before each dim, then those after (ONNX Pad).

    Crops apply first, then ``mode`` fills the padding: ``constant`` with
    ``value`` (cast to the element type), ``reflect`` mirrors without
    repeating the edge (at most dim - 1 deep), ``edge`` repeats the edge,
    ``wrap`` continues periodically.
    """

    name = "tensor.pad"
    kind = Kind.INJECTIVE
    operands = ("x",)
    attrs = {"pads": Ints(), "mode": Str("constant", PAD_MODES), "value": Float(0.0)}

    def infer(self, x: TensorType, *, pads, mode, value):
        if len(pads) != 2 * x.rank:
            raise VerifyError(f"pads {list(pads)} need 2 x {x.rank} entries (all begins, then all ends)")
        shape = [d + b + e for d, b, e in zip(x.shape, pads[:x.rank], pads[x.rank:])]
        if any(d < 0 for d in shape):
            raise VerifyError(f"pads {list(pads)} crop more than {x} has")
        for d, b, e in zip(x.shape, pads[:x.rank], pads[x.rank:]):
            cropped = d + min(b, 0) + min(e, 0)
            if mode == "reflect" and max(b, e) > cropped - 1:
                raise VerifyError(f"reflect pads {list(pads)} exceed dim - 1 of {x}")
            if mode in ("edge", "wrap") and cropped == 0 and max(b, e) > 0:
                raise VerifyError(f"{mode} cannot pad an empty dim of {x}")
        return x.with_shape(shape)

    def evaluate(self, x, *, pads, mode, value):
        rank = x.ndim
        begins, ends = pads[:rank], pads[rank:]
        x = x[tuple(slice(-min(b, 0), x.shape[i] + min(e, 0)) for i, (b, e) in enumerate(zip(begins, ends)))]
        width = [(max(b, 0), max(e, 0)) for b, e in zip(begins, ends)]
        if mode == "constant":
            return np.pad(x, width, mode="constant", constant_values=np.array(value).astype(x.dtype))
        return np.pad(x, width, mode=mode)


@register
class Shape(OpDef):
    """The dims ``start`` to ``end`` (normalized, ``0 <= start <= end <=
    rank``) of the operand's shape as a 1-D i64 tensor. Depends only on the
    operand's type, so it always folds to a constant."""

    name = "tensor.shape"
    kind = Kind.OPAQUE
    operands = ("x",)
    attrs = {"start": Int(0), "end": Int()}
    folds_from_types = True

    def infer(self, x: TensorType, *, start, end):
        if not 0 <= start <= end <= x.rank:
            raise VerifyError(f"start {start} and end {end} must satisfy 0 <= start <= end <= {x.rank}")
        return TensorType((end - start,), "i64")

    def evaluate(self, x: TensorType, *, start, end):
        return np.array(x.shape[start:end], dtype=np.int64)
