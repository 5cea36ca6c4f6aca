"""ONNX reduction converters: Reduce*, ArgMax/ArgMin.

The axes of a reduction moved from an attribute to an input at opset 13
(ReduceSum) or 18 (the others); both forms land on the same IR op with
explicit, sorted, non-negative axes. ReduceL1, ReduceSumSquare and
ReduceLogSum become reduce.sum with an elementwise op before or after it;
ReduceLogSumExp is ``log(sum(exp(x - m))) + m`` with m the max (0 where
it is infinite).
"""

from __future__ import annotations

import numpy as np

from ..registry import converter


def onnx_axis(ctx, value: int, rank: int) -> int:
    """An ONNX axis (negative counts from the end) as a non-negative one."""
    if not -rank <= value < rank:
        raise ctx.error(f"axis {value} is out of range for an input of rank {rank}")
    return value % rank


def sorted_axes(ctx, axes, rank: int) -> tuple[int, ...]:
    normalized = [onnx_axis(ctx, a, rank) for a in axes]
    if len(set(normalized)) != len(normalized):
        raise ctx.error(f"axes {list(axes)} name a dimension twice")
    return tuple(sorted(normalized))


def reduce(ctx, op: str, data, axes, keepdims, noop_with_empty_axes=0):
    """``op`` over ``axes``; ONNX's empty axes mean all of them, or none
    with noop_with_empty_axes."""
    if not axes and not noop_with_empty_axes:
        axes = range(data.type.rank)
    axes = sorted_axes(ctx, axes, data.type.rank)
    if not axes:  # each element is reduced alone: |x| for the L2 norm, x itself for the others
        return ctx.op("math.abs", [data]) if op == "reduce.l2" else data
    return ctx.op(op, [data], axes=axes, keepdims=bool(keepdims))


def _square(ctx, x):
    return ctx.op("math.mul", [x, x])


def _abs(ctx, x):
    return ctx.op("math.abs", [x])


def _log(ctx, x):
    return ctx.op("math.log", [x])


# ONNX op type: (IR reduction, elementwise op before it, elementwise op after it)
REDUCE = {
    "ReduceSum": ("reduce.sum", None, None),
    "ReduceMean": ("reduce.mean", None, None),
    "ReduceMax": ("reduce.max", None, None),
    "ReduceMin": ("reduce.min", None, None),
    "ReduceProd": ("reduce.prod", None, None),
    "ReduceL2": ("reduce.l2", None, None),
    "ReduceL1": ("reduce.sum", _abs, None),
    "ReduceSumSquare": ("reduce.sum", _square, None),
    "ReduceLogSum": ("reduce.sum", None, _log),
}
AXES_INPUT_SINCE = {"ReduceSum": 13}  # the others: 18


def _converters(op: str, before, after):
    """The converters of one reduction: axes as an attribute, then as an input."""
    def emit(ctx, data, axes, keepdims, noop_with_empty_axes):
        x = before(ctx, data) if before else data
        y = reduce(ctx, op, x, axes, keepdims, noop_with_empty_axes)
        return after(ctx, y) if after else y

    def axes_attribute(ctx, data, *, axes=None, keepdims=1):
        return emit(ctx, data, axes, keepdims, 0)

    # positional-only: an `axes` attribute (invalid from this opset on) must not bind to the input
    def axes_input(ctx, data, axes=None, /, *, keepdims=1, noop_with_empty_axes=0):
        return emit(ctx, data, ctx.ints(axes, "'axes'"), keepdims, noop_with_empty_axes)

    return axes_attribute, axes_input


def _log_sum_exp(ctx, data, axes, keepdims, noop_with_empty_axes):
    """log(sum(exp(x))) shifted by the max, so that exp cannot overflow."""
    top = reduce(ctx, "reduce.max", data, axes, True, noop_with_empty_axes)
    if top is data:  # no axes: each element alone
        return data
    zero = ctx.const(np.array(0, top.type.np_dtype))
    shift = ctx.op("math.where", [ctx.op("math.isinf", [top]), zero, top])
    total = reduce(ctx, "reduce.sum", ctx.op("math.exp", [ctx.op("math.sub", [data, shift])]), axes, keepdims,
                   noop_with_empty_axes)
    if not keepdims:
        shift = ctx.op("tensor.reshape", [shift], shape=total.type.shape)
    return ctx.op("math.add", [ctx.op("math.log", [total]), shift])


def _log_sum_exp_attribute(ctx, data, *, axes=None, keepdims=1):
    return _log_sum_exp(ctx, data, axes, keepdims, 0)


def _log_sum_exp_input(ctx, data, axes=None, /, *, keepdims=1, noop_with_empty_axes=0):
    return _log_sum_exp(ctx, data, ctx.ints(axes, "'axes'"), keepdims, noop_with_empty_axes)


converter("ReduceLogSumExp")(_log_sum_exp_attribute)
converter("ReduceLogSumExp", since=18)(_log_sum_exp_input)

for _onnx, (_ir, _before, _after) in REDUCE.items():
    _old, _new = _converters(_ir, _before, _after)
    converter(_onnx)(_old)
    converter(_onnx, since=AXES_INPUT_SINCE.get(_onnx, 18))(_new)


def _arg(op: str):
    def convert(ctx, data, *, axis=0, keepdims=1, select_last_index=0):
        return ctx.op(op, [data], axis=onnx_axis(ctx, axis, data.type.rank), keepdims=bool(keepdims),
                      select_last_index=bool(select_last_index))
    return convert


converter("ArgMax")(_arg("reduce.argmax"))
converter("ArgMin")(_arg("reduce.argmin"))
