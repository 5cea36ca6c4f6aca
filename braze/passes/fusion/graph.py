"""The dataflow graph fusion works on, and the questions it asks of it.

Nodes are the ops of a function body other than constants and the return,
numbered in block order, which is a topological order (SSA). Constants are
never members of a group: a group reads them through its operands, like
any other value defined outside it.

A set of nodes may become one kernel only if it is *convex*: no path leaves
the set and comes back into it, otherwise the kernel would have to run both
before and after an op outside it (a cycle once the set is contracted).
"""

from __future__ import annotations

from typing import Iterable

from ...ir import Func, Operation, Value
from ...ir.registry import Kind, lookup

SKIPPED = ("const", "func.return")

#: Kinds that take part in fusion, and the "heavy" ones a kernel is built around.
LIGHT = frozenset({Kind.ELEMWISE, Kind.BROADCAST, Kind.INJECTIVE})
ELEMENTWISE = frozenset({Kind.ELEMWISE, Kind.BROADCAST})
HEAVY = frozenset({Kind.ANCHOR, Kind.REDUCE})


def op_kind(op: Operation) -> Kind:
    opdef = lookup(op.name)
    return opdef.kind if opdef is not None else Kind.OPAQUE


def node_name(op: Operation) -> str:
    """The ONNX node name of an op (its braze name when it has no location)."""
    return op.loc.name if op.loc is not None else op.name


def node_names(ops: Iterable[Operation]) -> list[str]:
    """ONNX node names, each once, in order (a Gemm's matmul and add share one)."""
    return list(dict.fromkeys(node_name(op) for op in ops))


class Graph:
    """Nodes, producer/consumer edges and the values that leave a node set."""

    def __init__(self, func: Func):
        self.func = func
        self.ops: list[Operation] = [op for op in func.body.ops if op.name not in SKIPPED]
        self._index = {id(op): i for i, op in enumerate(self.ops)}
        self.kinds: list[Kind] = [op_kind(op) for op in self.ops]
        self.succs: list[list[int]] = [self._consumers(op) for op in self.ops]
        self.preds: list[list[int]] = [self._producers(op) for op in self.ops]
        self.returned = {id(v) for v in func.outputs}

    def __len__(self) -> int:
        return len(self.ops)

    def index(self, op: Operation) -> int | None:
        return self._index.get(id(op))

    def producer(self, v: Value) -> int | None:
        """The node that defines ``v``; None for arguments and constants."""
        owner = v.owner
        return None if owner is None else self.index(owner)

    def _consumers(self, op: Operation) -> list[int]:
        users = (self.index(u) for r in op.results for u in r.users())
        return sorted({i for i in users if i is not None})

    def _producers(self, op: Operation) -> list[int]:
        return sorted({i for i in map(self.producer, op.operands) if i is not None})

    # --- a node set ---------------------------------------------------------------
    def is_convex(self, members: set[int]) -> bool:
        """False when a path leaves ``members`` and re-enters it."""
        last = max(members)
        # Nodes are topologically ordered: a path that re-enters the set only
        # visits nodes before its last member, so the search stops there.
        stack = [j for i in members for j in self.succs[i] if j not in members and j < last]
        seen: set[int] = set()
        while stack:
            j = stack.pop()
            if j in seen:
                continue
            seen.add(j)
            for k in self.succs[j]:
                if k in members:
                    return False
                if k < last and k not in seen:
                    stack.append(k)
        return True

    def inputs(self, members: set[int]) -> list[Value]:
        """Values the set reads from outside, each once, in order of first use."""
        seen: dict[int, Value] = {}
        for i in sorted(members):
            for v in self.ops[i].operands:
                if self.producer(v) not in members and id(v) not in seen:
                    seen[id(v)] = v
        return list(seen.values())

    def outputs(self, members: set[int]) -> list[Value]:
        """Results of the set that are used outside it or returned, in order."""
        out = []
        for i in sorted(members):
            for r in self.ops[i].results:
                if id(r) in self.returned or any(self.index(u) not in members for u in r.users()):
                    out.append(r)
        return out

    def live_outputs(self, members: set[int]) -> list[Value]:
        """Outputs that another op reads; values only returned do not count,
        so keeping a tensor the user asked to see never forbids a merge."""
        return [r for r in self.outputs(members)
                if any(self.index(u) is not None and self.index(u) not in members for u in r.users())]

    def working_set(self, members: set[int]) -> int:
        """Bytes a kernel of these nodes reads and writes: its distinct inputs
        and outputs (weights included)."""
        return sum(v.type.nbytes for v in self.inputs(members) + self.outputs(members))

    def users(self, v: Value) -> list[int]:
        return sorted({i for i in (self.index(u) for u in v.users()) if i is not None})

    def descendants(self, start: Iterable[int]) -> set[int]:
        return self._closure(start, self.succs)

    def ancestors(self, start: Iterable[int]) -> set[int]:
        return self._closure(start, self.preds)

    @staticmethod
    def _closure(start: Iterable[int], edges: list[list[int]]) -> set[int]:
        seen, stack = set(), list(start)
        while stack:
            i = stack.pop()
            if i not in seen:
                seen.add(i)
                stack.extend(edges[i])
        return seen
