"""Precision modes: which ops run in 16 bits, decided before fusion.

The pass follows Ascend ATC's ``--precision_mode`` and its op lists:

* **white** ops (matmul, conv, attention) may run in 16 bits: their float operands are
  cast down (weights converted here, at compile time) and their results are
  16-bit. Their lowerings accumulate in float32 (codegen/lowerings/nn.py, conv.py).
* **black** ops (softmax, norms, reductions, exp/log/pow, erf/tanh, average
  pooling) stay float32: 16-bit operands are cast up.
* **gray** ops (everything else: elementwise math, data movement) follow
  their inputs: 16-bit when every non-constant float operand is, else float32.
  A gray op whose only float operands are constants, indexed by a computed
  integer (a Gather of an embedding table), is 16-bit: the table is stored
  in 16 bits like a white op's weights.

``keep`` (``--keep-dtype``: node names, or ``OpType::Relu``) forces nodes to
their original dtype; ``mixlist`` (``--modify-mixlist``, ATC's JSON) moves
ONNX op types between the lists. Casts are shared per value, a cast down of
a value that was just cast up is the value itself, and the model's outputs
keep their original dtypes. What runs where is the IR's types: ``braze
explain`` and the manifest report each group's dtype from them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..errors import PrecisionError
from ..ir import Builder, Module, Operation, Value, constant_value
from ..ir.registry import lookup
from ..ir.types import DTYPES, Location, TensorType
from .dce import prune_blobs
from .manager import Pass, register_pass
from .rewrite import remove_dead

#: Mode spellings (ATC's --precision_mode and --precision_mode_v2) -> (kind, 16-bit dtype).
#: kind: "origin" changes nothing, "force" runs every float op in 16 bits,
#: "mixed" applies the lists.
MODES: dict[str, tuple[str, str | None]] = {
    "origin": ("origin", None),
    "must_keep_origin_dtype": ("origin", None),
    "force_fp32": ("origin", None),
    "allow_fp32_to_fp16": ("origin", None),  # every braze backend runs float32 where asked
    "force_fp16": ("force", "f16"),
    "fp16": ("force", "f16"),
    "force_bf16": ("force", "bf16"),
    "bf16": ("force", "bf16"),
    "allow_mix_precision": ("mixed", "f16"),
    "allow_mix_precision_fp16": ("mixed", "f16"),
    "mixed_float16": ("mixed", "f16"),
    "allow_mix_precision_bf16": ("mixed", "bf16"),
    "mixed_bfloat16": ("mixed", "bf16"),
}

#: The built-in lists, by ONNX op type (what --modify-mixlist names) ...
WHITE = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm", "Einsum", "Attention"})
BLACK = frozenset({
    "Softmax", "LogSoftmax", "LayerNormalization", "InstanceNormalization", "GroupNormalization",
    "BatchNormalization", "LpNormalization", "LRN", "ReduceMean", "ReduceSum", "ReduceProd", "ReduceL1",
    "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ReduceMax", "ReduceMin",
    "GlobalAveragePool", "AveragePool", "CumSum", "Exp", "Log", "Pow", "Erf", "Tanh",
})
#: ... and by IR op, for ops with no ONNX location (IR text written by hand).
WHITE_OPS = frozenset({"nn.conv", "nn.conv_transpose", "nn.matmul", "nn.einsum", "nn.attention"})
BLACK_OPS = frozenset({"nn.softmax", "nn.log_softmax", "nn.layer_norm", "nn.instance_norm", "nn.batch_norm",
                       "nn.lrn", "nn.avg_pool", "nn.cumsum", "math.exp", "math.log", "math.pow", "math.erf",
                       "math.tanh"})
LISTS = ("white-list", "black-list", "gray-list")

#: ``braze verify``'s default tolerance per 16-bit dtype (relative to
#: max(1, |output|max)): above the rounding the dtype leaves on the public
#: models (docs/usage.md).
TOLERANCES = {"f32": 1e-4, "f16": 5e-2, "bf16": 2.5e-1}


def mode_dtype(mode: str) -> str | None:
    """The 16-bit dtype a mode uses (None: float32 only); a PrecisionError
    for a mode braze does not know."""
    if mode not in MODES:
        raise PrecisionError(f"unknown precision mode '{mode}' (known: {', '.join(MODES)})")
    return MODES[mode][1]


@dataclass(frozen=True)
class OpLists:
    """The white/black lists after a mixlist's changes, by ONNX op type."""

    white: frozenset[str] = WHITE
    black: frozenset[str] = BLACK
    gray: frozenset[str] = frozenset()  # op types moved to gray explicitly

    def classify(self, op: Operation) -> str:
        op_type = op.loc.op_type if op.loc is not None else None
        if op_type is not None:
            for name, members in (("white", self.white), ("black", self.black), ("gray", self.gray)):
                if op_type in members:
                    return name
        if op_type is None or op_type not in WHITE | BLACK:
            if op.name in WHITE_OPS and op_type not in self.gray | self.black:
                return "white"
            if (op.name in BLACK_OPS or op.name.startswith("reduce.")) and op_type not in self.gray | self.white:
                return "black"
        return "gray"


