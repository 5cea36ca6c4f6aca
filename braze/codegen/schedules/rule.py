"""The schedule rules' table (``Rule``, ``RULES``, ``PRIORITY``) and the
machine-model helpers the rules size their tiles with (``lanes``,
``accumulators``, ``pick_tile``; docs/schedules.md, "The machine model").

A rule schedules one *anchor* op of a kernel (the matmul, the conv): the
TIR block its lowering marked with ``anchor_attrs()``, together with the
elementwise epilogue that the inlining pass left behind it. A rule has:

- ``applies(op, kernel, target)``: whether it can take this op;
- ``defaults(op, kernel, target)``: its parameters (tile sizes, ...), which
  a user may override (``braze schedule --param``); ``None`` when no
  parameters fit the shapes (the op then gets the generic schedule);
- ``packings(op, kernel, target, params)``: constant operands it wants in
  another layout (packed once at compile time), by kernel param index;
- ``prepare(sch, block, op, target, params)`` (optional): a step that
  must come before inlining (padding the iteration space);
- ``apply(sch, block, op, target, params)``: the schedule itself;
- ``profitable(op, kernel, target)`` (optional): whether the rule is worth
  taking when no rule is pinned (Winograd on a small map is not); a pin
  (``braze schedule --rule``) takes any rule that applies;
- ``lower(op, params)`` (optional): a lowering of the op that replaces its
  own in this kernel (another algorithm, e.g. Winograd's), as a function
  of the op's TE operands and attributes. Its stages marked
  ``braze.keep`` are not inlined: the rule schedules them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


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
    #: ``grid(op, target, defaults)``: the alternative params ``braze schedule``
    #: tries around the defaults (default: each integer halved and doubled)
    grid: Callable | None = None
    #: the params that decide the layout ``packings`` gives a weight: gears
    #: pin these to one gear's values so that every gear shares one copy
    #: (codegen/gears.py)
    packed_by: tuple[str, ...] = ()
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


#: Schedule parameters that 0 turns off (every other one is a positive
#: integer): ``chain``, the rows of a depthwise conv's task that computes
#: the pointwise conv before it (blocked.py, chain.py).
SWITCHES = frozenset({"chain"})


def halve_double(op, target, defaults) -> list[dict]:
    """A rule's grid when it has none: each integer parameter halved or doubled."""
    return [{**defaults, key: f(value)} for key, value in defaults.items() if isinstance(value, int)
            for f in (lambda x: max(1, x // 2), lambda x: 2 * x)]


#: The order the rules are tried in for an anchor op; the first that applies
#: (and is profitable) takes it: dpbf16 first (the bfloat16 convs and
#: matmuls of a CPU with AVX512-BF16: its native bfloat16 direct convs beat
#: Winograd's float32 arithmetic on them; it leaves matmuls to
#: amx where there are AMX tiles), winograd before conv2d (it takes the 3x3
#: stride-1 convs it pays on), pointwise before conv2d (every 1x1 conv),
#: depthwise after it (the grouped convs whose groups conv2d's blocks do not
#: fit), amx before gemm (the bfloat16 matmuls a CPU with AMX tiles takes),
#: amx_int8, else vnni, else pmaddwd, before gemm (the 8-bit integer
#: matmuls by a weight, whose int32 result gemm's float32 tiles do not
#: compute; amx_int8 on a CPU with AMX tiles), and vnni_conv,
#: else pmaddwd_conv, before blocked (the same for blocked 8-bit convs).
PRIORITY = ("flash", "dpbf16", "winograd", "pointwise", "conv2d", "depthwise", "amx", "amx_int8", "vnni", "pmaddwd",
            "vnni_conv", "pmaddwd_conv", "blocked", "gemm")


RULES: dict[str, Rule] = {}


def register(rule: Rule) -> Rule:
    if rule.name in RULES:
        raise AssertionError(f"two schedule rules named {rule.name}")
    RULES[rule.name] = rule
    return rule


#: Result dtypes the CPU rules schedule. Their kernels compute in float32:
#: 16-bit operands are widened as they are read (F16C on x86; a shift for
#: bfloat16) and results rounded as they are stored, so register tiles and
#: vector widths are float32's (docs/schedules.md, "16-bit kernels").
FLOAT32_MATH = frozenset({"f32", "f16", "bf16"})


def wide(value):
    """A TE/TIR value read as float32 when it is 16-bit (a rule's own
    lowering computes and accumulates in float32, as FLOAT32_MATH says)."""
    return value.astype("float32") if value.dtype in ("float16", "bfloat16") else value


def lanes(target, dtype: str = "float32") -> int:
    """Vector lanes of ``dtype`` on the target (16 floats with AVX-512)."""
    bits = getattr(target, "vector_bits", 512) or 128
    width = {"float16": 16, "bfloat16": 16, "float64": 64, "int8": 8, "uint8": 8, "int64": 64}.get(dtype, 32)
    return max(1, bits // width)


def registers(target) -> int:
    """Architectural vector registers of the target: 16 with AVX2/SSE, 32
    with AVX-512 and on AArch64 (the machine model, docs/schedules.md)."""
    return getattr(target, "vector_registers", 0) or (32 if lanes(target) >= 16 else 16)


#: Cycles from an FMA's start to its result on current x86 and Arm cores.
FMA_LATENCY = 4


def min_accumulators(target) -> int:
    """Independent accumulators that keep every FMA unit busy: latency x
    units (8 on AVX2 cores with 2 units); a tile with fewer waits on its
    own additions."""
    return FMA_LATENCY * max(1, getattr(target, "fma_units", 2) or 2)


def accumulators(target, loads: int, cap: int = 16) -> int:
    """Vector accumulators a register-tiled micro-kernel may hold: the
    register file less the ``loads`` vectors each step loads, the one it
    broadcasts into and one LLVM keeps for itself (16 - 2 - 2 = 12 on AVX2
    for two-vector-wide tiles: measured, a 14-accumulator tile with one
    vector load ran 20% slower than a 7-accumulator one), and at most
    ``cap`` (more did not pay on AVX-512's 32 registers)."""
    return max(1, min(cap, registers(target) - loads - 2))


def pick_tile(candidates: list[tuple[int, dict]], target=None) -> dict | None:
    """The register tile to use from ``(accumulators, params)`` candidates
    in order of preference (widest vectors first): the first with at least
    ``min_accumulators(target)``, else the one with the most accumulators. (On AVX2,
    a conv on a 7-wide map: 2 vectors x 1 column gives 2 accumulators, 1
    vector x 7 columns gives 7, and ran 2x faster.)"""
    for acc, params in candidates:
        if acc >= min_accumulators(target):
            return params
    return max(candidates, key=lambda c: c[0])[1] if candidates else None


def divisor_at_most(n: int, limit: int) -> int:
    return max(d for d in range(1, min(n, limit) + 1) if n % d == 0)


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
