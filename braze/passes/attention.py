"""The raise-attention pass: exported attention raised to one ``nn.attention``.

Exporters write scaled dot-product attention as separate ops; at fusion
level 3 (docs/fusion.md, "Attention at level 3") this pass replaces each
instance by the ``nn.attention`` op that ONNX ``Attention`` imports to, so
both reach one kernel. It matches, from each ``nn.softmax`` over the last
axis of a 4-D tensor::

    MatMul(q4, kT4) → (Mul/Div by a scalar)* → (Add mask)? → Softmax
      → (IsNaN → Where(isnan, 0, p))? → MatMul(p, v4)

q4, kT4 and v4 are read back through the reshapes, transposes and (for q
and kT) scalar multiplications that make them, as far as those lead to the
3-D ``[batch, seq, heads * size]`` value a projection writes, or else to a
4-D ``[batch, heads, seq, size]`` one (a kT that leads to no K is
transposed back); the scalars become part of ``scale``. A trailing
Transpose + Reshape to ``[batch, seq, heads * size]`` is absorbed when q is
3-D, so the op gives the 3-D result directly. The mask joins as the op's
``mask``; a fully masked row gives zeros, as the NaN guard does.

An instance stays decomposed when a value inside it has other users (a
returned intermediate, an extra output), when a control keeps one of its
ops out of fusion (``no_fuse``, ``only_fuse``, ``skip_nodes``, ``scope``,
``braze.no_fuse``, ``braze.fusion_scope`` labels), when a manual rule
groups one of its ops, or when the ``attention`` rule is switched off. The
raised op is located at the final MatMul's node, as op type ``Attention``,
and marked ``braze.raised_by = "attention"`` and ``braze.raised_from`` (the
ONNX nodes it replaces) for the fusion record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import ClassVar

import numpy as np

from ..ir import Builder, Func, Module, Operation, Value, constant_value
from ..ir.fold import MOVES
from ..ir.ops.attention import as_heads
from ..ir.types import FLOAT_DTYPES, Location
from .dce import prune_blobs
from .fusion.controls import Controls, FusionOptions
from .fusion.explain import FusionReport, RuleStats
from .fusion.graph import Graph, node_name
from .fusion.manual import load_rules
from .fusion.planner import Planner
from .fusion.rules import RAISED_BY, RAISED_FROM, RULES
from .manager import Pass, register_pass
from .rewrite import remove_dead

RULE = "attention"
#: Layout checks move an index array as large as the operand; past this many
#: elements an operand is taken as the matmul reads it (4-D).
INDEX_LIMIT = 1 << 24


@register_pass
@dataclass(frozen=True)
class RaiseAttention(Pass):
    """Raise decomposed attention to one nn.attention op (fusion level 3), under the fusion controls."""

    name: ClassVar[str] = "raise-attention"
    title: ClassVar[str] = "RaiseAttention"
    no_fuse: tuple[str, ...] = ()
    only_fuse: tuple[str, ...] = ()
    skip_nodes: tuple[str, ...] = ()
    scope: str = ""
    switch: tuple[str, ...] = ()
    rules: str = ""

    def __post_init__(self):
        options = self.options()  # lists and dicts from Python, normalized as the fuse pass has them
        for f in fields(self):
            object.__setattr__(self, f.name, getattr(options, f.name))

    def options(self) -> FusionOptions:
        return FusionOptions(level=3, **{f.name: getattr(self, f.name) for f in fields(self)})

    def run(self, module: Module) -> bool:
        func = module.main
        kept = _Kept(self.options(), func)
        if not kept.controls.rule_on(RULE):
            return False
        kept.claim_manual()
        raised = 0
        for softmax in [op for op in func.body.ops if op.name == "nn.softmax"]:
            # one at a time: an instance raised before rewires what later ones read
            found = match(softmax, module)
            if found is not None and not kept.refuses(found.members):
                found.build(module, func)
                raised += 1
        if raised:
            remove_dead(func.body)
            prune_blobs(module)
        return bool(raised)


class _Kept:
    """What keeps ops out of fusion: the controls, and the manual rules' groups."""

    def __init__(self, options: FusionOptions, func: Func):
        self.manual = load_rules(options.rules) if options.rules else []
        self.graph = Graph(func)
        self.controls = Controls(options, self.graph, [r.name for r in self.manual] + [r.name for r in RULES])
        self.claimed: set[int] = set()

    def claim_manual(self) -> None:
        """Manual rules win: the ops they would group are not raised away."""
        report = FusionReport(level=3, rules={r.name: RuleStats(1, "manual") for r in self.manual})
        plan = Planner(self.graph, self.controls, 3, report)
        for rule in self.manual:
            rule.apply(plan)
        self.claimed = {i for i in range(len(self.graph)) if len(plan.cluster(i).members) > 1}

    def refuses(self, ops: list[Operation]) -> bool:
        nodes = [self.graph.index(op) for op in ops]
        return (any(i in self.claimed or self.controls.refuse_node(i) for i in nodes)
                or self.controls.refuse_labels(set(nodes)) is not None)


