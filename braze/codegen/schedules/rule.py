"""The schedule rules' type (``Rule``, its parameters ``Param``), their
order (``PRIORITY``) and registry (``RULES``).

A rule schedules one *anchor* op of a kernel (the matmul, the conv): the
TIR block its lowering marked with ``anchor_attrs()``, together with the
elementwise epilogue that the inlining pass left behind it. A rule has:

- ``params``: its parameters, each declared once (``Param``): meaning,
  default, allowed values, whether 0 turns it off, whether it fixes the
  packed layout, what a grid tries. Pins, grids, docs and ``braze schedule
  --rule`` read the declaration;
- ``applies(op, kernel, target)``: whether it can take this op;
- ``defaults(op, kernel, target)``: its parameters' values for this op
  (those the machine model computes); ``None`` when no parameters fit the
  shapes (the op then gets the generic schedule);
- ``packings(op, kernel, target, params)``: constant operands it wants in
  another layout (packed once at compile time), by kernel param index;
- ``prepare(sch, block, op, target, params)`` (optional): a step that
  must come before inlining (padding the iteration space);
- ``apply(sch, block, op, target, params)``: the schedule itself, given
  every declared parameter, checked;
- ``check(op, target, params)`` (optional): what the values of several
  parameters together, or the op's shapes, rule out (a reason, or None);
- ``profitable(op, kernel, target)`` (optional): whether the rule is worth
  taking when no rule is pinned (Winograd on a small map is not); a pin
  (``braze schedule --rule``) takes any rule that applies;
- ``lower(op, params)`` (optional): a lowering of the op that replaces its
  own in this kernel (another algorithm, e.g. Winograd's), as a function
  of the op's TE operands and attributes. Its stages marked
  ``braze.keep`` are not inlined: the rule schedules them.

Adding a rule: write its module (it calls ``register``), and add its name
and module to ``PRIORITY`` (docs/schedules.md, "Adding a rule").
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable

from ...ir.ops.nn import INT8_DTYPES

#: ``Param.grid`` steps that are not values: half the value, twice it, 0 (off)
HALF, DOUBLE, OFF = "half", "double", "off"


@dataclass(frozen=True)
class Param:
    """One parameter of a rule. Its values are integers (a pin's params
    stay a JSON object of integers)."""

    name: str
    meaning: str  # one line
    default: int | str  # a constant, or how the machine model picks it
    values: tuple[int, ...] = ()  # the values it takes; () for the range low..high
    low: int = 1
    high: int | None = None
    off: bool = False  # 0 turns it off (besides values or the range)
    packs: bool = False  # it decides a weight's packed layout (gears pin it: codegen/gears.py)
    grid: tuple[int | str, ...] = (HALF, DOUBLE)  # what a grid tries in its place: values, HALF, DOUBLE, OFF
    #: the value ``apply`` reads where a computed default leaves the parameter out (None: the rule never does)
    unset: int | None = None

    @property
    def fallback(self) -> int | None:
        """The value of the parameter where the rule's defaults leave it
        out: the constant default, else ``unset``, else 0 where 0 is off."""
        if isinstance(self.default, int):
            return self.default
        return self.unset if self.unset is not None else (0 if self.off else None)

    def allows(self, value) -> bool:
        if isinstance(value, bool) or not isinstance(value, int):
            return False
        if self.off and value == 0:
            return True
        if self.values:
            return value in self.values
        return value >= self.low and (self.high is None or value <= self.high)

    def allowed(self) -> str:
        """The values it takes, in words: ``1 or 2``, ``1 to 4``, ``an integer >= 1``."""
        if self.values:
            text = " or ".join(", ".join(map(str, self.values)).rsplit(", ", 1))
        elif self.high is not None:
            text = f"{self.low} to {self.high}"
        else:
            text = f"an integer >= {self.low}"
        return text + (" (0: off)" if self.off else "")

    def tries(self, value: int) -> list[int]:
        """The values a grid tries in place of ``value``."""
        steps = {HALF: value // 2, DOUBLE: 2 * value, OFF: 0}
        out = [steps.get(g, g) for g in self.grid]
        return [v for v in dict.fromkeys(out) if v != value and self.allows(v)]


@dataclass(frozen=True)
class Rule:
    name: str
    ops: tuple[str, ...]
    doc: str
    applies: Callable
    defaults: Callable
    apply: Callable
    packings: Callable = field(default=lambda op, kernel, target, params: {})
    #: ``prepare(sch, block, op, target, params)``, run before the
    #: elementwise stages are inlined (while accesses are still plain)
    prepare: Callable | None = None
    #: ``profitable(op, kernel, target)``: taken by default (see above)
    profitable: Callable | None = None
    #: ``lower(op, params)``: the op's lowering in this kernel (see above)
    lower: Callable | None = None
    #: the rule's parameters (see above)
    params: tuple[Param, ...] = ()
    #: ``check(op, target, params)``: a reason the values do not go
    #: together or do not fit the op, or None
    check: Callable | None = None
    #: ``tiles(op, target, defaults)``: the register tiles (and other
    #: combinations that depend on the op's shapes) a grid tries besides
    #: each parameter's own ``Param.grid``
    tiles: Callable | None = None
    #: the anchor's operands (by index) that a 16-bit kernel widens to float32
    #: in a stage of their own before the micro-kernel: the broadcast side,
    #: which it would otherwise convert once per row of its register tile
    #: (docs/schedules.md, "16-bit kernels"); or ``stage_16bit(op, kernel)``,
    #: those of one op
    stage_16bit: tuple[int, ...] | Callable = ()
    #: ``build(op, kernel, target, params)``: the kernel's whole PrimFunc,
    #: written by the rule rather than scheduled from the TE graph (flash:
    #: its online softmax is a loop-carried state that TE does not express);
    #: only for a kernel that is the op alone
    build: Callable | None = None
    #: whether the rule schedules integer products (8-bit operands, int32
    #: sums): the others, written for float arithmetic, never take them
    integer: bool = False

    def widened(self, op, kernel) -> tuple[int, ...]:
        """The operands of ``op`` this rule widens to float32 in a stage (``stage_16bit``)."""
        return tuple(self.stage_16bit(op, kernel)) if callable(self.stage_16bit) else self.stage_16bit

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    @property
    def packed_by(self) -> tuple[str, ...]:
        """The params that decide the layout ``packings`` gives a weight."""
        return tuple(p.name for p in self.params if p.packs)

    def complete(self, params: dict) -> dict:
        """``params`` with every declared parameter they lack that has a
        ``Param.fallback``: what ``apply`` reads."""
        out = dict(params)
        for p in self.params:
            if p.name not in out and p.fallback is not None:
                out[p.name] = p.fallback
        return out

    def grid(self, op, target, defaults: dict) -> list[dict]:
        """The alternative params ``braze schedule`` tries around
        ``defaults``: the rule's ``tiles``, then each parameter it has
        changed alone to what its declaration's grid tries."""
        out = [{**defaults, **t} for t in (self.tiles(op, target, defaults) if self.tiles else [])]
        for p in self.params:
            if p.name in defaults:
                out += [{**defaults, p.name: v} for v in p.tries(int(defaults[p.name]))]
        unique = []
        for params in out:
            if params != defaults and params not in unique:
                unique.append(params)
        return unique


