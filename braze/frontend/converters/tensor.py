"""ONNX shape and data-movement converters.

Gathers are in ``gather.py``, constants and shape queries in ``constant.py``,
Resize/Upsample in ``resize.py``. Every shape-like input (axes, shapes,
starts, pads, repeats) must be a compile-time constant.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import VerifyError
from ...ir.registry import broadcast_shapes
from ...ir.types import DTYPES
from ..importer import onnx_dtype
from ..registry import converter


def onnx_axis(ctx, axis: int, rank: int) -> int:
    """An ONNX axis (negative counts from the end) in ``[0, rank)``."""
    if not -rank <= axis < rank:
        raise ctx.error(f"axis {axis} is out of range for an input of rank {rank}")
    return axis % rank


def onnx_axes(ctx, axes, rank: int) -> list[int]:
    normalized = [onnx_axis(ctx, a, rank) for a in axes]
    if len(set(normalized)) != len(normalized):
        raise ctx.error(f"axes {list(axes)} name a dimension twice")
    return normalized


def reshape_to(ctx, x, shape):
    return ctx.op("tensor.reshape", [x], shape=tuple(shape))


# --- reshapes -----------------------------------------------------------------------
@converter("Transpose")
def transpose(ctx, data, *, perm=None):
    perm = perm if perm is not None else tuple(reversed(range(data.type.rank)))
    return ctx.op("tensor.transpose", [data], perm=perm)


@converter("Reshape")
def reshape_v1(ctx, data, *, shape, consumed_inputs=None):
    return _reshape(ctx, data, shape, allowzero=0)


@converter("Reshape", since=5)
def reshape(ctx, data, shape, *, allowzero=0):
    return _reshape(ctx, data, ctx.ints(shape, "'shape'"), allowzero)


def _reshape(ctx, data, shape, allowzero):
    """ONNX's placeholders resolved: 0 copies the input dim (unless
    ``allowzero``), one -1 takes whatever size is left."""
    target = list(shape)
    for i, d in enumerate(target):
        if d == 0 and not allowzero:
            if i >= data.type.rank:
                raise ctx.error(f"shape {list(shape)} copies dim {i} (a 0), but the input has rank {data.type.rank}")
            target[i] = data.type.shape[i]
    if target.count(-1) > 1:
        raise ctx.error(f"shape {list(shape)} has more than one -1")
    if -1 in target:
        known = math.prod(d for d in target if d != -1)
        if known == 0 or data.type.size % known:
            raise ctx.error(f"cannot reshape {data.type} to {list(shape)}")
        target[target.index(-1)] = data.type.size // known
    return reshape_to(ctx, data, target)


@converter("Flatten")
def flatten(ctx, input, *, axis=1):
    shape = input.type.shape
    if not -len(shape) <= axis <= len(shape):
        raise ctx.error(f"axis {axis} is out of range for an input of rank {len(shape)}")
    axis = axis + len(shape) if axis < 0 else axis
    return reshape_to(ctx, input, (math.prod(shape[:axis]), math.prod(shape[axis:])))


@converter("Squeeze")
def squeeze_v1(ctx, data, *, axes=None):
    return _squeeze(ctx, data, axes)


@converter("Squeeze", since=13)
def squeeze(ctx, data, axes=None):
    return _squeeze(ctx, data, ctx.ints(axes, "'axes'"))


def _squeeze(ctx, data, axes):
    shape = data.type.shape
    if axes is None:  # every dim of size 1
        axes = [i for i, d in enumerate(shape) if d == 1]
    axes = onnx_axes(ctx, axes, len(shape))
    wide = [a for a in axes if shape[a] != 1]
    if wide:
        raise ctx.error(f"cannot squeeze axes {wide} of {data.type}: their size is not 1")
    return reshape_to(ctx, data, [d for i, d in enumerate(shape) if i not in axes])


@converter("Unsqueeze")
def unsqueeze_v1(ctx, data, *, axes):
    return _unsqueeze(ctx, data, axes)


@converter("Unsqueeze", since=13)
def unsqueeze(ctx, data, axes):
    return _unsqueeze(ctx, data, ctx.ints(axes, "'axes'"))


def _unsqueeze(ctx, data, axes):
    """Axes index the output, whose rank is the input's plus len(axes)."""
    rank = data.type.rank + len(axes)
    axes = onnx_axes(ctx, axes, rank)
    dims = iter(data.type.shape)
    return reshape_to(ctx, data, [1 if i in axes else next(dims) for i in range(rank)])