def read_mixlist(source) -> OpLists:
    """ATC's ``--modify_mixlist`` JSON (a path, JSON text, or a dict)::

        {"black-list": {"to-add": ["Gelu"], "to-remove": []},
         "white-list": {"to-add": ["LayerNormalization"]}}

    An op type added to one list leaves the others."""
    if not source:
        return OpLists()
    where = "the mixlist"
    if isinstance(source, dict):
        data = source
    else:
        text = str(source)
        if not text.lstrip().startswith("{"):
            where = f"mixlist file '{text}'"
            if not os.path.isfile(text):
                raise PrecisionError(f"{where} does not exist (give ATC's JSON: "
                                     '{"white-list": {"to-add": [...], "to-remove": [...]}, ...})')
            with open(text, encoding="utf-8") as f:
                text = f.read()
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise PrecisionError(f"{where} is not JSON: {e}") from None
    if not isinstance(data, dict) or not set(data) <= set(LISTS):
        raise PrecisionError(f"{where}: the keys must be among {', '.join(LISTS)}, got {list(data)!r}")
    lists = {"white-list": set(WHITE), "black-list": set(BLACK), "gray-list": set()}
    for key, change in data.items():
        if not isinstance(change, dict) or not set(change) <= {"to-add", "to-remove"}:
            raise PrecisionError(f"{where}: '{key}' must be {{\"to-add\": [...], \"to-remove\": [...]}}")
        for op_type in change.get("to-add", []):
            for other in lists.values():
                other.discard(op_type)
            lists[key].add(op_type)
        for op_type in change.get("to-remove", []):
            lists[key].discard(op_type)
    return OpLists(frozenset(lists["white-list"]), frozenset(lists["black-list"]), frozenset(lists["gray-list"]))


def read_keep(source) -> tuple[str, ...]:
    """ATC's ``--keep_dtype`` file: one node name or ``OpType::Relu`` per line
    (``#`` starts a comment); or a list of such entries."""
    if not source:
        return ()
    if isinstance(source, (list, tuple)):
        lines = list(source)
    else:
        if not os.path.isfile(str(source)):
            raise PrecisionError(f"keep-dtype file '{source}' does not exist (one node name or OpType::Relu "
                                 f"per line)")
        with open(source, encoding="utf-8") as f:
            lines = f.read().splitlines()
    return tuple(s for s in (line.split("#", 1)[0].strip() for line in lines) if s)


@register_pass
@dataclass(frozen=True)
class Precision(Pass):
    """Put ops in 16 bits by ``mode`` and the lists; insert, share and cancel casts."""

    name: ClassVar[str] = "precision"
    title: ClassVar[str] = "Precision"
    mode: str = "origin"
    mixlist: str = ""  # a path, or ATC's JSON inline
    keep: tuple[str, ...] = ()

    def run(self, module: Module) -> bool:
        low = mode_dtype(self.mode)
        if low is None:
            return False
        kind = MODES[self.mode][0]
        lists = read_mixlist(self.mixlist)
        keep = _Keep(self.keep, module)
        changed = False
        for func in module.funcs:
            changed |= _Rewrite(module, func, low, kind, lists, keep).run()
            remove_dead(func.body)
        prune_blobs(module)  # the float32 weights that were converted
        return changed


class _Keep:
    """--keep-dtype entries; names that match no node are an error."""

    def __init__(self, entries: tuple[str, ...], module: Module):
        self.op_types = {e.split("::", 1)[1] for e in entries if e.startswith("OpType::")}
        self.names = {e for e in entries if not e.startswith("OpType::")}
        known = {op.loc.name for op in module.walk() if op.loc is not None}
        missing = sorted(self.names - known)
        if missing:
            raise PrecisionError(f"--keep-dtype names no node called {', '.join(repr(m) for m in missing)} "
                                 f"(give ONNX node names, or OpType::TYPE)")

    def __contains__(self, op: Operation) -> bool:
        return op.loc is not None and (op.loc.name in self.names or op.loc.op_type in self.op_types)


def _is_float(v: Value) -> bool:
    return v.type.dtype in ("f32", "f64", "f16", "bf16")


