"""ONNX gather converters: Gather, GatherND, GatherElements."""

from __future__ import annotations

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
