"""The op registry: every op is declared once, here or in ``ir/ops/``.

An op definition is a class with the op's name, its fusion kind, its operand
schema, its attribute schema, type inference, and optionally a numpy
reference (``evaluate``) that constant folding uses::

    @register
    class Transpose(OpDef):
        name = "tensor.transpose"
        kind = Kind.INJECTIVE
        operands = ("x",)
        attrs = {"perm": Ints()}

        def infer(self, x, *, perm):
            return x.with_shape([x.shape[p] for p in perm])

        def evaluate(self, x, *, perm):
            return np.transpose(x, perm)

Operand names ending in ``?`` are optional (trailing), ``*`` variadic.
``infer`` gets the operand types positionally and the attributes (defaults
filled in) as keywords, and returns one ``TensorType`` or a list of them;
``evaluate`` gets numpy arrays the same way. Nothing else lists the op.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..errors import VerifyError
from .types import DenseElements, DenseResource, TensorType


class Kind(str, enum.Enum):
    """Fusion kinds, in TVM's vocabulary."""

    ELEMWISE = "elemwise"
    BROADCAST = "broadcast"
    INJECTIVE = "injective"
    REDUCE = "reduce"
    ANCHOR = "anchor"  # conv, matmul, pooling: heavy op that takes an epilogue
    OPAQUE = "opaque"


_REQUIRED = object()


