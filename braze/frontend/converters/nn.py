"""ONNX nn converters: MatMul, Gemm, Softmax, LogSoftmax, the normalizations,
LRN, Einsum, TopK, CumSum, CumProd, OneHot, Hardmax and LpNormalization. (Convolutions and pooling: conv.py.)"""

from __future__ import annotations

import math

import numpy as np

from ..registry import converter
from .reduce import onnx_axis


def refuse_extra_outputs(ctx, what: str) -> None:
    """braze produces only an op's first output (never training statistics
    or indices); fail early when the node asks for more."""
    if any(ctx.outputs[1:]):
        raise ctx.error(f"the {what} output is not supported; only the first output is "
                        "(drop the others from the node)")


@converter("MatMul")
def matmul(ctx, A, B):
    return ctx.op("nn.matmul", [A, B])


@converter("Gemm")
def gemm(ctx, A, B, C=None, *, alpha=1.0, beta=1.0, transA=0, transB=0, broadcast=0):
    """alpha * A' @ B' + beta * C, with only the terms that change the result."""
    # `broadcast` (opsets < 7) allowed a broadcasting C; math.add broadcasts anyway
    if A.type.rank != 2 or B.type.rank != 2:
        raise ctx.error(f"needs 2-D A and B, got {A.type} and {B.type}")
    if transA:
        A = ctx.op("tensor.transpose", [A], perm=(1, 0))
    if transB:
        B = ctx.op("tensor.transpose", [B], perm=(1, 0))
    y = ctx.op("nn.matmul", [A, B])
    if alpha != 1:
        y = ctx.op("math.mul", [y, ctx.const(np.array(alpha, y.type.np_dtype))])
    if C is not None:
        if beta != 1:
            C = ctx.op("math.mul", [C, ctx.const(np.array(beta, C.type.np_dtype))])
        y = ctx.op("math.add", [y, C])
    return y


def _softmax_2d(op: str):
    """Before opset 13, Softmax views x as 2-D, (dims before axis) x (the
    rest), and normalizes each row."""
    def convert(ctx, x, *, axis=1):
        shape, axis = x.type.shape, onnx_axis(ctx, axis, x.type.rank)
        if axis == len(shape) - 1:
            return ctx.op(op, [x], axis=axis)
        rows = ctx.op("tensor.reshape", [x], shape=(math.prod(shape[:axis]), math.prod(shape[axis:])))
        return ctx.op("tensor.reshape", [ctx.op(op, [rows], axis=1)], shape=shape)
    return convert


def _softmax(op: str):
    def convert(ctx, x, *, axis=-1):
        return ctx.op(op, [x], axis=onnx_axis(ctx, axis, x.type.rank))
    return convert


for _onnx, _ir in {"Softmax": "nn.softmax", "LogSoftmax": "nn.log_softmax"}.items():
    converter(_onnx)(_softmax_2d(_ir))
    converter(_onnx, since=13)(_softmax(_ir))


@converter("LayerNormalization", since=17)
def layer_normalization(ctx, X, Scale, B=None, *, axis=-1, epsilon=1e-5, stash_type=1):
    if stash_type != 1:
        raise ctx.error(f"stash_type={stash_type} is not supported; braze keeps the statistics in "
                        "float32 (stash_type=1)")
    axis = onnx_axis(ctx, axis, X.type.rank)
    y = ctx.op("nn.layer_norm", [v for v in (X, Scale, B) if v is not None], axis=axis, epsilon=epsilon)
    if not any(ctx.outputs[1:]):
        return y
    return (y, *_layer_norm_statistics(ctx, X, axis, epsilon))


def _layer_norm_statistics(ctx, X, axis: int, epsilon: float):
    """LayerNormalization's optional outputs, in float32 (stash_type=1):
    the mean and 1 / sqrt(variance + epsilon) over the dims from ``axis``
    on, kept as dims of size 1."""
    x = X if X.type.dtype == "f32" else ctx.op("math.cast", [X], to="f32")
    axes = tuple(range(axis, X.type.rank))
    mean = ctx.op("reduce.mean", [x], axes=axes, keepdims=True)
    centered = ctx.op("math.sub", [x, mean])
    variance = ctx.op("reduce.mean", [ctx.op("math.mul", [centered, centered])], axes=axes, keepdims=True)
    shifted = ctx.op("math.add", [variance, ctx.const(np.array(epsilon, np.float32))])
    return mean, ctx.op("math.reciprocal", [ctx.op("math.sqrt", [shifted])])


