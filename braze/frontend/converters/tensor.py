"""ONNX shape and data-movement converters."""

from __future__ import annotations

from ..registry import converter


@converter("Transpose")
def transpose(ctx, data, *, perm=None):
    perm = perm if perm is not None else tuple(reversed(range(data.type.rank)))
    return ctx.op("tensor.transpose", [data], perm=perm)


@converter("Reshape", since=5)
def reshape(ctx, data, shape, *, allowzero=0):
    target = list(ctx.ints(shape, "'shape'"))
    for i, d in enumerate(target):
        if d == 0 and not allowzero:
            target[i] = data.type.shape[i]
    if -1 in target:
        known = 1
        for d in target:
            if d != -1:
                known *= d
        target[target.index(-1)] = data.type.size // known if known else 0
    return ctx.op("tensor.reshape", [data], shape=tuple(target))
