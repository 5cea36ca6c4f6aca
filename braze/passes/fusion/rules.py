"""The automatic fusion rules, as data: a name, a level, and a finder.

A finder walks the graph and proposes merges through ``Planner.propose``,
which applies the controls and the checks; the finder only says *what*
would make one kernel. Rules run in the order of ``RULES`` (level 1 rules
first), each until it finds nothing more to merge; a rule marked ``last``
runs after all of them.

| level | rules |
|---|---|
| 1 | conv_epilogue, matmul_epilogue, pool_epilogue, elemwise_chain |
| 2 | injective_producer, norm_prologue, norm_epilogue, gelu_epilogue, conv_pool, conv_depthwise |
| 3 | attention, horizontal_matmul, multi_output |
| 1, last | cast_fold |
"""

from __future__ import annotations

from dataclasses import dataclass
from heapq import heappop, heappush
from typing import Callable, ClassVar

from ...ir import Value
from ...ir.ops.layout import blocked_depthwise, blocked_pointwise
from ...ir.registry import Kind, contraction
from .graph import ELEMENTWISE, HEAVY, LIGHT, Graph
from .planner import Planner

Finder = Callable[[Planner, "FusionRule"], None]


@dataclass(frozen=True)
class FusionRule:
    """An automatic rule: ``find(plan, rule)`` proposes merges and the
    planner's gate decides. ``doc`` is its one-line description."""

    name: str
    level: int
    find: Finder
    doc: str
    max_heavy: int | None = 1  # anchor/reduce ops one merge may put together
    multi_output: bool = False  # groups with several outputs at any level
    last: bool = False  # runs after every level's rules (on what they left)
    manual: ClassVar[bool] = False

    def apply(self, plan: Planner) -> None:
        self.find(plan, self)


# --- helpers -----------------------------------------------------------------------------
def grow(plan: Planner, rule: FusionRule, seed: int, accept: Callable[[int, int], bool]) -> None:
    """Merge into the seed's cluster, one at a time, the consumers that
    ``accept(member, user)`` takes, until none is left or taken. A consumer
    comes with the ones that close a diamond with it (``closing``)."""
    progress = True
    while progress:
        progress = False
        for member, user in plan.consumers(seed):
            if accept(member, user) and plan.propose(rule, [seed, user, *closing(plan, seed, user, accept)],
                                                     [member, user]):
                progress = True
                break


def closing(plan: Planner, seed: int, user: int, accept: Callable[[int, int], bool]) -> list[int]:
    """The consumers that read two or more values of the seed's cluster
    joined with ``user``'s, and nothing else computed: x * sigmoid(x) (SiLU)
    after a conv, whose Mul reads the conv and the Sigmoid. Joined one at a
    time, neither pair is a group (the first has two outputs, the second a
    path out of the group and back), so they join together."""
    inside = set(plan.cluster(seed).members) | set(plan.cluster(user).members)
    added: list[int] = []
    grew = True
    while grew:
        grew = False
        for member in sorted(inside):
            for w in plan.graph.succs[member]:
                preds = set(plan.graph.preds[w])
                if w not in inside and len(preds & inside) >= 2 and preds <= inside and accept(member, w):
                    inside |= plan.cluster(w).members
                    added.append(w)
                    grew = True
    return added


def nodes_named(graph: Graph, names: frozenset[str]) -> list[int]:
    return [i for i, op in enumerate(graph.ops) if op.name in names]


def nodes_contracting(graph: Graph, family: str) -> list[int]:
    """The ops of a contraction family ("conv", "matmul": OpDef.contraction)."""
    return [i for i, op in enumerate(graph.ops) if contraction(op.name) == family]


def nodes_of_kind(graph: Graph, kind: Kind) -> list[int]:
    return [i for i, k in enumerate(graph.kinds) if k == kind]


def elementwise_region(graph: Graph, v: Value) -> tuple[list[int], Value] | None:
    """The elementwise ops computed from ``v`` and constants alone, when
    they take every use of ``v`` and end in one value: (nodes, that value).
    The five ops of an erf-GELU, or Softmax's NaN guard (IsNaN, Where)."""
    if id(v) in graph.returned or not v.uses:
        return None
    region: set[int] = set()
    inside = {id(v)}
    heap = list(graph.users(v))
    # Users always come after their producers, so popping in graph order
    # decides every producer of a node before the node itself.
    while heap:
        i = heappop(heap)
        op = graph.ops[i]
        if i in region or graph.kinds[i] not in ELEMENTWISE:
            continue
        if all(id(x) in inside or _is_const(x) for x in op.operands):
            region.add(i)
            inside.update(id(r) for r in op.results)
            for u in graph.succs[i]:
                heappush(heap, u)
    if not region or any(u not in region for u in graph.users(v)):
        return None
    outputs = graph.outputs(region)
    return (sorted(region), outputs[0]) if len(outputs) == 1 else None


