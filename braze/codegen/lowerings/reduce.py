"""Lowerings of the reduce ops, and the dtype helpers the nn lowerings share.

The numpy references reduce floats in float64 and round once; here f32/f64
reduce in their own type and f16/bf16 in float32 (``accumulate``), which
stays within float rounding of the reference. Integer sums and products wrap
in the input type, as numpy's do. Max, min, argmax and argmin follow numpy
on NaN (it wins); onnxruntime skips NaN there.
"""

from math import prod

from tvm import te, tirx, topi

from ..registry import lowering
from .fast import is_nan

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


def reduce_over(x: te.Tensor, axes, keepdims: bool, reduce, name: str) -> te.Tensor:
    """``reduce(x[...], axis=...)`` over ``axes`` of ``x``."""
    taps = {a: te.reduce_axis((0, x.shape[a]), name=f"r{a}") for a in axes}
    shape = [1 if a in taps else d for a, d in enumerate(x.shape) if keepdims or a not in taps]

    def at(*index):
        kept, full = list(index), []
        for a in range(len(x.shape)):
            full.append(taps[a] if a in taps else kept[0])
            if keepdims or a not in taps:
                kept.pop(0)
        return reduce(x[tuple(full)], axis=list(taps.values()))

    # the kept dims after the last reduced one are the input's innermost:
    # the schedule vectorizes along them (schedules/generic.py)
    trailing = len(x.shape) - 1 - max(axes) if axes else 0
    return te.compute(shape, at, name=name, attrs={"braze.trailing": trailing})


def worst(largest: bool, of: str):
    """The value every other beats: -inf for a max of floats (so that all
    -inf reduces to -inf; te.max starts from the lowest finite float)."""
    if "float" in of:
        return tirx.const(float("-inf") if largest else float("inf"), of)
    return tirx.min_value(of) if largest else tirx.max_value(of)


def extreme(largest: bool, of: str):
    """A max (or min) reducer for element type ``of`` in which NaN wins, in
    any order (te.max lets NaN through or not depending on the order)."""
    def combine(a, b):
        beats = a > b if largest else a < b
        return tirx.Select(tirx.any(beats, is_nan(a)) if "float" in of else beats, a, b)

    return te.comm_reducer(combine, lambda t: worst(largest, of), name="max" if largest else "min")


def _arg_extreme(largest: bool, of: str, last: bool):
    """An (index, value) reducer for the max (min): NaN wins, and among
    equals the first index (the last with ``last``), in any order."""
    floating = "float" in of

    def combine(lhs, rhs):
        (li, lv), (ri, rv) = lhs, rhs
        beats, same = (lv > rv if largest else lv < rv), lv == rv
        if floating:
            beats = tirx.any(beats, tirx.all(is_nan(lv), tirx.Not(is_nan(rv))))
            same = tirx.any(same, tirx.all(is_nan(lv), is_nan(rv)))
        take = tirx.any(beats, tirx.all(same, li > ri if last else li < ri))
        return tirx.Select(take, li, ri), tirx.Select(take, lv, rv)

    def identity(index_type, value_type):  # loses every comparison and every tie
        return tirx.const(-1 if last else 2**63 - 1, index_type), worst(largest, of)

    return te.comm_reducer(combine, identity, name="argmax" if largest else "argmin")


def filled(shape, value, of: str) -> te.Tensor:
    """A tensor of ``shape`` holding ``value`` everywhere."""
    return te.compute([int(d) for d in shape], lambda *i: tirx.const(value, of), name="filled")


def _over_empty(x: te.Tensor, axes, keepdims: bool, value):
    """The result of a reduction over no element (an empty dim among
    ``axes``): its identity everywhere. TVM puts a reduction's initial value
    inside the loop over the reduced elements, so with none it would leave
    the output unwritten."""
    if _count(x, axes):
        return None
    shape = [1 if a in axes else d for a, d in enumerate(x.shape) if keepdims or a not in axes]
    return filled(shape, value, dtype(x))


def _no_bool(x: te.Tensor) -> te.Tensor:
    return cast(x, "int8") if dtype(x) == "bool" else x  # reducers do no bool arithmetic


def _count(x: te.Tensor, axes) -> int:
    return prod(int(x.shape[a]) for a in axes)


@lowering("reduce.sum")
def sum_(x, *, axes, keepdims):
    empty = _over_empty(x, axes, keepdims, 0)
    if empty is not None:
        return empty
    return cast(reduce_over(accumulate(x), axes, keepdims, te.sum, "sum"), dtype(x))


@lowering("reduce.mean")
def mean(x, *, axes, keepdims):
    empty = _over_empty(x, axes, keepdims, float("nan") if "float" in dtype(x) else 0)  # 0 / 0
    if empty is not None:
        return empty
    # numpy means integers in float64 (no wrap-around) and truncates the result
    wide = cast(x, "float64") if "int" in dtype(x) else accumulate(x)
    # reduce_over, not topi.sum: it marks the kept dims after the reduced
    # ones, which the schedule vectorizes (a blocked global mean's channels)
    total = reduce_over(wide, axes, keepdims, te.sum, "sum")
    return cast(topi.divide(total, float(_count(x, axes))), dtype(x))