@converter("BatchNormalization")
def batch_normalization_1(ctx, X, scale, B, mean, var, *, epsilon=1e-5, momentum=0.9, spatial=1, is_test=0,
                          consumed_inputs=None):
    # is_test and consumed_inputs (opsets < 7) only matter for training
    if spatial != 1:
        raise ctx.error("spatial=0 (per-activation statistics) is not supported; only spatial=1")
    refuse_extra_outputs(ctx, "mean/var (training)")
    return ctx.op("nn.batch_norm", [X, scale, B, mean, var], epsilon=epsilon)


@converter("BatchNormalization", since=9)
def batch_normalization(ctx, X, scale, B, input_mean, input_var, *, epsilon=1e-5, momentum=0.9,
                        training_mode=0):
    if training_mode:
        return _batch_statistics_norm(ctx, X, scale, B, input_mean, input_var, epsilon, momentum)
    refuse_extra_outputs(ctx, "running mean/var (training)")
    return ctx.op("nn.batch_norm", [X, scale, B, input_mean, input_var], epsilon=epsilon)


def _batch_statistics_norm(ctx, X, scale, B, input_mean, input_var, epsilon, momentum):
    """training_mode=1: X normalized with its own per-channel mean and
    (population) variance; the running mean and variance move toward them
    by ``1 - momentum``."""
    axes = tuple(a for a in range(X.type.rank) if a != 1)
    dtype = X.type.np_dtype

    def number(v):
        return ctx.const(np.array(v, dtype))

    mean = ctx.op("reduce.mean", [X], axes=axes, keepdims=True)
    centered = ctx.op("math.sub", [X, mean])
    var = ctx.op("reduce.mean", [ctx.op("math.mul", [centered, centered])], axes=axes, keepdims=True)
    shape = (1, X.type.shape[1]) + (1,) * (X.type.rank - 2)
    s, b = (ctx.op("tensor.reshape", [v], shape=shape) for v in (scale, B))
    y = ctx.op("math.add", [ctx.op("math.mul", [ctx.op("math.div", [centered, ctx.op(
        "math.sqrt", [ctx.op("math.add", [var, number(epsilon)])])]), s]), b])
    if not any(ctx.outputs[1:]):
        return y
    channel = (X.type.shape[1],)
    mean, var = (ctx.op("tensor.reshape", [v], shape=channel) for v in (mean, var))
    running = [ctx.op("math.add", [ctx.op("math.mul", [old, number(momentum)]),
                                   ctx.op("math.mul", [new, number(1 - momentum)])])
               for old, new in ((input_mean, mean), (input_var, var))]
    return (y, *running)


@converter("InstanceNormalization")
def instance_normalization(ctx, x, scale, B, *, epsilon=1e-5):
    return ctx.op("nn.instance_norm", [x, scale, B], epsilon=epsilon)


@converter("LRN")
def lrn(ctx, X, *, size, alpha=1e-4, beta=0.75, bias=1.0):
    return ctx.op("nn.lrn", [X], size=size, alpha=alpha, beta=beta, bias=bias)


@converter("Einsum", since=12)
def einsum(ctx, *Inputs, equation):
    return ctx.op("nn.einsum", list(Inputs), equation=equation.replace(" ", ""))


def _topk(ctx, X, k, axis, largest=1, sorted=1):
    return ctx.ops("nn.topk", [X], k=int(k), axis=onnx_axis(ctx, axis, X.type.rank), largest=bool(largest),
                   sorted=bool(sorted))


@converter("TopK")
def topk_1(ctx, X, *, k, axis=-1):
    return _topk(ctx, X, k, axis)


@converter("TopK", since=10)
def topk(ctx, X, K, *, axis=-1, largest=1, sorted=1):
    # K became an input at opset 10; largest and sorted arrived at 11
    return _topk(ctx, X, ctx.scalar(K, what="'K'"), axis, largest, sorted)