def _is_const(v: Value) -> bool:
    return v.owner is not None and v.owner.name == "const"


# --- level 1 -------------------------------------------------------------------------------
def _epilogue(anchors: Callable[[Graph], list[int]]) -> Finder:
    def find(plan: Planner, rule: FusionRule) -> None:
        for i in anchors(plan.graph):
            grow(plan, rule, i, lambda member, user: plan.kind(user) in ELEMENTWISE)

    return find


def elemwise_chain(plan: Planner, rule: FusionRule) -> None:
    def pure(i: int) -> bool:
        return plan.kinds(plan.cluster(i).members) <= ELEMENTWISE

    for i in range(len(plan.graph)):
        if pure(i):
            grow(plan, rule, i, lambda member, user: pure(user))


# --- level 2 -------------------------------------------------------------------------------
#: The most inputs a concat may have and still join a heavy op as its
#: prologue (a multi-head split's few; not a recurrence's one per step).
MAX_PROLOGUE_INPUTS = 8


def injective_producer(plan: Planner, rule: FusionRule) -> None:
    """Data movement joins its consumer: light clusters with an injective op
    merge with light neighbours, or become the prologue of a heavy op."""

    def accept(seed: int, user: int) -> bool:
        mine = plan.kinds(plan.cluster(seed).members)
        theirs = plan.kinds(plan.cluster(user).members)
        if not mine <= LIGHT or Kind.OPAQUE in theirs:
            return False
        if theirs <= LIGHT:
            return Kind.INJECTIVE in mine | theirs
        return Kind.INJECTIVE in mine and not gathers_many(seed)

    def gathers_many(i: int) -> bool:
        """A concat of many inputs (an RNN's steps) before a heavy op: the
        anchor's schedule would read it through a select per element."""
        return any(plan.graph.ops[m].name == "tensor.concat" and len(plan.graph.ops[m].operands) > MAX_PROLOGUE_INPUTS
                   for m in plan.cluster(i).members)

    for i in range(len(plan.graph)):
        if plan.is_light(i):
            grow(plan, rule, i, lambda member, user, seed=i: accept(seed, user))


def norm_prologue(plan: Planner, rule: FusionRule) -> None:
    """An elementwise producer (residual add, scale) joins the normalisation,
    softmax or reduction that reads it."""
    graph = plan.graph
    for r in nodes_of_kind(graph, Kind.REDUCE):
        p = graph.producer(graph.ops[r].operands[0])
        if p is not None and graph.kinds[p] in LIGHT and plan.cluster(p) is not plan.cluster(r):
            plan.propose(rule, [p, r], [p, r])


def norm_epilogue(plan: Planner, rule: FusionRule) -> None:
    for r in nodes_of_kind(plan.graph, Kind.REDUCE):
        grow(plan, rule, r, lambda member, user: plan.kind(user) in ELEMENTWISE)


def gelu_epilogue(plan: Planner, rule: FusionRule) -> None:
    """The ops of an erf-GELU (x/√2 → erf → +1 → ×0.5 → ×x, in any spelling)
    that read an anchor's output join the anchor's kernel."""
    graph = plan.graph
    for a in nodes_of_kind(graph, Kind.ANCHOR):
        for v in graph.outputs(plan.cluster(a).members):
            found = elementwise_region(graph, v)
            if found and any(graph.ops[i].name == "math.erf" for i in found[0]):
                region, _ = found
                plan.propose(rule, [a, *region], [graph.producer(v), region[-1]])


POOLS = frozenset({"nn.max_pool", "nn.avg_pool"})
#: convs whose kernel may take the pool after them (not a transposed conv)
_POOLED_CONVS = frozenset({"nn.conv", "nn.conv_blocked"})


def _is_pool(op) -> bool:
    """Pooling, or a global mean/max over the spatial axes of an NCHW tensor."""
    if op.name in POOLS:
        return True
    axes = op.attributes.get("axes", ())
    is_global = op.operands[0].type.rank == 4 and tuple(axes) == (2, 3)
    return op.name in ("reduce.mean", "reduce.max") and is_global


