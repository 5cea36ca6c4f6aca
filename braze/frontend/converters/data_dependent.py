"""ONNX ops whose output size depends on the values of their inputs:
NonZero, Unique, NonMaxSuppression, MelWeightMatrix, and Compress by its
condition.

braze's shapes are static, so such an op runs only where its sizes are
known at compile time: with constant inputs it is computed at import (by
onnx's reference implementation) and becomes a constant; Compress with a
constant condition is a gather of the kept indices, whatever its data.
Otherwise the import stops with a DynamicShapeError naming the inputs whose
values decide the size (never a padded or truncated result).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from ...errors import DynamicShapeError
from ..context import graph_inputs
from ..registry import converter
from .reduce import onnx_axis


@converter("NonZero", since=9)
def non_zero(ctx, X):
    return _at_compile_time(ctx, [X])


@converter("Unique", since=11)
def unique(ctx, X, **_attrs):
    return _at_compile_time(ctx, [X])


@converter("NonMaxSuppression", since=10)
def non_max_suppression(ctx, boxes, scores, max_output_boxes_per_class=None, iou_threshold=None,
                        score_threshold=None, **_attrs):
    return _at_compile_time(ctx, [boxes, scores, max_output_boxes_per_class, iou_threshold, score_threshold])


@converter("MelWeightMatrix", since=17)
def mel_weight_matrix(ctx, num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz, **_attrs):
    """Its shape is its inputs' values: computed at compile time."""
    return _at_compile_time(ctx, [num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz])


@converter("Compress", since=9)
def compress(ctx, input, condition, *, axis=None):  # noqa: A002  (ONNX's input name)
    keep = ctx.maybe_value(condition)
    if keep is None:
        _refuse(ctx, [condition])
    kept = np.flatnonzero(np.asarray(keep).reshape(-1)).astype(np.int64)
    if axis is None:
        input = ctx.op("tensor.reshape", [input], shape=(input.type.size,))
        axis = 0
    axis = onnx_axis(ctx, axis, input.type.rank)
    if len(kept) and kept[-1] >= input.type.shape[axis]:
        raise ctx.error(f"the condition keeps index {int(kept[-1])}, past the {input.type.shape[axis]} elements of "
                        f"axis {axis}")
    return ctx.op("tensor.gather", [input, ctx.const(kept)], axis=axis)


def _at_compile_time(ctx, inputs: list):
    """The node computed by onnx's reference implementation from its
    inputs' compile-time values, as constants."""
    missing = [v for v in inputs if v is not None and ctx.maybe_value(v) is None]
    if missing:
        _refuse(ctx, missing)
    from onnx.reference import ReferenceEvaluator

    names = [x for x in ctx.node.input]
    feeds = {n: np.asarray(ctx.maybe_value(v)) for n, v in zip(names, inputs) if n and v is not None}
    node = onnx.NodeProto()
    node.CopyFrom(ctx.node)
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
              for n, a in feeds.items()]
    graph = helper.make_graph([node], "fold", inputs,
                              [helper.make_tensor_value_info(o, 0, None) for o in node.output if o])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", ctx.opset)])
    outputs = ReferenceEvaluator(model).run(None, feeds)
    results, it = [], iter(outputs)
    for name in node.output:
        results.append(ctx.const(np.asarray(next(it))) if name else None)
    return results


def _refuse(ctx, values: list):
    names = sorted({n for v in values for n in graph_inputs(v)})
    deciding = [repr(name) for name, value in ctx.inputs if any(value is v for v in values)]
    raise DynamicShapeError(
        f"node {ctx.node_name} ({ctx.op_type}): its output size depends on the values of {', '.join(deciding)}, "
        "which are known only at run time; braze compiles static shapes, so it runs this op only when those "
        "values are constants", names)
