"""ONNX gather and scatter converters: Gather, GatherND, GatherElements, Scatter,
ScatterElements, ScatterND, TensorScatter, ReverseSequence."""

from __future__ import annotations

import numpy as np

from ..registry import converter
from .tensor import onnx_axis


@converter("Gather")
def gather(ctx, data, indices, *, axis=0):
    return ctx.op("tensor.gather", [data, indices], axis=onnx_axis(ctx, axis, data.type.rank))


@converter("GatherND", since=11)
def gather_nd(ctx, data, indices, *, batch_dims=0):
    return ctx.op("tensor.gather_nd", [data, indices], batch_dims=batch_dims)


@converter("GatherElements", since=11)
def gather_elements(ctx, data, indices, *, axis=0):
    return ctx.op("tensor.gather_elements", [data, indices], axis=onnx_axis(ctx, axis, data.type.rank))


@converter("Scatter", since=9)
def scatter(ctx, data, indices, updates, *, axis=0):
    """Scatter (deprecated in opset 11): ScatterElements without a reduction."""
    return scatter_elements(ctx, data, indices, updates, axis=axis)


@converter("ScatterElements", since=11)
def scatter_elements(ctx, data, indices, updates, *, axis=0, reduction="none"):
    return ctx.op("tensor.scatter_elements", [data, indices, updates], axis=onnx_axis(ctx, axis, data.type.rank),
                  reduction=reduction)


@converter("ScatterND", since=11)
def scatter_nd(ctx, data, indices, updates, *, reduction="none"):
    return ctx.op("tensor.scatter_nd", [data, indices, updates], reduction=reduction)


@converter("TensorScatter", since=24)
def tensor_scatter(ctx, past_cache, update, write_indices=None, *, axis=-2, mode="linear"):
    """``update`` written into ``past_cache`` along ``axis`` from each
    batch's position ``write_indices[b]`` (a KV cache's append); ``circular``
    wraps around the axis."""
    if mode not in ("linear", "circular"):
        raise ctx.error(f"mode '{mode}' is not linear or circular")
    rank = past_cache.type.rank
    axis = onnx_axis(ctx, axis, rank)
    if axis == 0:
        raise ctx.error("axis 0 is the batch axis; the sequence axis must come after it")
    batch, size, steps = past_cache.type.shape[0], past_cache.type.shape[axis], update.type.shape[axis]
    shape = [1] * rank
    shape[axis] = steps
    offsets = ctx.const(np.arange(steps, dtype=np.int64).reshape(shape))
    if write_indices is None:
        index = offsets
    else:
        start = ctx.op("math.cast", [write_indices], to="i64") if write_indices.type.dtype != "i64" else write_indices
        start = ctx.op("tensor.reshape", [start], shape=(batch,) + (1,) * (rank - 1))
        index = ctx.op("math.add", [start, offsets])
    if mode == "circular":
        index = ctx.op("math.mod", [index, ctx.const(np.array(size, np.int64))])
    index = ctx.op("tensor.broadcast_to", [index], shape=update.type.shape)
    return ctx.op("tensor.scatter_elements", [past_cache, index, update], axis=axis)


@converter("ReverseSequence", since=10)
def reverse_sequence(ctx, input, sequence_lens, *, batch_axis=1, time_axis=0):  # noqa: A002
    """Each batch's first ``sequence_lens[b]`` steps along ``time_axis``
    reversed, the rest kept: a gather of per-batch indices."""
    rank = input.type.rank
    batch_axis, time_axis = onnx_axis(ctx, batch_axis, rank), onnx_axis(ctx, time_axis, rank)
    steps, batch = input.type.shape[time_axis], input.type.shape[batch_axis]
    t_shape, b_shape = [1] * rank, [1] * rank
    t_shape[time_axis], b_shape[batch_axis] = steps, batch
    t = ctx.const(np.arange(steps, dtype=np.int64).reshape(t_shape))
    lens = ctx.op("math.cast", [sequence_lens], to="i64") if sequence_lens.type.dtype != "i64" else sequence_lens
    n = ctx.op("tensor.reshape", [lens], shape=tuple(b_shape))
    back = ctx.op("math.sub", [ctx.op("math.sub", [n, ctx.const(np.array(1, np.int64))]), t])
    index = ctx.op("math.where", [ctx.op("math.less", [t, n]), back, t])
    index = ctx.op("tensor.broadcast_to", [index], shape=input.type.shape)
    return ctx.op("tensor.gather_elements", [input, index], axis=time_axis)
