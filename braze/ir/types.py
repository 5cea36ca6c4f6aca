"""Types, attribute values and locations of the IR: frozen and hashable."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np

# IR dtype name -> numpy dtype. Names follow MLIR (i1 is bool, ui8 unsigned).
DTYPES: dict[str, np.dtype] = {
    "f16": np.dtype("float16"),
    "f32": np.dtype("float32"),
    "f64": np.dtype("float64"),
    "i1": np.dtype("bool"),
    "i8": np.dtype("int8"),
    "i16": np.dtype("int16"),
    "i32": np.dtype("int32"),
    "i64": np.dtype("int64"),
    "ui8": np.dtype("uint8"),
    "ui16": np.dtype("uint16"),
    "ui32": np.dtype("uint32"),
    "ui64": np.dtype("uint64"),
}
# bfloat16 has no numpy dtype of its own; ml_dtypes (a TVM dependency) adds one.
try:  # pragma: no cover - depends on the environment
    import ml_dtypes

    DTYPES["bf16"] = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    pass

_NP_TO_IR = {v: k for k, v in DTYPES.items()}

FLOAT_DTYPES = frozenset({"f16", "bf16", "f32", "f64"})
INT_DTYPES = frozenset({"i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64"})


def dtype_of(np_dtype) -> str:
    """IR dtype name of a numpy dtype."""
    d = np.dtype(np_dtype)
    if d not in _NP_TO_IR:
        raise ValueError(f"dtype {d} has no IR equivalent")
    return _NP_TO_IR[d]


@dataclass(frozen=True)
class TensorType:
    """A ranked tensor with a static shape: ``tensor<1x3x224x224xf32>``."""

    shape: tuple[int, ...]
    dtype: str

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if self.dtype not in DTYPES:
            raise ValueError(f"unknown dtype {self.dtype!r}")

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def np_dtype(self) -> np.dtype:
        return DTYPES[self.dtype]

    @property
    def nbytes(self) -> int:
        return self.size * self.np_dtype.itemsize

    def with_shape(self, shape) -> "TensorType":
        return TensorType(tuple(shape), self.dtype)

    def with_dtype(self, dtype: str) -> "TensorType":
        return TensorType(self.shape, dtype)

    def __str__(self) -> str:
        dims = "".join(f"{d}x" for d in self.shape)
        return f"tensor<{dims}{self.dtype}>"


@dataclass(frozen=True)
class DenseResource:
    """A handle to constant data held in the module's blob store."""

    handle: str


@dataclass(frozen=True)
class DenseElements:
    """Small constant data written inline: ``dense<[1, 2]>``, or a splat
    ``dense<0.02>`` when ``splat`` is set (one value fills the whole type)."""

    values: tuple
    splat: bool = False

    @staticmethod
    def from_array(array: np.ndarray) -> "DenseElements":
        flat = array.reshape(-1)
        if flat.size > 1 and (flat == flat[0]).all():
            return DenseElements((_py(flat[0]),), splat=True)
        return DenseElements(tuple(_py(v) for v in flat))

    def to_array(self, ty: TensorType) -> np.ndarray:
        if self.splat:
            return np.full(ty.shape, self.values[0], dtype=ty.np_dtype)
        return np.array(self.values, dtype=ty.np_dtype).reshape(ty.shape)


def _py(v: np.generic):
    """A Python scalar that prints short and converts back to ``v`` exactly."""
    if isinstance(v, np.floating) and v.dtype.itemsize < 8:
        return float(str(v))  # shortest repr in v's own precision, e.g. 0.02
    return v.item()


# Attribute values are plain Python scalars, tuples of them, or the dense kinds.
Attribute = Union[int, float, bool, str, tuple, DenseResource, DenseElements, TensorType]


@dataclass(frozen=True)
class Location:
    """Where an op came from: its ONNX node name and op type."""

    name: str
    op_type: str | None = None

    def __str__(self) -> str:
        return f"{self.name} ({self.op_type})" if self.op_type else self.name