# --- matching ------------------------------------------------------------------------------
@dataclass
class Operand:
    """An operand of the raised op: ``value``, read through the ``ops``
    (moves and scalar multiplications) that it replaces, times ``factor``."""

    value: Value
    ops: list[Operation]
    factor: float = 1.0
    transpose: bool = False  # kT that leads back to no K: transpose it back


@dataclass
class Match:
    core: list[Operation]  # scores MatMul ... weighted-sum MatMul
    q: Operand
    k: Operand
    v: Operand
    mask: Value | None
    scale: float
    heads: tuple[int, int]
    out: Value  # the value the op replaces
    tail: list[Operation]  # Transpose + Reshape after the weighted sum

    @property
    def members(self) -> list[Operation]:
        return self.q.ops + self.k.ops + self.v.ops + self.core + self.tail

    def build(self, module: Module, func: Func) -> None:
        final = self.core[-1]
        name = node_name(final) if final.loc else None
        b = Builder(module, func.body, before=final)
        k = self.k.value
        if self.k.transpose:
            k = b.value("tensor.transpose", [k], {"perm": (0, 1, 3, 2)},
                        loc=Location(f"{name}/transpose_k", "Transpose") if name else None)
        operands = [self.q.value, k, self.v.value] + ([self.mask] if self.mask is not None else [])
        attrs = {"q_heads": self.heads[0], "kv_heads": self.heads[1], "scale": self.scale, RAISED_BY: RULE,
                 RAISED_FROM: tuple(dict.fromkeys(node_name(op) for op in self.members if op.loc))}
        y = b.value("nn.attention", operands, attrs, loc=Location(name, "Attention") if name else None)
        self.out.replace_all_uses_with(y)


def match(softmax: Operation, module: Module) -> Match | None:
    """The attention around ``softmax``, or None where the pattern does not hold."""
    t = softmax.result.type
    if t.rank != 4 or softmax.attributes["axis"] % 4 != 3 or t.dtype not in FLOAT_DTYPES or min(t.shape) < 1:
        return None
    found, weighted = _scores(softmax.operands[0], softmax, module), _weighted_sum(softmax, module)
    if found is None or weighted is None:
        return None
    scores, before, factor, mask = found
    guard, final = weighted
    q4, kt4, v4 = scores.operands[0], scores.operands[1], final.operands[1]
    if not q4.type.rank == kt4.type.rank == v4.type.rank == 4:
        return None
    (b, hq, sq, d), (bk, hk, dk, sk), (bv, hv, sv, dv) = q4.type.shape, kt4.type.shape, v4.type.shape
    if not (b == bk == bv and d == dk and sk == sv and hk == hv and hq % hk == 0 and t.shape == (b, hq, sq, sk)):
        return None
    out, tail = _tail(final.result, (b, sq, hq * dv))
    q = _operand(q4, scores, module, hq, want_3d=bool(tail))
    if q.value.type.rank == 4:
        out, tail = final.result, []
    k = _operand(kt4, scores, module, hk, transposed=True)
    v = _operand(v4, final, module, hk, scalars=False)  # a factor on v would scale the result
    core = [scores, *before, softmax, *guard, final]
    return Match(core, q, k, v, mask, factor * q.factor * k.factor, (hq, hk), out, tail)


def _only_user(v: Value, op: Operation) -> bool:
    """``op`` is the one reader of ``v`` (a returned value is read by the return)."""
    return len(v.uses) == 1 and v.uses[0][0] is op


def _scalar(op: Operation, module: Module) -> tuple[Value, float] | None:
    """(x, f) when ``op`` is x * f or x / f for a one-element constant f that broadcasts nothing."""
    if op.name not in ("math.mul", "math.div") or op.result.type.dtype not in FLOAT_DTYPES:
        return None
    pairs = [(0, 1), (1, 0)] if op.name == "math.mul" else [(0, 1)]
    for x, c in pairs:
        value = constant_value(op.operands[c], module)
        data = op.operands[x]
        if value is None or value.size != 1 or data.type != op.result.type or constant_value(data, module) is not None:
            continue
        f = float(value.reshape(-1)[0])
        f = f if op.name == "math.mul" else (1.0 / f if f else math.inf)
        return (data, f) if math.isfinite(f) and f != 0 else None
    return None


def _scores(v: Value, user: Operation, module: Module, mask_ok: bool = True):
    """Up from the Softmax's input: (scores MatMul, the ops after it in
    order, their scale factor, the mask or None); a mask Add only after
    every scale."""
    op = v.owner
    if op is None or not _only_user(v, user):
        return None
    if op.name == "nn.matmul":
        return op, [], 1.0, None
    scaled = _scalar(op, module)
    if scaled is not None:
        found = _scores(scaled[0], op, module, mask_ok=False)
        if found is None:
            return None
        matmul, ops, factor, mask = found
        return matmul, ops + [op], factor * scaled[1], mask
    if op.name != "math.add" or not mask_ok:
        return None
    for data, mask in ((op.operands[0], op.operands[1]), (op.operands[1], op.operands[0])):
        found = _scores(data, op, module, mask_ok=False) if data.type == v.type else None
        if found is not None:
            return found[0], found[1] + [op], found[2], mask
    return None