@converter("DepthToSpace")
def depth_to_space(ctx, input, *, blocksize, mode="DCR"):
    n, c, h, w = _nchw(ctx, input)
    b = blocksize
    if c % (b * b):
        raise ctx.error(f"channels {c} are not divisible by blocksize^2 = {b * b}")
    if mode == "DCR":  # depth is (block row, block column, channel)
        split, perm = (n, b, b, c // (b * b), h, w), (0, 3, 4, 1, 5, 2)
    elif mode == "CRD":  # depth is (channel, block row, block column)
        split, perm = (n, c // (b * b), b, b, h, w), (0, 1, 4, 2, 5, 3)
    else:
        raise ctx.error(f"mode '{mode}' is not DCR or CRD")
    moved = ctx.op("tensor.transpose", [reshape_to(ctx, input, split)], perm=perm)
    return reshape_to(ctx, moved, (n, c // (b * b), h * b, w * b))


@converter("SpaceToDepth")
def space_to_depth(ctx, input, *, blocksize, mode="DCR"):
    """``mode`` (opset 28) orders the depth as in DepthToSpace."""
    n, c, h, w = _nchw(ctx, input)
    b = blocksize
    if h % b or w % b:
        raise ctx.error(f"height {h} and width {w} are not divisible by blocksize {b}")
    if mode == "DCR":  # depth is (block row, block column, channel)
        perm = (0, 3, 5, 1, 2, 4)
    elif mode == "CRD":  # depth is (channel, block row, block column)
        perm = (0, 1, 3, 5, 2, 4)
    else:
        raise ctx.error(f"mode '{mode}' is not DCR or CRD")
    blocks = reshape_to(ctx, input, (n, c, h // b, b, w // b, b))
    moved = ctx.op("tensor.transpose", [blocks], perm=perm)
    return reshape_to(ctx, moved, (n, c * b * b, h // b, w // b))


def _nchw(ctx, x):
    if x.type.rank != 4:
        raise ctx.error(f"expects a 4-D NCHW input, got {x.type}")
    return x.type.shape


# --- joining and cutting ------------------------------------------------------------
@converter("Concat")
def concat(ctx, *inputs, axis):
    return ctx.op("tensor.concat", list(inputs), axis=onnx_axis(ctx, axis, inputs[0].type.rank))


@converter("Split")
def split_v1(ctx, input, split_input=None, *, axis=0, split=None):
    """Opset 1 takes the sizes as an input or an attribute; 2 to 12 as an attribute."""
    return _split(ctx, input, axis, split if split is not None else ctx.ints(split_input, "'split'"))


@converter("Split", since=13)
def split_v13(ctx, input, split=None, *, axis=0):
    return _split(ctx, input, axis, ctx.ints(split, "'split'"))


@converter("Split", since=18)
def split_v18(ctx, input, split=None, *, axis=0, num_outputs=None):
    return _split(ctx, input, axis, ctx.ints(split, "'split'"), num_outputs)


def _split(ctx, input, axis, sizes, num_outputs=None):
    """Without sizes: equal parts, one per output; with num_outputs (opset
    18) the last part may be smaller."""
    axis = onnx_axis(ctx, axis, input.type.rank)
    dim = input.type.shape[axis]
    if sizes is None:
        parts = num_outputs or len(ctx.outputs)
        chunk = -(-dim // parts)
        last = dim - chunk * (parts - 1)
        if (dim and last <= 0) or (num_outputs is None and last != chunk):
            raise ctx.error(f"cannot split dim {axis} of {input.type} into {parts} parts")
        sizes = [chunk] * (parts - 1) + [last]
    return ctx.ops("tensor.split", [input], axis=axis, sizes=tuple(sizes))


@converter("Slice")
def slice_v1(ctx, data, *, starts, ends, axes=None):
    return _slice(ctx, data, starts, ends, axes, None)


@converter("Slice", since=10)
def slice_v10(ctx, data, starts, ends, axes=None, steps=None):
    return _slice(ctx, data, ctx.ints(starts, "'starts'"), ctx.ints(ends, "'ends'"),
                  ctx.ints(axes, "'axes'"), ctx.ints(steps, "'steps'"))


def _slice(ctx, data, starts, ends, axes, steps):
    shape = data.type.shape
    axes = onnx_axes(ctx, axes if axes is not None else range(len(starts)), len(shape))
    steps = steps if steps is not None else (1,) * len(axes)
    if not len(starts) == len(ends) == len(steps) == len(axes):
        raise ctx.error(f"starts, ends, axes and steps differ in length: {len(starts)}, {len(ends)}, "
                        f"{len(axes)}, {len(steps)}")
    begin, end, stride = [0] * len(shape), list(shape), [1] * len(shape)
    for axis, b, e, s in zip(axes, starts, ends, steps):
        if s == 0:
            raise ctx.error(f"step 0 on axis {axis}")
        begin[axis], end[axis], stride[axis] = _clamp_slice(b, e, s, shape[axis])
    return ctx.op("tensor.slice", [data], starts=tuple(begin), ends=tuple(end), steps=tuple(stride))


def _clamp_slice(start: int, end: int, step: int, dim: int) -> tuple[int, int, int]:
    """ONNX's rule: negative indices count from the end, then clamp to
    [0, dim] (step > 0) or start to [0, dim-1] and end to [-1, dim-1]
    (step < 0), so INT_MAX/INT_MIN ends mean "to the end"."""
    if dim == 0:
        return 0, 0, 1
    start, end = start + dim if start < 0 else start, end + dim if end < 0 else end
    if step > 0:
        return min(max(start, 0), dim), min(max(end, 0), dim), step
    return min(max(start, 0), dim - 1), min(max(end, -1), dim - 1), step


# --- broadcasting, tiling, padding --------------------------------------------------
@converter("Expand", since=8)
def expand(ctx, input, shape):
    try:  # Expand broadcasts both ways: a 1 in `shape` keeps the input's dim
        target = broadcast_shapes(input.type.shape, ctx.ints(shape, "'shape'"))
    except VerifyError as e:
        raise ctx.error(str(e)) from None
    return ctx.op("tensor.broadcast_to", [input], shape=target)


@converter("Tile", since=6)
def tile(ctx, input, repeats):
    return ctx.op("tensor.tile", [input], repeats=ctx.ints(repeats, "'repeats'"))


@converter("Pad", since=2)
def pad_v2(ctx, data, *, pads, mode="constant", value=0.0):
    return ctx.op("tensor.pad", [data], pads=pads, mode=mode, value=value)


@converter("Pad", since=11)
def pad(ctx, data, pads, constant_value=None, axes=None, *, mode="constant"):
    amounts = ctx.ints(pads, "'pads'")
    if axes is not None:  # opset 18: pads for the listed axes only
        rank = data.type.rank
        axes = onnx_axes(ctx, ctx.ints(axes, "'axes'"), rank)
        if len(amounts) != 2 * len(axes):
            raise ctx.error(f"pads {list(amounts)} need 2 x {len(axes)} entries for axes {axes}")
        full = [0] * (2 * rank)
        for i, a in enumerate(axes):
            full[a], full[rank + a] = amounts[i], amounts[len(axes) + i]
        amounts = full
    value = ctx.scalar(constant_value, 0.0, "'constant_value'")
    return ctx.op("tensor.pad", [data], pads=tuple(amounts), mode=mode, value=float(value))


@converter("Trilu", since=14)
def trilu(ctx, input, k=None, *, upper=1):  # noqa: A002  (ONNX's input name)
    """The upper (lower) triangle of the last two dims from diagonal ``k``
    on (up to), zeros elsewhere: a constant mask, the shape being static."""
    if input.type.rank < 2:
        raise ctx.error(f"needs an input of rank 2 or more, got {input.type}")
    diagonal = int(ctx.scalar(k, 0, "'k'"))
    rows, cols = input.type.shape[-2:]
    offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    keep = offset >= diagonal if upper else offset <= diagonal
    zero = ctx.const(np.zeros((), input.type.np_dtype))
    return ctx.op("math.where", [ctx.const(keep), input, zero])


@converter("EyeLike", since=9)
def eye_like(ctx, input, *, dtype=None, k=0):  # noqa: A002
    """Ones on diagonal ``k`` of a 2-D tensor of the input's shape, a constant."""
    if input.type.rank != 2:
        raise ctx.error(f"needs a 2-D input, got {input.type}")
    out = onnx_dtype(dtype, f"node {ctx.node_name} (EyeLike): attribute 'dtype'") if dtype else input.type.dtype
    return ctx.const(np.eye(*input.type.shape, k=k, dtype=DTYPES[out]))