#: The order the rules are tried in for an anchor op, and each rule's
#: module: the first that applies (and is profitable) takes the op.
PRIORITY = (
    ("flash", "flash"),  # the attention op: no other rule takes it
    ("dpbf16", "dpbf16"),  # bfloat16 convs and matmuls in native dot products, before Winograd's float32 and gemm
    ("winograd", "winograd"),  # before conv2d: the 3x3 stride-1 convs whose maps are large enough to pay for it
    ("pointwise", "pointwise"),  # before conv2d: the 1x1 convs it runs better as a GEMM along the pixels
    ("conv2d", "conv"),  # the dense and grouped NCHW convs left
    ("depthwise", "depthwise"),  # after conv2d: the grouped convs whose groups its channel blocks do not fit
    ("amx", "amx"),  # before gemm: bfloat16 matmuls on a CPU with AMX tiles
    ("amx_int8", "amx_int8"),  # 8-bit matmuls on AMX tiles, before the vector ones
    ("vnni", "vnni"),  # 8-bit matmuls with VNNI, whose int32 sums gemm's float tiles do not compute
    ("pmaddwd", "vnni"),  # the same without VNNI
    ("vnni_conv", "vnni_conv"),  # 8-bit blocked convs with VNNI, before blocked's float tiles
    ("pmaddwd_conv", "vnni_conv"),  # the same without VNNI
    ("blocked", "blocked"),  # the float convs in the blocked layout left
    ("gemm", "gemm"),  # the float matmuls left
)

#: The rules by name, in ``PRIORITY``'s order (filled by ``load``).
RULES: dict[str, Rule] = {}
_registered: dict[str, Rule] = {}


def register(rule: Rule) -> Rule:
    if rule.name not in dict(PRIORITY):
        raise AssertionError(f"schedule rule {rule.name} is not in PRIORITY (schedules/rule.py)")
    if rule.name in _registered:
        raise AssertionError(f"two schedule rules named {rule.name}")
    _registered[rule.name] = rule
    return rule


def load() -> dict[str, Rule]:
    """Imports the rules' modules (each registers its rules) and orders ``RULES`` by ``PRIORITY``."""
    for module in dict.fromkeys(module for _, module in PRIORITY):
        importlib.import_module(f"{__package__}.{module}")
    missing = [name for name, module in PRIORITY if name not in _registered]
    if missing:
        raise AssertionError(f"schedule rules {missing} are in PRIORITY but their modules do not register them")
    RULES.clear()
    RULES.update((name, _registered[name]) for name, _ in PRIORITY)
    return RULES


def integer_product(op) -> bool:
    """Whether ``op`` multiplies 8-bit integers (a quantized conv or matmul)."""
    return op.name in ("nn.matmul", "nn.conv", "nn.conv_blocked") and all(
        v.type.dtype in INT8_DTYPES for v in op.operands[:2])


def candidates(op, kernel, target, wanted: str | None = None):
    """The rules that may take ``op``, in ``PRIORITY``'s order: those that
    apply and (unless one is ``wanted``, pinned) are profitable."""
    integer = integer_product(op)
    for rule in RULES.values():
        if op.name not in rule.ops or (wanted and rule.name != wanted) or integer > rule.integer:
            continue
        if rule.applies(op, kernel, target) and (
                wanted or rule.profitable is None or rule.profitable(op, kernel, target)):
            yield rule


def weight_param(op, kernel, rank: int | None = None) -> int | None:
    """The kernel param index of the op's second operand (a conv's or a
    matmul's weight) when it is a constant read directly (and of ``rank``
    dims, if given)."""
    w = op.operands[1]
    if rank is not None and len(w.type.shape) != rank:
        return None
    for i, (param, arg) in enumerate(zip(kernel.params, kernel.args)):
        if param is w and arg.owner is not None and arg.owner.name == "const":
            return i
    return None
