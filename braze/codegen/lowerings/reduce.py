"""Lowerings of the reduce ops.

The numpy references reduce floats in float64 and round once; here f32/f64
reduce in their own type and f16/bf16 in float32 (``accumulate``), which
stays within float rounding of the reference. Integer sums and products wrap
in the input type, as numpy's do.
"""

from math import prod

from tvm import te, topi

from ..registry import lowering

_NARROW_FLOATS = ("float16", "bfloat16")


def dtype(t: te.Tensor) -> str:
    """``t``'s element type as TVM's string ("float32")."""
    return str(t.dtype)


def cast(t: te.Tensor, to: str) -> te.Tensor:
    """``t`` as ``to``, with no extra stage when it already is."""
    return t if dtype(t) == to else topi.cast(t, to)


def accumulate(t: te.Tensor) -> te.Tensor:
    """``t`` in the type to sum it in: float32 for 16-bit floats."""
    return cast(t, "float32") if dtype(t) in _NARROW_FLOATS else t


def _count(x: te.Tensor, axes) -> int:
    return prod(int(x.shape[a]) for a in axes)


def _bool_safe(reduce):
    """Max and min of i1 as int8, since TVM's reducers have no bool identity."""
    def lowered(x, *, axes, keepdims):
        if dtype(x) != "bool":
            return reduce(x, axis=list(axes), keepdims=keepdims)
        return cast(reduce(cast(x, "int8"), axis=list(axes), keepdims=keepdims), "bool")
    return lowered


@lowering("reduce.sum")
def sum_(x, *, axes, keepdims):
    return cast(topi.sum(accumulate(x), axis=list(axes), keepdims=keepdims), dtype(x))


@lowering("reduce.mean")
def mean(x, *, axes, keepdims):
    # numpy means integers in float64 (no wrap-around) and truncates the result
    wide = cast(x, "float64") if "int" in dtype(x) else accumulate(x)
    total = topi.sum(wide, axis=list(axes), keepdims=keepdims)
    return cast(topi.divide(total, float(_count(x, axes))), dtype(x))


reduce_max = lowering("reduce.max")(_bool_safe(topi.max))
reduce_min = lowering("reduce.min")(_bool_safe(topi.min))


@lowering("reduce.prod")
def prod_(x, *, axes, keepdims):
    return cast(topi.prod(accumulate(x), axis=list(axes), keepdims=keepdims), dtype(x))


@lowering("reduce.l2")
def l2(x, *, axes, keepdims):
    if "int" in dtype(x):
        # numpy squares in the input type, sums in 64 bits and roots in float64
        squares = cast(topi.multiply(x, x), "uint64" if dtype(x).startswith("u") else "int64")
        total = cast(topi.sum(squares, axis=list(axes), keepdims=keepdims), "float64")
    else:
        wide = accumulate(x)
        total = topi.sum(topi.multiply(wide, wide), axis=list(axes), keepdims=keepdims)
    return cast(topi.sqrt(total), dtype(x))


def _arg_reduce(reduce):
    def lowered(x, *, axis, keepdims, select_last_index):
        x = cast(x, "int8") if dtype(x) == "bool" else x
        return cast(reduce(x, axis=axis, keepdims=keepdims, select_last_index=select_last_index), "int64")
    return lowered


argmax = lowering("reduce.argmax")(_arg_reduce(topi.argmax))
argmin = lowering("reduce.argmin")(_arg_reduce(topi.argmin))
