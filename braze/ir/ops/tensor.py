"""Data movement: ``tensor.*`` (injective ops whose output shapes are static)."""

from __future__ import annotations

import numpy as np

from ...errors import VerifyError
from ..registry import Ints, Kind, OpDef, register
from ..types import TensorType


@register
class Reshape(OpDef):
    """Same data, new static shape (ONNX Reshape/Flatten/Squeeze/Unsqueeze)."""

    name = "tensor.reshape"
    kind = Kind.INJECTIVE
    operands = ("x",)
    attrs = {"shape": Ints()}

    def infer(self, x: TensorType, *, shape):
        if any(d < 0 for d in shape):
            raise VerifyError(f"shape {list(shape)} must be fully static (no -1 or 0 placeholders)")
        if TensorType(shape, x.dtype).size != x.size:
            raise VerifyError(f"cannot reshape {x} ({x.size} elements) to {list(shape)}")
        return x.with_shape(shape)

    def evaluate(self, x, *, shape):
        return x.reshape(shape)


@register
class Transpose(OpDef):
    """Permute dimensions: result dim i is input dim ``perm[i]``."""

    name = "tensor.transpose"
    kind = Kind.INJECTIVE
    operands = ("x",)
    attrs = {"perm": Ints()}

    def infer(self, x: TensorType, *, perm):
        if sorted(perm) != list(range(x.rank)):
            raise VerifyError(f"perm {list(perm)} is not a permutation of {x.rank} dims")
        return x.with_shape([x.shape[p] for p in perm])

    def evaluate(self, x, *, perm):
        return np.transpose(x, perm)
