"""What a converter sees: the node being converted and a way to emit ops."""

from __future__ import annotations

import numpy as np

from ..errors import DynamicShapeError, OnnxImportError, VerifyError
from ..ir import Builder, Location, Module, Value
from ..ir.fold import Evaluator


class ConversionContext:
    """Emits IR ops for one ONNX node at a time, located at that node."""

    def __init__(self, module: Module, builder: Builder, opset: int, importer=None):
        self.module, self.builder, self.opset = module, builder, opset
        self.importer = importer  # the Importer: converters/control.py imports subgraphs through it
        self.evaluate = Evaluator(module)
        self.node_name = ""
        self.op_type = ""
        self.node = None  # the NodeProto being converted
        self.inputs: list[tuple[str, Value | None]] = []  # the node's (ONNX name, value)
        self.outputs: list[str] = []  # the node's output names ("" for an omitted one)

    @property
    def loc(self) -> Location:
        return Location(self.node_name, self.op_type)

    # --- emitting ----------------------------------------------------------------
    def op(self, name: str, operands: list[Value], **attrs) -> Value:
        """Emit one single-result IR op; its result type is inferred."""
        return self.ops(name, operands, **attrs)[0]

    def ops(self, name: str, operands: list[Value], **attrs) -> list[Value]:
        """Emit one IR op and return all its results."""
        attrs = {k: _attr(v) for k, v in attrs.items()}
        try:
            return self.builder.create(name, operands, attrs, self.loc).results
        except VerifyError as e:
            raise self.error(str(e).removeprefix(f"{self.loc}: ")) from None

    def const(self, array, dtype=None, hint: str | None = None) -> Value:
        """Emit a constant (inline when small, else a blob)."""
        return self.builder.const(np.asarray(array, dtype=dtype), hint, self.loc)

    # --- reading constants ------------------------------------------------------------
    def maybe_value(self, v: Value | None) -> np.ndarray | None:
        return None if v is None else self.evaluate(v)

    def value(self, v: Value, what: str = "") -> np.ndarray:
        """The compile-time value of an input; a DynamicShapeError if it is
        only known at run time (braze needs static shapes)."""
        data = self.maybe_value(v)
        if data is None:
            which = what or self._input_name(v)
            raise DynamicShapeError(
                f"node {self.node_name} ({self.op_type}): input {which} is computed at run time, "
                "but braze needs it at compile time (static shapes). Bind dynamic input dimensions "
                "with --input-shape NAME=1x3x224x224 so that it folds to a constant.", graph_inputs(v))
        return data

    def ints(self, v: Value | None, what: str = "") -> tuple[int, ...] | None:
        """An int-list input (axes, shape, pads ...) as a tuple, or None if omitted."""
        if v is None:
            return None
        return tuple(int(x) for x in self.value(v, what).reshape(-1))

    def scalar(self, v: Value | None, default=None, what: str = ""):
        if v is None:
            return default
        data = self.value(v, what).reshape(-1)
        if data.size == 0:
            return default
        return data[0].item()

    def _input_name(self, v: Value) -> str:
        for i, (name, value) in enumerate(self.inputs):
            if value is v:
                return f"#{i} '{name}'"
        return "an input"

    # --- errors -----------------------------------------------------------------------
    def error(self, message: str) -> OnnxImportError:
        """An OnnxImportError naming the current node."""
        return OnnxImportError(f"node {self.node_name} ({self.op_type}): {message}")


def graph_inputs(v: Value) -> list[str]:
    """The names of the graph inputs (block arguments) that ``v`` is computed from."""
    names, seen, todo = [], set(), [v]
    while todo:
        x = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if x.owner is None:
            names.append(x.name)
        else:
            todo.extend(x.owner.operands)
    return sorted(n for n in names if n)


def _attr(v):
    """Normalize converter attribute values to IR attribute values."""
    if isinstance(v, list):
        return tuple(_attr(x) for x in v)
    if isinstance(v, tuple):
        return tuple(_attr(x) for x in v)
    if isinstance(v, np.ndarray):
        return tuple(v.reshape(-1).tolist())
    if isinstance(v, np.generic):
        return v.item()
    return v
