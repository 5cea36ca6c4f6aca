"""Neural-network ops: ``nn.matmul``, ``nn.einsum``, ``nn.softmax``,
``nn.log_softmax``, ``nn.topk``, ``nn.cumsum``, ``nn.cumprod``.

Convolutions live in conv.py, pooling in pool.py, normalizations in norm.py.
Float references compute in float64 and round once, at the end, so that they
serve as the oracle for every lowering.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from ...errors import VerifyError
from ..registry import Bool, Int, Kind, OpDef, Str, broadcast_shapes, register
from ..types import FLOAT_DTYPES, TensorType


def wide(x: np.ndarray) -> np.ndarray:
    """Floats in float64, so that references round once, at the end."""
    return x.astype(np.float64) if x.dtype.kind == "f" or x.dtype.name == "bfloat16" else x


def check_axis(x: TensorType, axis: int) -> None:
    if not 0 <= axis < x.rank:
        raise VerifyError(f"axis {axis} must be in [0, {x.rank}) for {x}")


#: 8-bit integer element types a matmul or conv may multiply (any pair),
#: summing exactly in int32: the integer products of quantized models
INT8_DTYPES = frozenset({"i8", "ui8"})


def product_dtype(a: TensorType, b: TensorType) -> str:
    """The result type of a product of ``a`` and ``b``: int32 for two 8-bit
    integer operands (of either signedness), else their one element type."""
    if a.dtype in INT8_DTYPES and b.dtype in INT8_DTYPES:
        return "i32"
    return _same_dtype(a, b)


def _same_dtype(*types: TensorType) -> str:
    if len({t.dtype for t in types}) > 1:
        raise VerifyError(f"operand element types differ: {', '.join(map(str, types))}")
    return types[0].dtype


@register
class MatMul(OpDef):
    """Matrix product with numpy's semantics: 1-D operands are promoted to
    matrices and the promoted dim dropped again; batch dims broadcast.
    Operands of one element type give that type; two 8-bit integer operands
    (int8 or uint8, either side) give their exact int32 sum of products."""

    name = "nn.matmul"
    contraction = "matmul"
    kind = Kind.ANCHOR
    operands = ("a", "b")

    def infer(self, a, b):
        dtype = product_dtype(a, b)
        if a.rank == 0 or b.rank == 0:
            raise VerifyError(f"operands must have rank 1 or more, got {a} and {b}")
        ash = a.shape if a.rank > 1 else (1, *a.shape)
        bsh = b.shape if b.rank > 1 else (*b.shape, 1)
        if ash[-1] != bsh[-2]:
            raise VerifyError(f"contracted dims differ: {a} @ {b}")
        shape = list(broadcast_shapes(ash[:-2], bsh[:-2]))
        shape += [ash[-2]] if a.rank > 1 else []
        shape += [bsh[-1]] if b.rank > 1 else []
        return TensorType(shape, dtype)

    def evaluate(self, a, b):
        if a.dtype.kind in "iu" and b.dtype.kind in "iu" and a.dtype.itemsize == b.dtype.itemsize == 1:
            return np.matmul(a.astype(np.int32), b.astype(np.int32))
        return np.matmul(wide(a), wide(b)).astype(a.dtype)


def _einsum_terms(equation: str, ranks: list[int]) -> tuple[list[str], str]:
    """The input terms and the explicit output term of an einsum equation."""
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise VerifyError(f"equation '{equation}' has {len(terms)} input terms for {len(ranks)} operands")
    for term in terms + [rhs]:
        if not re.fullmatch(r"[A-Za-z]*(\.\.\.)?[A-Za-z]*", term):
            raise VerifyError(f"equation '{equation}': term '{term}' must be letters with at most one '...'")
    if not arrow:  # implicit output: '...' then the letters used once, in ASCII order
        counts = Counter("".join(terms).replace(".", ""))
        rhs = ("..." if "..." in lhs else "") + "".join(sorted(c for c, n in counts.items() if n == 1))
    return terms, rhs


def einsum_shape(equation: str, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    terms, output = _einsum_terms(equation, [len(s) for s in shapes])
    dims: dict[str, int] = {}
    ellipses = []
    for term, shape in zip(terms, shapes):
        letters = term.replace("...", "")
        n_ellipsis = len(shape) - len(letters)
        if n_ellipsis < 0 or n_ellipsis and "..." not in term:
            raise VerifyError(f"term '{term}' does not fit an operand of rank {len(shape)}")
        start = term.find("...")
        ellipses.append(shape[start:start + n_ellipsis] if start >= 0 else ())
        named = shape[:start] + shape[start + n_ellipsis:] if start >= 0 else shape
        for letter, d in zip(letters, named):
            if dims.setdefault(letter, d) != d:
                raise VerifyError(f"label '{letter}' has sizes {dims[letter]} and {d}")
    out = []
    for part in re.split(r"(\.\.\.)", output):
        if part == "...":
            out += broadcast_shapes(*ellipses)
            continue
        for letter in part:
            if letter not in dims or output.count(letter) > 1:
                raise VerifyError(f"output label '{letter}' must appear in an input and only once in the output")
            out.append(dims[letter])
    return tuple(out)


@register
class Einsum(OpDef):
    """Einstein summation (``np.einsum``) with an ``equation`` of letter
    terms, '...' broadcasting, and an implicit output when '->' is absent."""

    name = "nn.einsum"
    kind = Kind.OPAQUE
    operands = ("inputs*",)
    attrs = {"equation": Str()}

    def infer(self, *inputs, equation):
        if not inputs:
            raise VerifyError("needs at least one operand")
        return TensorType(einsum_shape(equation, [t.shape for t in inputs]), _same_dtype(*inputs))

    def evaluate(self, *inputs, equation):
        return np.asarray(np.einsum(equation, *map(wide, inputs))).astype(inputs[0].dtype)


class _SoftmaxBase(OpDef):
    kind = Kind.REDUCE
    operands = ("x",)
    attrs = {"axis": Int()}

    def infer(self, x, *, axis):
        if x.dtype not in FLOAT_DTYPES:
            raise VerifyError(f"needs a float tensor, got {x}")
        check_axis(x, axis)
        return x

    @staticmethod
    def shifted(x, axis):
        """x - max(x) along axis, and the log of the sum of its exponentials."""
        z = wide(x) - wide(x).max(axis=axis, keepdims=True)
        return z, np.log(np.exp(z).sum(axis=axis, keepdims=True))


@register
class Softmax(_SoftmaxBase):
    """exp(x) / sum(exp(x)) along one ``axis`` (ONNX Softmax since opset 13)."""

    name = "nn.softmax"

    def evaluate(self, x, *, axis):
        z, log_sum = self.shifted(x, axis)
        return np.exp(z - log_sum).astype(x.dtype)


@register
class LogSoftmax(_SoftmaxBase):
    """log(softmax(x)) along one ``axis``, computed stably."""

    name = "nn.log_softmax"

    def evaluate(self, x, *, axis):
        z, log_sum = self.shifted(x, axis)
        return (z - log_sum).astype(x.dtype)


@register
class TopK(OpDef):
    """The ``k`` largest (or smallest) elements along ``axis`` and their i64
    indices. Equal elements keep their order (lower index first), as in
    onnxruntime; the result is always sorted, which ``sorted=false`` allows."""

    name = "nn.topk"
    kind = Kind.OPAQUE
    operands = ("x",)
    attrs = {"k": Int(), "axis": Int(), "largest": Bool(True), "sorted": Bool(True)}

    def infer(self, x, *, k, axis, largest, sorted):
        check_axis(x, axis)
        if not 0 <= k <= x.shape[axis]:
            raise VerifyError(f"k={k} must be in [0, {x.shape[axis]}] (the size of axis {axis} of {x})")
        shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
        return [x.with_shape(shape), TensorType(shape, "i64")]

    def evaluate(self, x, *, k, axis, largest, sorted):
        if largest:
            # a stable ascending sort of the reversed axis, read backwards, is
            # descending with ties in ascending index order (and needs no negation)
            n = x.shape[axis]
            order = n - 1 - np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
        else:
            order = np.argsort(x, axis=axis, kind="stable")
        indices = np.take(order, np.arange(k), axis=axis)
        return np.take_along_axis(x, indices, axis), indices.astype(np.int64)


@register
class CumSum(OpDef):
    """Running sum along ``axis``; ``exclusive`` leaves out the element
    itself, ``reverse`` sums from the end."""

    name = "nn.cumsum"
    kind = Kind.OPAQUE
    operands = ("x",)
    attrs = {"axis": Int(), "exclusive": Bool(False), "reverse": Bool(False)}

    def infer(self, x, *, axis, exclusive, reverse):
        if x.dtype == "i1":
            raise VerifyError(f"needs a numeric tensor, got {x}")
        check_axis(x, axis)
        return x

    #: the running reduction and its identity
    running, identity = staticmethod(np.cumsum), 0

    def evaluate(self, x, *, axis, exclusive, reverse):
        data = np.flip(wide(x), axis) if reverse else wide(x)
        total = self.running(data, axis=axis, dtype=data.dtype)
        if exclusive:  # shift by one: each element gets the sum (product) of those before it
            total = np.roll(total, 1, axis)
            total[(slice(None),) * axis + (0,)] = self.identity
        return (np.flip(total, axis) if reverse else total).astype(x.dtype)


@register
class CumProd(CumSum):
    """Running product along ``axis``; ``exclusive`` leaves out the element
    itself, ``reverse`` multiplies from the end."""

    name = "nn.cumprod"
    running, identity = staticmethod(np.cumprod), 1