def conv_pool(plan: Planner, rule: FusionRule) -> None:
    graph = plan.graph
    for i, op in enumerate(graph.ops):
        p = graph.producer(op.operands[0]) if op.operands else None
        if p is None or not _is_pool(op):
            continue
        if any(graph.ops[m].name in _POOLED_CONVS for m in plan.cluster(p).members):
            plan.propose(rule, [p, i], [p, i])


def conv_depthwise(plan: Planner, rule: FusionRule) -> None:
    """A depthwise conv joins the group of the pointwise (1x1) conv whose
    result (after its epilogue) it reads: an inverted residual block's
    expansion and depthwise convs, which codegen computes as one loop nest
    (schedules/chain.py). Blocked layout only (the CPU's)."""
    graph = plan.graph
    for i, op in enumerate(graph.ops):
        p = graph.producer(op.operands[0]) if op.operands else None
        if p is None or not blocked_depthwise(op):
            continue
        members = plan.cluster(p).members
        heavy = [m for m in members if graph.kinds[m] in HEAVY]
        if len(heavy) == 1 and blocked_pointwise(graph.ops[heavy[0]]):
            plan.propose(rule, [p, i], [p, i])


# --- level 3 -------------------------------------------------------------------------------
def _data_operand(graph: Graph, i: int) -> Value | None:
    """The operand of an elementwise op that carries the tensor (not a mask,
    scale or bias): the first one computed by a node, with the result's shape."""
    op = graph.ops[i]
    for v in op.operands:
        if graph.producer(v) is not None and v.type.shape == op.results[0].type.shape:
            return v
    return None


def _scores(graph: Graph, softmax: int) -> list[int] | None:
    """MatMul → (scale, mask add, ...) → Softmax, walking up: [matmul, ops...]."""
    path, v = [], graph.ops[softmax].operands[0]
    for _ in range(5):
        p = graph.producer(v)
        if p is None:
            return None
        if graph.ops[p].name == "nn.matmul":
            return [p] + path[::-1]
        v = _data_operand(graph, p) if graph.kinds[p] in ELEMENTWISE else None
        if v is None:
            return None
        path.append(p)
    return None


def _weighted_sum(graph: Graph, softmax: int) -> list[int] | None:
    """Softmax → (NaN guard) → MatMul as its left operand, walking down."""
    probs = graph.ops[softmax].results[0]
    region: list[int] = []
    if any(graph.kinds[u] in ELEMENTWISE for u in graph.users(probs)):
        found = elementwise_region(graph, probs)
        if found is None:
            return None
        region, probs = found
    users = graph.users(probs)
    if len(users) != 1 or id(probs) in graph.returned:
        return None
    mm = graph.ops[users[0]]
    return region + users if mm.name == "nn.matmul" and mm.operands[0] is probs else None


#: the attribute the raise-attention pass (passes/attention.py) marks its ops with: the rule's name
RAISED_BY = "braze.raised_by"
#: ... and the ONNX node names of the ops it replaced (what ``explain`` lists as its members)
RAISED_FROM = "braze.raised_from"


def attention(plan: Planner, rule: FusionRule) -> None:
    """An ``nn.attention`` op that the raise-attention pass made at level 3
    is the whole attention in one kernel already: the rule counts it
    (matched and applied) and groups it with nothing. Where a pattern was
    left decomposed, its ops are proposed as one group, so that the gate
    records why (``level``, ``switched_off``, ``blacklisted``...) or,
    where the raise only lacked a clean pattern (a value with other
    readers), groups them."""
    graph = plan.graph
    for i in nodes_named(graph, frozenset({"nn.attention"})):
        raised, cluster = graph.ops[i].attributes.get(RAISED_BY) == rule.name, plan.cluster(i)
        if raised and rule.name not in cluster.rules:  # once, though rules run to a fixpoint
            cluster.rules.append(rule.name)
            stats = plan.report.rules[rule.name]
            stats.matched, stats.applied = stats.matched + 1, stats.applied + 1
    for s in nodes_named(graph, frozenset({"nn.softmax"})):
        before, after = _scores(graph, s), _weighted_sum(graph, s)
        if before and after:
            plan.propose(rule, before + [s] + after, [before[0], s, after[-1]])


