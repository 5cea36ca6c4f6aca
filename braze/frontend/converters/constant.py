"""ONNX converters that produce constants or pass data through: Constant,
ConstantOfShape, Range, Shape, Size, Identity, Dropout.

Shape queries are static in braze, so Shape becomes a ``tensor.shape`` that
always folds, and Size a constant: the Shape -> Gather -> Concat -> Reshape
chains that exporters emit then fold to static shapes.
"""

from __future__ import annotations

import numpy as np

from ..registry import converter


@converter("Constant")
def constant(ctx, *, value=None, value_float=None, value_floats=None, value_int=None, value_ints=None,
             value_string=None, value_strings=None):
    if value is not None and value.dtype != object:  # strings come as objects
        return ctx.const(value)
    for data, dtype in ((value_float, np.float32), (value_floats, np.float32),
                        (value_int, np.int64), (value_ints, np.int64)):
        if data is not None:
            return ctx.const(np.array(data, dtype=dtype))
    raise ctx.error("only numeric constants are supported (strings are not)")


@converter("ConstantOfShape", since=9)
def constant_of_shape(ctx, input, *, value=None):
    fill = value.reshape(-1)[0] if value is not None else np.float32(0)
    return ctx.const(np.full(ctx.ints(input, "'input'"), fill, dtype=fill.dtype))


@converter("Range", since=11)
def range_(ctx, start, limit, delta):
    first = ctx.value(start, "'start'").reshape(())
    stop = ctx.value(limit, "'limit'").reshape(())
    step = ctx.value(delta, "'delta'").reshape(())
    if step == 0:
        raise ctx.error("delta is 0")
    # onnxruntime counts in double and accumulates in the element type
    count = max(int(np.ceil(float(stop - first) / float(step))), 0)
    steps = np.full(count, step, dtype=first.dtype)
    steps[:1] = first
    return ctx.const(np.add.accumulate(steps, dtype=first.dtype))


@converter("Shape")
def shape(ctx, data, *, start=0, end=None):
    """``start``/``end`` (opset 15) count from the end when negative and clamp to the rank."""
    rank = data.type.rank

    def clamp(i):
        return min(max(i + rank if i < 0 else i, 0), rank)

    first = clamp(start)
    last = max(clamp(end if end is not None else rank), first)
    return ctx.op("tensor.shape", [data], start=first, end=last)


@converter("Size")
def size(ctx, data):
    return ctx.const(np.array(data.type.size, dtype=np.int64))


@converter("Identity")
def identity(ctx, input):
    return ctx.op("tensor.identity", [input])


# Dropout is the identity at inference; its optional mask output is all-keep.
@converter("Dropout")
def dropout_v1(ctx, data, *, ratio=0.5, is_test=0, consumed_inputs=None):
    return _dropout(ctx, data)


@converter("Dropout", since=12)
def dropout(ctx, data, ratio=None, training_mode=None, *, seed=None):
    # in training mode, a ratio of 0 drops nothing: still the identity
    if ctx.scalar(training_mode, False, "'training_mode'") and ctx.scalar(ratio, 0.5, "'ratio'") != 0:
        raise ctx.error("training_mode is true: braze compiles for inference; export the model in eval mode")
    return _dropout(ctx, data)


def _dropout(ctx, data):
    output = ctx.op("tensor.identity", [data])
    if len(ctx.outputs) < 2 or not ctx.outputs[1]:
        return output
    # the mask is boolean since opset 10, of the data's type before
    mask_dtype = bool if ctx.opset >= 10 else data.type.np_dtype
    return output, ctx.const(np.ones(data.type.shape, dtype=mask_dtype))
