"""Kernels: the units codegen turns into one TVM PrimFunc each.

A kernel is an ordered list of IR ops with the values it reads (``params``,
which become PrimFunc inputs) and the values it produces for the rest of the
graph (``results``). At level 0 every op is its own kernel; a ``fuse.group``
is one kernel made of its region's ops. Composing the members' TE computes
into one TE graph is what makes a group one kernel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import tvm
from tvm import te

from ..errors import CodegenError
from ..ir import Func, Operation, Value
from ..ir.registry import Kind, lookup
from ..ir.types import DenseElements
from .registry import find_lowering, lowering_op, wants_types

#: IR element type -> TVM dtype.
TVM_DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64", "i1": "bool",
              "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "ui8": "uint8",
              "ui16": "uint16", "ui32": "uint32", "ui64": "uint64"}

# The kind that names a kernel: the heaviest member decides.
_KIND_RANK = [Kind.OPAQUE, Kind.ANCHOR, Kind.REDUCE, Kind.INJECTIVE, Kind.BROADCAST, Kind.ELEMWISE]


@dataclass
class Kernel:
    name: str
    ops: list[Operation]
    params: list[Value]  # values the kernel reads, in PrimFunc argument order
    args: list[Value]  # the values passed at the call site (params seen from outside)
    results: list[Value]  # values computed inside, in PrimFunc output order
    returns: list[Value]  # the values they define outside
    rule: str = ""
    nodes: list[str] = field(default_factory=list)  # ONNX node names of the members
    group: Operation | None = None  # the fuse.group this kernel comes from
    #: params whose argument is a one-value constant (a scalar or a splat):
    #: compiled into the kernel as an immediate instead of passed in.
    immediates: dict[int, object] = field(default_factory=dict)
    #: params stored in another layout (packed weights), by param index;
    #: set by the schedule rule, applied to the constant at assembly
    packings: dict[int, "Packing"] = field(default_factory=dict)
    #: lowerings that replace an op's own (a rule's algorithm), by op index;
    #: set by the schedule rule with the packings
    lowerings: dict[int, Callable] = field(default_factory=dict)
    #: the schedule the kernel was built with ("gemm", "conv2d", "generic",
    #: ...) and its parameters; set by the build
    schedule: str = ""
    schedule_params: dict = field(default_factory=dict)
    #: the values (by ``id``) whose 16-bit param a rule wants widened to
    #: float32 in a stage of their own before its micro-kernel reads them
    #: (Rule.stage_16bit; see ``compute``)
    stage_16bit: set = field(default_factory=set)

    def plain_layouts(self) -> None:
        """Every param in its own layout and every op lowered its own way
        (before a schedule that packs nothing: generic, tuned, a user's)."""
        self.packings, self.lowerings, self.stage_16bit = {}, {}, set()

    @property
    def kind(self) -> Kind:
        kinds = {lookup(op.name).kind for op in self.ops}
        return next((k for k in _KIND_RANK if k in kinds), Kind.ELEMWISE)

    @property
    def op_types(self) -> list[str]:
        return [op.name for op in self.ops]


@dataclass(frozen=True)
class Packing:
    """A constant parameter stored in another layout, re-laid once at compile
    time: ``pack`` maps the constant's array (numpy) to the stored one of
    ``shape``; ``unpack`` maps the stored tensor (TE) back to a tensor of the
    original shape, which the schedule inlines into its reader; ``None``
    when only the rule's own lowering (Kernel.lowerings) reads the stored
    layout (Winograd's transformed weights)."""

    name: str  # e.g. "gemm-panels-32": what the layout is
    shape: tuple[int, ...]
    pack: Callable[[np.ndarray], np.ndarray]
    unpack: Callable[[te.Tensor], te.Tensor] | None
    #: the stored dtype (IR name), when not the constant's own: Winograd's
    #: F(4, 3) keeps a 16-bit conv's transformed weights in float32, whose
    #: rounding its output transform would amplify
    dtype: str | None = None


def _symbol(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text).strip("_")[:48] or "k"


def partition(func: Func) -> list[Kernel]:
    """The kernels of a function, in execution order."""
    kernels: list[Kernel] = []
    for op in func.body.ops:
        if op.name in ("const", "func.return") or op.name.startswith("cf."):
            continue  # control flow runs kernels of its regions' own (assemble.region_functions)
        index = len(kernels)
        if op.name == "fuse.group":
            block = op.regions[0].blocks[0]
            members = [o for o in block.ops if o.name != "fuse.yield"]
            name = f"k{index}_{_symbol(op.attributes['name'])}"
            kernels.append(Kernel(name, members, list(block.args), list(op.operands),
                                  list(block.terminator.operands), list(op.results),
                                  rule=op.attributes.get("rule", ""),
                                  nodes=[o.loc.name for o in members if o.loc], group=op))
            continue
        params = list(dict.fromkeys(op.operands))  # an operand used twice is one argument
        label = op.loc.name if op.loc else op.name
        kernels.append(Kernel(f"k{index}_{_symbol(label)}", [op], params, params, list(op.results),
                              list(op.results), nodes=[op.loc.name] if op.loc else []))
    for k in kernels:
        _take_immediates(k)
    return kernels


def _take_immediates(kernel: Kernel) -> None:
    """Move one-value constants (GELU's 0.5, a splat bias) out of the
    kernel's arguments and into its code: no buffer, and the compiler sees
    the number. Not the weights of an anchor (a conv's filter, a matmul's
    B made by ConstantOfShape): they stay dense arguments, which the
    anchor's schedule rule packs like any other weight."""
    weights = {id(op.operands[i]) for op in kernel.ops if lookup(op.name).kind == Kind.ANCHOR
               for i in range(1, len(op.operands)) if len(op.operands[i].type.shape) >= 2}
    keep = []
    for param, arg in zip(kernel.params, kernel.args):
        value = arg.owner.attributes.get("value") if arg.owner is not None and arg.owner.name == "const" else None
        if isinstance(value, DenseElements) and len(value.values) == 1 and id(param) not in weights:
            kernel.immediates[id(param)] = value.values[0]
        else:
            keep.append((param, arg))
    kernel.params = [p for p, _ in keep]
    kernel.args = [a for _, a in keep]


def compute(kernel: Kernel) -> tuple[list[te.Tensor], list[te.Tensor]]:
    """The kernel's TE graph: (placeholders, outputs). A packed param's
    placeholder has the packed shape, read through its ``unpack``."""
    env: dict[int, te.Tensor] = {}
    placeholders = []
    for op in kernel.ops:
        for v in op.operands:
            if id(v) in kernel.immediates and id(v) not in env:
                dtype = TVM_DTYPES[v.type.dtype]
                # through numpy: "-3.4028235e+38" is FLT_MAX's shortest text, a hair beyond it as a double
                exact = np.array(kernel.immediates[id(v)], dtype=v.type.np_dtype).item()
                number = tvm.tirx.const(exact, dtype)
                env[id(v)] = _filled(v.type.shape, number)
    widened = _widened_params(kernel)
    for i, v in enumerate(kernel.params):
        packing = kernel.packings.get(i)
        stored = (packing.dtype if packing else None) or v.type.dtype
        ph = te.placeholder(packing.shape if packing else v.type.shape, TVM_DTYPES[stored], name=f"p{i}")
        source = _widen(ph, f"widen{i}") if i in widened and stored in ("f16", "bf16") else ph
        env[id(v)] = packing.unpack(source) if packing and packing.unpack else source
        placeholders.append(ph)
    staged: dict[int, te.Tensor] = {}
    for index, op in enumerate(kernel.ops):
        fn = kernel.lowerings.get(index) or find_lowering(op.name)
        where = f"{op.loc}: " if op.loc else ""
        if fn is None:
            raise CodegenError(f"{where}'{op.name}' has no TVM lowering")
        attrs = lookup(op.name).normalize_attrs(op.attributes)
        if wants_types(op.name):
            attrs["out_types"] = [r.type for r in op.results]
        operands = [_staged(env[id(v)], id(v), staged) if id(v) in kernel.stage_16bit else env[id(v)]
                    for v in op.operands]
        with lowering_op(index):
            out = fn(*operands, **attrs)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        # a rule's algorithm, or widened operands: float32 results, rounded to the IR's 16-bit type
        outs = [_narrowed(t, r.type.dtype) for t, r in zip(outs, op.results)]
        for r, t in zip(op.results, outs):
            shape = tuple(int(d) for d in t.shape)
            if shape != r.type.shape or t.dtype != TVM_DTYPES[r.type.dtype]:
                raise CodegenError(f"{where}lowering of '{op.name}' gives {t.dtype}{list(shape)}, "
                                   f"expected {r.type}")
            env[id(r)] = t
    outputs, seen = [], set()
    for v in kernel.results:
        t = env[id(v)]
        # A PrimFunc output must be computed here, and only once.
        if isinstance(t.op, te.PlaceholderOp) or id(t) in seen:
            t = _copy(t)
        seen.add(id(t))
        outputs.append(t)
    return placeholders, outputs


def _widened_params(kernel: Kernel) -> set[int]:
    """Param indices whose values a rule wants staged in float32
    (``stage_16bit``): its micro-kernel would otherwise convert a broadcast
    16-bit operand once per row of the register tile, conversions that
    compete with the FMAs (docs/schedules.md, "16-bit kernels")."""
    return {i for i, v in enumerate(kernel.params) if id(v) in kernel.stage_16bit}


def _widen(t: te.Tensor, name: str) -> te.Tensor:
    """A float32 copy of a 16-bit tensor (a param, in its stored layout, or
    a value the kernel computes), a stage of its own: ``braze.keep`` stops
    the rules inlining it."""
    return te.compute(t.shape, lambda *i: t(*i).astype("float32"), name=name, attrs={"braze.keep": 1})


def _staged(t: te.Tensor, key: int, staged: dict) -> te.Tensor:
    """A 16-bit value computed in the kernel (a transposed activation) that a
    rule wants widened (``stage_16bit``): a float32 stage of its own, into
    which its producers are inlined. Params are widened where they enter
    (``_widen``)."""
    if t.dtype not in ("float16", "bfloat16"):
        return t
    if key not in staged:
        staged[key] = _widen(t, f"wide_operand{len(staged)}")
    return staged[key]


def _narrowed(t: te.Tensor, dtype: str) -> te.Tensor:
    """``t`` cast to a 16-bit IR dtype when it is float32 (else ``t``)."""
    if dtype in ("f16", "bf16") and t.dtype == "float32":
        return te.compute(t.shape, lambda *i: t(*i).astype(TVM_DTYPES[dtype]), name="narrow")
    return t


def _copy(t: te.Tensor) -> te.Tensor:
    return te.compute(t.shape, lambda *i: t(*i), name="copy")


def _filled(shape, number) -> te.Tensor:
    return te.compute(shape, lambda *i: number, name="imm")


def primfunc(kernel: Kernel):
    placeholders, outputs = compute(kernel)
    return te.create_prim_func(placeholders + outputs).with_attr("global_symbol", kernel.name)