def horizontal_matmul(plan: Planner, rule: FusionRule) -> None:
    """Matmuls that read the same left operand (Q, K and V) become one kernel."""
    graph = plan.graph
    values = list(graph.func.args) + [r for op in graph.ops for r in op.results]
    for v in values:
        siblings = [u for u in graph.users(v)
                    if graph.ops[u].name == "nn.matmul" and graph.ops[u].operands[0] is v]
        if len(siblings) > 1:
            plan.propose(rule, siblings, siblings)


def _precision_cast(op) -> bool:
    """A cast between float32 and a 16-bit float type (either way)."""
    types = {op.operands[0].type.dtype, op.results[0].type.dtype}
    return op.name == "math.cast" and len(types) == 2 and types <= {"f32", "f16", "bf16"}


def cast_fold(plan: Planner, rule: FusionRule) -> None:
    """A cast the other rules left as a kernel of its own (the precision
    pass's casts between a float32 and a 16-bit group) joins its producer's
    kernel, as an extra output where the producer's result has other users;
    a cast of a graph input joins its consumer's kernel as a prologue."""
    graph = plan.graph
    for i in nodes_named(graph, frozenset({"math.cast"})):
        members = plan.cluster(i).members
        if any(not _precision_cast(graph.ops[m]) for m in members):
            continue
        producers = sorted({p for m in members for p in graph.preds[m]} - members)
        if producers and plan.propose(rule, [i, producers[0]], [producers[0], i]):
            continue
        users = {id(plan.cluster(u)): u for _, u in plan.consumers(i)}
        if not producers and len(users) == 1:
            user = next(iter(users.values()))
            plan.propose(rule, [i, user], [i, user])


def multi_output(plan: Planner, rule: FusionRule) -> None:
    """Retry the merges refused earlier only because the group would have
    several outputs (e.g. a residual add that also feeds a LayerNorm)."""
    deferred, plan.deferred = plan.deferred, []
    for nodes, edge, max_heavy in deferred:
        plan.propose(rule, nodes, edge, max_heavy=max_heavy)


RULES: tuple[FusionRule, ...] = (
    FusionRule("conv_epilogue", 1, _epilogue(lambda g: nodes_contracting(g, "conv")),
               "a conv with the elementwise ops after it (bias, BN, activation, residual add)"),
    FusionRule("matmul_epilogue", 1, _epilogue(lambda g: nodes_contracting(g, "matmul")),
               "a matmul or Gemm with the elementwise ops after it (bias, activation, residual add)"),
    FusionRule("pool_epilogue", 1, _epilogue(lambda g: nodes_named(g, POOLS)),
               "a pooling op with the elementwise ops after it"),
    FusionRule("elemwise_chain", 1, elemwise_chain, "chains of elementwise/broadcast ops"),
    FusionRule("injective_producer", 2, injective_producer,
               "transpose/reshape/slice/pad/gather/concat inlined into their consumer"),
    FusionRule("norm_prologue", 2, norm_prologue,
               "an elementwise producer (e.g. residual add) into LayerNorm/Softmax/reductions"),
    FusionRule("norm_epilogue", 2, norm_epilogue,
               "the elementwise ops after a LayerNorm/Softmax/reduction (e.g. a NaN guard)"),
    FusionRule("gelu_epilogue", 2, gelu_epilogue, "an erf-GELU into the epilogue of the matmul before it"),
    FusionRule("conv_pool", 2, conv_pool, "Conv+BN+ReLU+Pool: a pooling op into the conv before it",
               max_heavy=2),
    FusionRule("conv_depthwise", 2, conv_depthwise,
               "a depthwise conv into the pointwise (1x1) conv group before it (an inverted residual "
               "block's expansion), computed row block by row block; blocked layout", max_heavy=2),
    FusionRule("attention", 3, attention,
               "MatMul → scale → mask add → Softmax (→ NaN guard) → MatMul as one kernel: raised to "
               "nn.attention (the raise-attention pass), else grouped", max_heavy=3),
    FusionRule("horizontal_matmul", 3, horizontal_matmul,
               "sibling matmuls that share their input (Q, K, V)", max_heavy=None, multi_output=True),
    FusionRule("multi_output", 3, multi_output,
               "merges that need a group with several outputs", max_heavy=None, multi_output=True),
    FusionRule("cast_fold", 1, cast_fold,
               "a cast left alone (between a float32 and a 16-bit group) into its producer's kernel, or "
               "after a graph input into its consumer's; runs after every level's rules",
               max_heavy=None, multi_output=True, last=True),
)