@dataclass(frozen=True)
class AttrSpec:
    """An attribute's type (``int``, ``float``, ``bool``, ``str``, ``ints``,
    ``floats``, ``strs``, ``dense``, ``type``) and its default."""

    type: str
    default: Any = _REQUIRED
    choices: tuple | None = None

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED

    def check(self, value) -> bool:
        t = self.type
        if t == "int":
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif t == "float":
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif t == "bool":
            ok = isinstance(value, bool)
        elif t == "str":
            ok = isinstance(value, str)
        elif t == "ints":
            ok = isinstance(value, tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        elif t == "floats":
            ok = isinstance(value, tuple) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
        elif t == "strs":
            ok = isinstance(value, tuple) and all(isinstance(v, str) for v in value)
        elif t == "dense":
            ok = isinstance(value, (DenseResource, DenseElements))
        elif t == "type":
            ok = isinstance(value, TensorType)
        else:  # pragma: no cover - schema typo
            raise AssertionError(f"unknown attribute type {t}")
        return ok and (self.choices is None or value in self.choices)


def Int(default=_REQUIRED):
    return AttrSpec("int", default)


def Float(default=_REQUIRED):
    return AttrSpec("float", default)


def Bool(default=_REQUIRED):
    return AttrSpec("bool", default)


def Str(default=_REQUIRED, choices=None):
    return AttrSpec("str", default, tuple(choices) if choices else None)


def Ints(default=_REQUIRED):
    return AttrSpec("ints", default)


def Floats(default=_REQUIRED):
    return AttrSpec("floats", default)


# Attributes every op may carry: the user's fusion controls (issue: fusion).
CONTROL_ATTRS = {
    "braze.no_fuse": Bool(False),
    "braze.fusion_scope": Str(""),
}


class OpDef:
    """Base class of op definitions. Subclasses set the class attributes."""

    name: str = ""
    kind: Kind = Kind.OPAQUE
    operands: tuple[str, ...] = ()
    attrs: dict[str, AttrSpec] = {}
    #: True when ``evaluate`` needs only the operand *types* (e.g. tensor.shape).
    folds_from_types: bool = False
    #: True for ops that hold regions (fuse.group) or end blocks.
    has_regions: bool = False
    terminator: bool = False
    #: True when result types are written out rather than inferred (const, fuse.group).
    explicit_result_types: bool = False
    #: The contraction family of ops whose multiply-adds a matrix unit runs
    #: (an NPU's cube, tensor cores): "conv" or "matmul"; None for the rest.
    contraction: str | None = None

    # --- the schema ---------------------------------------------------------
    def operand_range(self) -> tuple[int, int | None]:
        """(min, max) operand count; max None when variadic."""
        lo = sum(1 for o in self.operands if not o.endswith(("?", "*")))
        if any(o.endswith("*") for o in self.operands):
            return lo, None
        return lo, len(self.operands)

    def normalize_attrs(self, attributes: dict, where: str = "") -> dict:
        """The attributes with defaults filled in; raises VerifyError on a
        missing, unknown or ill-typed attribute."""
        out = {}
        for key, spec in self.attrs.items():
            if key in attributes:
                value = attributes[key]
                if spec.type == "float" and isinstance(value, int) and not isinstance(value, bool):
                    value = float(value)
                if spec.type == "floats" and isinstance(value, tuple):
                    value = tuple(float(v) for v in value)
                if not spec.check(value):
                    want = f"one of {list(spec.choices)}" if spec.choices else f"a {spec.type} attribute"
                    raise VerifyError(f"{where}'{self.name}' attribute '{key}' must be {want}, got {value!r}")
                out[key] = value
            elif spec.required:
                raise VerifyError(f"{where}'{self.name}' requires attribute '{key}' ({spec.type})")
            else:
                out[key] = spec.default
        for key, value in attributes.items():
            if key in self.attrs:
                continue
            if key in CONTROL_ATTRS:
                if not CONTROL_ATTRS[key].check(value):
                    raise VerifyError(f"{where}attribute '{key}' must be a {CONTROL_ATTRS[key].type}, got {value!r}")
                continue
            if key.startswith("braze.") or key.startswith("onnx."):
                continue  # free-form annotations
            raise VerifyError(f"{where}'{self.name}' has no attribute '{key}' (known: {sorted(self.attrs)})")
        return out

    # --- behaviour, overridden per op ---------------------------------------------
    def infer(self, *types: TensorType, **attrs) -> TensorType | list[TensorType]:
        raise NotImplementedError(f"{self.name} has no type inference")

    def evaluate(self, *arrays: np.ndarray, **attrs):
        """numpy reference; ops without one are never constant-folded."""
        return NotImplemented

    @property
    def has_reference(self) -> bool:
        return type(self).evaluate is not OpDef.evaluate

    def infer_types(self, types: list[TensorType], attributes: dict, where: str = "") -> list[TensorType]:
        attrs = self.normalize_attrs(attributes, where)
        try:
            result = self.infer(*types, **attrs)
        except VerifyError as e:
            raise VerifyError(f"{where}'{self.name}': {e}") from None
        except (ValueError, IndexError, TypeError, KeyError, ZeroDivisionError) as e:
            raise VerifyError(f"{where}'{self.name}' cannot infer its result type from "
                              f"({', '.join(map(str, types))}): {e}") from None
        return list(result) if isinstance(result, (list, tuple)) else [result]

    def run_reference(self, arrays: list[np.ndarray], types: list[TensorType], attributes: dict) -> list[np.ndarray]:
        attrs = self.normalize_attrs(attributes)
        args = types if self.folds_from_types else arrays
        result = self.evaluate(*args, **attrs)
        return list(result) if isinstance(result, (list, tuple)) else [result]


REGISTRY: dict[str, OpDef] = {}


def register(cls: type[OpDef]) -> type[OpDef]:
    """Class decorator: add an op definition to the registry."""
    if not cls.name or "." not in cls.name and cls.name != "const":
        raise AssertionError(f"op name {cls.name!r} must be dialect-qualified")
    if cls.name in REGISTRY:
        raise AssertionError(f"op {cls.name} registered twice")
    REGISTRY[cls.name] = cls()
    return cls


def lookup(name: str) -> OpDef | None:
    _load_ops()
    return REGISTRY.get(name)


def contraction(name: str) -> str | None:
    """``name``'s contraction family ("conv", "matmul") or None (OpDef.contraction)."""
    d = lookup(name)
    return d.contraction if d is not None else None


def all_ops() -> dict[str, OpDef]:
    _load_ops()
    return dict(sorted(REGISTRY.items()))


#: Op types of the source formats the importers read (ONNX's), as the
#: importers declare them (``declare_source_op_types``) when they load: what
#: the fusion pass accepts in a manual rule's pattern besides braze op names.
_SOURCE_OP_TYPES: set[str] = set()


def declare_source_op_types(*names: str) -> None:
    _SOURCE_OP_TYPES.update(names)


def source_op_types() -> frozenset[str]:
    """The importers' op types declared so far (none until an importer is loaded)."""
    return frozenset(_SOURCE_OP_TYPES)


def _load_ops() -> None:
    from . import ops  # noqa: F401  (registers every op on first import)


def define(name: str, kind: Kind, operands: tuple, infer: Callable, evaluate: Callable | None = None,
           attrs: dict | None = None, doc: str = "") -> type[OpDef]:
    """Declare a simple op in one line (used for families such as unary math)."""
    body = {"name": name, "kind": kind, "operands": operands, "attrs": attrs or {}, "__doc__": doc,
            "infer": lambda self, *t, **a: infer(*t, **a)}
    if evaluate is not None:
        body["evaluate"] = lambda self, *x, **a: evaluate(*x, **a)
    cls = type(name.replace(".", "_"), (OpDef,), body)
    return register(cls)


# --- shared helpers for type inference ------------------------------------------
def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """numpy/ONNX multidirectional broadcasting; raises VerifyError."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise VerifyError(f"shapes {' and '.join(str(list(s)) for s in shapes)} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)