def _running(op: str):
    def convert(ctx, x, axis, *, exclusive=0, reverse=0):
        axis = onnx_axis(ctx, ctx.scalar(axis, what="'axis'"), x.type.rank)
        return ctx.op(op, [x], axis=axis, exclusive=bool(exclusive), reverse=bool(reverse))
    return convert


converter("CumSum", since=11)(_running("nn.cumsum"))
converter("CumProd", since=26)(_running("nn.cumprod"))


@converter("OneHot", since=9)
def one_hot(ctx, indices, depth, values, *, axis=-1):
    """values[1] where the index (negative ones count from depth) is the
    position along the new ``axis``, values[0] elsewhere; depth is needed at
    compile time."""
    n = int(ctx.scalar(depth, what="'depth'"))
    rank = indices.type.rank + 1
    axis = onnx_axis(ctx, axis, rank)
    if values.type.size != 2:
        raise ctx.error(f"values must hold [off, on], got {values.type}")
    index = indices if indices.type.dtype == "i64" else ctx.op("math.cast", [indices], to="i64")
    count = ctx.const(np.int64(n))
    index = ctx.op("math.where", [ctx.op("math.less", [index, ctx.const(np.int64(0))]),
                                  ctx.op("math.add", [index, count]), index])
    index = ctx.op("tensor.reshape", [index], shape=tuple(indices.type.shape[:axis]) + (1,)
                   + tuple(indices.type.shape[axis:]))
    positions = ctx.const(np.arange(n, dtype=np.int64).reshape([n if a == axis else 1 for a in range(rank)]))
    flat = ctx.op("tensor.reshape", [values], shape=(2,))
    off = ctx.op("tensor.slice", [flat], starts=(0,), ends=(1,), steps=(1,))
    on = ctx.op("tensor.slice", [flat], starts=(1,), ends=(2,), steps=(1,))
    return ctx.op("math.where", [ctx.op("math.equal", [positions, index]), on, off])


def _hardmax(ctx, x, axis: int):
    """1 at the first largest element along ``axis``, 0 elsewhere."""
    n = x.type.shape[axis]
    index = ctx.op("reduce.argmax", [x], axis=axis, keepdims=True, select_last_index=False)
    positions = ctx.const(np.arange(n, dtype=np.int64).reshape([n if a == axis else 1 for a in range(x.type.rank)]))
    return ctx.op("math.cast", [ctx.op("math.equal", [positions, index])], to=x.type.dtype)


@converter("Hardmax")
def hardmax_2d(ctx, input, *, axis=1):  # noqa: A002  (ONNX's input name)
    """Before opset 13 the input is viewed as 2-D, (dims before axis) x (the rest)."""
    shape, axis = input.type.shape, onnx_axis(ctx, axis, input.type.rank)
    rows = ctx.op("tensor.reshape", [input], shape=(math.prod(shape[:axis]), math.prod(shape[axis:])))
    return ctx.op("tensor.reshape", [_hardmax(ctx, rows, 1)], shape=shape)


@converter("Hardmax", since=13)
def hardmax(ctx, input, *, axis=-1):  # noqa: A002
    return _hardmax(ctx, input, onnx_axis(ctx, axis, input.type.rank))


@converter("LpNormalization")
def lp_normalization(ctx, input, *, axis=-1, p=2):  # noqa: A002
    """x / (sum |x| ** p along axis) ** (1 / p), for p 1 or 2; 0 where the norm is 0 (ONNX's reference)."""
    if p not in (1, 2):
        raise ctx.error(f"p={p} is not an ONNX LpNormalization norm; use 1 or 2")
    axis = onnx_axis(ctx, axis, input.type.rank)
    if p == 2:
        norm = ctx.op("reduce.l2", [input], axes=(axis,), keepdims=True)
    else:
        norm = ctx.op("reduce.sum", [ctx.op("math.abs", [input])], axes=(axis,), keepdims=True)
    zero = ctx.const(np.zeros((), input.type.np_dtype))
    return ctx.op("math.where", [ctx.op("math.equal", [norm, zero]), zero, ctx.op("math.div", [input, norm])])