class _Rewrite:
    """One function's walk in program order (the body is topologically sorted)."""

    def __init__(self, module: Module, func, low: str, kind: str, lists: OpLists, keep: _Keep):
        self.module, self.func, self.low, self.kind = module, func, low, kind
        self.lists, self.keep = lists, keep
        self.casts: dict[tuple[int, str], Value] = {}
        self.origin: dict[int, Value] = {}  # a cast's result -> the value it was cast from

    def run(self) -> bool:
        changed = False
        for op in list(self.func.body.ops):
            if op.name in ("const", "func.return", "math.cast"):
                continue
            if op.regions:
                raise PrecisionError("the precision pass runs before fusion: this module already has fused "
                                     "groups (put 'precision' before 'fuse' in the pipeline)")
            floats = [v for v in op.operands if _is_float(v) and v.type.dtype in ("f32", self.low)]
            if not floats:
                continue
            if self._wants_low(op, floats):
                changed |= self._lower(op)
            else:
                changed |= self._raise(op)
        changed |= self._restore_outputs()
        return changed

    def _wants_low(self, op: Operation, floats: list[Value]) -> bool:
        if op in self.keep:
            return False
        if self.kind == "force":
            return True
        group = self.lists.classify(op)
        if group != "gray":
            return group == "white"
        moving = [v for v in floats if constant_value(v, self.module) is None]
        if not moving:
            # a constant table looked up by a computed index (Gather of an
            # embedding): stored in 16 bits, as a white op's weights are
            return any(v.type.dtype.startswith(("i", "u")) and v.type.dtype != "i1"
                       and constant_value(v, self.module) is None for v in op.operands)
        return all(v.type.dtype == self.low for v in moving)

    def _lower(self, op: Operation) -> bool:
        """Run ``op`` in 16 bits, if its type inference allows; else leave it."""
        operands = [self._cast(v, self.low, op) if _is_float(v) and v.type.dtype == "f32" else v
                    for v in op.operands]
        opdef = lookup(op.name)
        try:
            types = opdef.infer_types([v.type for v in operands], dict(op.attributes))
        except Exception:  # an op that has no 16-bit form keeps float32
            return self._raise(op)
        for i, v in enumerate(operands):
            if v is not op.operands[i]:
                op.set_operand(i, v)
        for r, ty in zip(op.results, types):
            r.type = ty
        return True

    def _raise(self, op: Operation) -> bool:
        changed = False
        for i, v in enumerate(op.operands):
            if v.type.dtype == self.low and _is_float(v):
                op.set_operand(i, self._cast(v, "f32", op))
                changed = True
        return changed

    def _cast(self, v: Value, dtype: str, before: Operation) -> Value:
        """``v`` in ``dtype``: a constant converted now, a cast shared by every
        user, or the value a cast came from when that is already ``dtype``."""
        key = (id(v), dtype)
        if key in self.casts:
            return self.casts[key]
        source = self.origin.get(id(v))
        if source is not None and source.type.dtype == dtype and dtype != "f32":
            return source  # low -> f32 -> low is exact
        builder = Builder(self.module, self.func.body, before=before)
        data = constant_value(v, self.module)
        if data is not None:
            with np.errstate(over="ignore"):  # a constant beyond float16's range becomes inf, as on the chip
                data = data.astype(DTYPES[dtype])
            out = builder.const(data, f"{v.name}.{dtype}" if v.name else None, v.owner.loc)
        else:
            out = builder.value("math.cast", [v], {"to": dtype}, loc=_cast_location(v, dtype))
            self.origin[id(out)] = v
        self.casts[key] = out
        return out

    def _restore_outputs(self) -> bool:
        """The model's outputs keep their original dtypes."""
        return self._raise(self.func.body.terminator)


def _cast_location(v: Value, dtype: str) -> Location:
    """Where an inserted cast comes from: ``<producer node>/cast_f16`` (a Cast)."""
    owner = v.owner
    source = owner.loc.name if owner is not None and owner.loc is not None else (v.name or "input")
    return Location(f"{source}/cast_{dtype}", "Cast")


def group_dtype(types: list[TensorType]) -> str:
    """The dtype a group computes in, for reports, from its ops' result
    types (casts left out): the 16-bit dtype if any is 16-bit, else the
    first float dtype."""
    floats = [t.dtype for t in types if t.dtype in ("f16", "bf16", "f32", "f64")]
    for d in ("bf16", "f16"):
        if d in floats:
            return d
    return floats[0] if floats else (types[0].dtype if types else "f32")


def rounded(array: np.ndarray, dtype: str) -> np.ndarray:
    """``array`` rounded through ``dtype`` and back (what a 16-bit store does)."""
    return array.astype(DTYPES[dtype]).astype(array.dtype)