def _weighted_sum(softmax: Operation, module: Module) -> tuple[list[Operation], Operation] | None:
    """Down from the Softmax: (the NaN guard's ops, the MatMul that reads the probabilities)."""
    p = softmax.result
    guard: list[Operation] = []
    if len(p.uses) == 2:
        guard = _nan_guard(p, module)
        if guard is None:
            return None
        p = guard[-1].result
    final = p.uses[0][0] if len(p.uses) == 1 else None
    if final is None or final.name != "nn.matmul" or final.operands[0] is not p or final.operands[1] is p:
        return None
    return guard, final


def _nan_guard(p: Value, module: Module) -> list[Operation] | None:
    """[IsNaN, Where] when ``p``'s two readers are IsNaN(p) and Where(IsNaN(p), 0, p)."""
    isnan = next((u for u, _ in p.uses if u.name == "math.isnan"), None)
    where = isnan.result.uses[0][0] if isnan is not None and len(isnan.result.uses) == 1 else None
    if where is None or where.name != "math.where" or {u for u, _ in p.uses} != {isnan, where}:
        return None
    zero = constant_value(where.operands[1], module)
    if where.operands[0] is not isnan.result or where.operands[2] is not p or where.result.type != p.type \
            or zero is None or np.any(zero != 0):
        return None
    return [isnan, where]


# --- layouts -------------------------------------------------------------------------------
def _operand(v: Value, user: Operation, module: Module, heads: int, transposed: bool = False,
             want_3d: bool = True, scalars: bool = True) -> Operand:
    """The furthest value back along ``v``'s chain of moves (and, with
    ``scalars``, scalar multiplications) that holds the operand whole, in
    the 3-D layout or the 4-D one (``transposed``: ``v`` is kT, the operand K)."""
    values, ops, factors = [v], [], []
    while values[-1].owner is not None and _only_user(values[-1], ops[-1] if ops else user):
        op = values[-1].owner
        step = (op.operands[0], 1.0) if op.name in MOVES else (_scalar(op, module) if scalars else None)
        if step is None:
            break
        ops.append(op)
        values.append(step[0])
        factors.append(step[1])
    ranks = (3, 4) if want_3d else (4,)
    for j in range(len(values) - 1, -1, -1):
        if values[j].type.rank in ranks and _holds(values[j], ops[:j], heads, transposed):
            return Operand(values[j], ops[:j], math.prod(factors[:j]))
    return Operand(v, [], transpose=True)  # only kT comes here: q and v hold themselves


def _holds(source: Value, ops: list[Operation], heads: int, transposed: bool) -> bool:
    """Whether moving ``source`` by ``ops`` (last first) gives the operand's
    [batch, heads, seq, size] (or its kT) from ``source`` read as 3-D or 4-D."""
    shape = source.type.shape
    if not ops:
        return not transposed  # the matmul's own operand: q or v as it is
    if min(shape) < 1 or source.type.size > INDEX_LIMIT or (len(shape) == 3 and shape[2] % heads):
        return False
    index = np.arange(source.type.size, dtype=np.int64).reshape(shape)
    want = as_heads(index, heads) if len(shape) == 3 else index
    moved = index
    for op in reversed(ops):
        moved = _move(op, moved)
    want = want.swapaxes(2, 3) if transposed else want
    return moved.shape == want.shape and np.array_equal(moved, want)


def _move(op: Operation, x: np.ndarray) -> np.ndarray:
    if op.name == "tensor.transpose":
        return x.transpose(op.attributes["perm"])
    if op.name == "tensor.reshape":
        return x.reshape(op.result.type.shape)
    return x  # a scalar multiplication moves nothing


def _tail(y: Value, shape_3d: tuple[int, int, int]) -> tuple[Value, list[Operation]]:
    """The value that holds the weighted sum ``y`` [b, h, s, d] as 3-D
    [b, s, h * d] through Transposes and Reshapes alone, and those ops;
    (y, []) when there is none."""
    values, ops = [y], []
    while len(values[-1].uses) == 1 and values[-1].uses[0][0].name in MOVES:
        ops.append(values[-1].uses[0][0])
        values.append(ops[-1].result)
    if not ops or y.type.size > INDEX_LIMIT:
        return y, []
    index = np.arange(y.type.size, dtype=np.int64).reshape(y.type.shape)
    want = index.transpose(0, 2, 1, 3).reshape(shape_3d)
    for j in range(len(values) - 1, 0, -1):
        moved = index
        for op in ops[:j]:
            moved = _move(op, moved)
        if moved.shape == want.shape and np.array_equal(moved, want):
            return values[j], ops[:j]
    return y, []