#: rows at least this long are reduced by ``_along_rows``
ROW_MIN = 32


def _plain(largest: bool):
    """TVM's own max (min) reducer, which ``rfactor`` splits into vector lanes:
    no NaN rule, and the lowest (highest) finite value as its identity."""
    if largest:
        return te.comm_reducer(lambda a, b: tirx.max(a, b), lambda t: tirx.min_value(t), name="plain_max")
    return te.comm_reducer(lambda a, b: tirx.min(a, b), lambda t: tirx.max_value(t), name="plain_min")


def _along_rows(x: te.Tensor, axes, keepdims: bool, largest: bool) -> te.Tensor | None:
    """A float max (min) along the innermost axis alone, of rows of at least
    ``ROW_MIN``, as two reductions the schedules vectorize (``extreme``'s
    NaN-aware combiner is no reducer TVM can split into lanes, so its rows
    ran one element at a time): the plain extreme ``m``, and a flag per row
    (the max of 2 for a NaN, 1 for an element equal to the plain identity
    ``e``, the lowest finite float for a max). The row's result is NaN if
    it holds one, else -inf (+inf) where ``m`` is ``e`` and no element was,
    else ``m``. None for any other reduction."""
    of, rank = dtype(x), len(x.shape)
    if "float" not in of or tuple(axes) != (rank - 1,) or int(x.shape[-1]) < ROW_MIN:
        return None
    bound = tirx.min_value(of) if largest else tirx.max_value(of)
    flags = te.compute(x.shape, lambda *i: tirx.Select(is_nan(x(*i)), tirx.const(2, of),
                                                        tirx.Select(x(*i) == bound, tirx.const(1, of),
                                                                    tirx.const(0, of))), name="row_flags")
    m = reduce_over(x, axes, keepdims, _plain(largest), "max" if largest else "min")
    flag = reduce_over(flags, axes, keepdims, _plain(True), "row_flag")
    infinite = tirx.const(float("-inf") if largest else float("inf"), of)

    def at(*i):
        none = tirx.Select(tirx.all(m(*i) == bound, flag(*i) < tirx.const(1, of)), infinite, m(*i))
        return tirx.Select(flag(*i) > tirx.const(1, of), tirx.const(float("nan"), of), none)

    return te.compute(m.shape, at, name="extreme")


@lowering("reduce.max")
def max_(x, *, axes, keepdims):
    data = _no_bool(x)
    empty = _over_empty(x, axes, keepdims, False if dtype(x) == "bool" else worst(True, dtype(x)).value)
    if empty is not None:
        return empty
    along_rows = _along_rows(data, axes, keepdims, True)
    if along_rows is not None:
        return along_rows
    return cast(reduce_over(data, axes, keepdims, extreme(True, dtype(data)), "max"), dtype(x))


@lowering("reduce.min")
def min_(x, *, axes, keepdims):
    data = _no_bool(x)
    empty = _over_empty(x, axes, keepdims, True if dtype(x) == "bool" else worst(False, dtype(x)).value)
    if empty is not None:
        return empty
    along_rows = _along_rows(data, axes, keepdims, False)
    if along_rows is not None:
        return along_rows
    return cast(reduce_over(data, axes, keepdims, extreme(False, dtype(data)), "min"), dtype(x))


@lowering("reduce.prod")
def prod_(x, *, axes, keepdims):
    empty = _over_empty(x, axes, keepdims, 1)
    if empty is not None:
        return empty
    return cast(topi.prod(accumulate(x), axis=list(axes), keepdims=keepdims), dtype(x))


@lowering("reduce.l2")
def l2(x, *, axes, keepdims):
    empty = _over_empty(x, axes, keepdims, 0)
    if empty is not None:
        return empty
    if "int" in dtype(x):
        # numpy squares in the input type, sums in 64 bits and roots in float64
        squares = cast(topi.multiply(x, x), "uint64" if dtype(x).startswith("u") else "int64")
        total = cast(reduce_over(squares, axes, keepdims, te.sum, "sum"), "float64")
    else:
        wide = accumulate(x)
        total = reduce_over(topi.multiply(wide, wide), axes, keepdims, te.sum, "sum")
    return cast(topi.sqrt(total), dtype(x))


def _arg_lowering(largest: bool):
    def lowered(x, *, axis, keepdims, select_last_index):
        data = accumulate(_no_bool(x))  # 16-bit floats compare exactly in float32
        reducer = _arg_extreme(largest, dtype(data), select_last_index)
        r = te.reduce_axis((0, x.shape[axis]), name="r")

        def at(*index):
            full = [*index[:axis], r, *index[axis + keepdims:]]
            return reducer((r.var.astype("int64"), data[tuple(full)]), axis=r)

        shape = [*x.shape[:axis], *[1] * keepdims, *x.shape[axis + 1:]]
        index, _ = te.compute(shape, at, name="argmax" if largest else "argmin")
        return index
    return lowered


argmax = lowering("reduce.argmax")(_arg_lowering(largest=True))
argmin = lowering("reduce.argmin")(_arg_lowering(largest=False))
