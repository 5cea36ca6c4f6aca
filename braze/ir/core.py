"""The IR's nouns, after MLIR: Value, Operation, Block, Region, Func, Module.

A ``Value`` is an op result or a block argument and knows its uses; an
``Operation`` has a dialect-qualified name, operands, results, attributes,
regions and a location. The graph of a model is the body block of
``func.func @main``. Weights live in the module's blob store, not in ops.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from .types import Attribute, Location, TensorType


class Value:
    """An SSA value. ``name`` is an optional hint the printer may use."""

    __slots__ = ("type", "name", "uses")

    def __init__(self, type: TensorType, name: str | None = None):
        self.type = type
        self.name = name
        self.uses: list[tuple[Operation, int]] = []  # (user op, operand index)

    @property
    def owner(self) -> "Operation | None":
        return None

    def users(self) -> list["Operation"]:
        seen, out = set(), []
        for op, _ in self.uses:
            if id(op) not in seen:
                seen.add(id(op))
                out.append(op)
        return out

    def replace_all_uses_with(self, other: "Value") -> None:
        for op, i in list(self.uses):
            op.set_operand(i, other)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name or '?'}: {self.type}>"


class OpResult(Value):
    __slots__ = ("op", "index")

    def __init__(self, type: TensorType, op: "Operation", index: int):
        super().__init__(type)
        self.op, self.index = op, index

    @property
    def owner(self) -> "Operation":
        return self.op


class BlockArgument(Value):
    __slots__ = ("block", "index")

    def __init__(self, type: TensorType, block: "Block", index: int, name: str | None = None):
        super().__init__(type, name)
        self.block, self.index = block, index


class Operation:
    """One op. Build it with ``Operation(name, operands, result_types, ...)``
    and add it to a block; the registry (``braze.ir.registry``) knows its schema."""

    def __init__(
        self,
        name: str,
        operands: list[Value] = (),
        result_types: list[TensorType] = (),
        attributes: dict[str, Attribute] | None = None,
        regions: list["Region"] | None = None,
        loc: Location | None = None,
    ):
        self.name = name
        self.operands: list[Value] = []
        for v in operands:
            self._add_use(v, len(self.operands))
            self.operands.append(v)
        self.results = [OpResult(t, self, i) for i, t in enumerate(result_types)]
        self.attributes: dict[str, Attribute] = dict(attributes or {})
        self.regions: list[Region] = list(regions or [])
        for r in self.regions:
            r.parent = self
        self.loc = loc
        self.parent: Block | None = None

    # --- operands and uses -------------------------------------------------
    def _add_use(self, v: Value, i: int) -> None:
        if not isinstance(v, Value):
            raise TypeError(f"operand {i} of {self.name} is {type(v).__name__}, not a Value")
        v.uses.append((self, i))

    def set_operand(self, i: int, v: Value) -> None:
        old = self.operands[i]
        old.uses.remove((self, i))
        self.operands[i] = v
        self._add_use(v, i)

    def drop_operands(self) -> None:
        for i, v in enumerate(self.operands):
            v.uses.remove((self, i))
        self.operands = []

    @property
    def result(self) -> OpResult:
        assert len(self.results) == 1, f"{self.name} has {len(self.results)} results"
        return self.results[0]

    @property
    def opdef(self):
        from .registry import lookup

        return lookup(self.name)

    def attr(self, key: str, default=None):
        return self.attributes.get(key, default)

    # --- structure -------------------------------------------------------------
    def erase(self) -> None:
        """Remove this op from its block. Its results must be unused."""
        for r in self.results:
            if r.uses:
                raise ValueError(f"erasing {self.name} whose result is still used")
        self.drop_operands()
        for region in self.regions:
            for block in region.blocks:
                for op in reversed(block.ops):
                    op.drop_operands()
        if self.parent is not None:
            self.parent.remove(self)

    def walk(self) -> Iterator["Operation"]:
        """This op and every op nested in its regions, pre-order."""
        yield self
        for region in self.regions:
            for block in region.blocks:
                for op in block.ops:
                    yield from op.walk()

    def __repr__(self) -> str:
        return f"<Operation {self.name} at {self.loc}>"


class Block:
    """A list of ops with block arguments."""

    def __init__(self, arg_types: list[TensorType] = (), arg_names: list[str | None] | None = None):
        names = arg_names or [None] * len(arg_types)
        self.args = [BlockArgument(t, self, i, n) for i, (t, n) in enumerate(zip(arg_types, names))]
        self.ops: list[Operation] = []
        self.parent: Region | None = None

    def append(self, op: Operation) -> Operation:
        op.parent = self
        self.ops.append(op)
        return op

    def insert_before(self, anchor: Operation, op: Operation) -> Operation:
        op.parent = self
        self.ops.insert(self.index(anchor), op)
        return op

    def index(self, op: Operation) -> int:
        for i, o in enumerate(self.ops):
            if o is op:
                return i
        raise ValueError(f"{op} is not in this block")

    def remove(self, op: Operation) -> None:
        del self.ops[self.index(op)]
        op.parent = None

    def remove_many(self, ops) -> None:
        dead = {id(o) for o in ops}
        self.ops = [o for o in self.ops if id(o) not in dead]

    @property
    def terminator(self) -> Operation | None:
        return self.ops[-1] if self.ops else None


class Region:
    def __init__(self, blocks: list[Block] | None = None):
        self.blocks: list[Block] = []
        self.parent: Operation | None = None
        self.module: "Module | None" = None  # a control-flow region seen as a module (region_module)
        for b in blocks or []:
            self.add_block(b)

    def add_block(self, block: Block) -> Block:
        block.parent = self
        self.blocks.append(block)
        return block


class Func:
    """``func.func @name(args) -> results``. ``arg_names``/``result_names``
    keep the ONNX graph input/output names."""

    def __init__(self, name: str, body: Block, result_names: list[str] | None = None):
        self.name = name
        self.body = body
        self._result_names = result_names

    @property
    def args(self) -> list[BlockArgument]:
        return self.body.args

    @property
    def return_op(self) -> Operation:
        term = self.body.terminator
        if term is None or term.name != "func.return":
            raise ValueError(f"func @{self.name} has no func.return")
        return term

    @property
    def outputs(self) -> list[Value]:
        return self.return_op.operands

    @property
    def result_types(self) -> list[TensorType]:
        return [v.type for v in self.outputs]

    @property
    def result_names(self) -> list[str]:
        n = len(self.outputs)
        names = list(self._result_names or [])
        return names[:n] + [f"output_{i}" for i in range(len(names), n)]

    @result_names.setter
    def result_names(self, names: list[str]) -> None:
        self._result_names = list(names)

    def walk(self) -> Iterator[Operation]:
        for op in self.body.ops:
            yield from op.walk()


class Module:
    """A list of functions plus the blob store that holds constant data.

    ``fusion_report`` is the record the ``fuse`` pass leaves: a
    ``braze.passes.fusion.FusionReport`` (groups, refusals, rule counts), None
    until the pass runs; the compiler reads it for the artifact's manifest and
    ``braze explain``. It is not part of the IR text.
    """

    def __init__(self, funcs: list[Func] | None = None, blobs: dict[str, np.ndarray] | None = None):
        self.funcs: list[Func] = list(funcs or [])
        self.blobs: dict[str, np.ndarray] = dict(blobs or {})
        self.fusion_report = None  # FusionReport | None: set by the fuse pass

    @property
    def main(self) -> Func:
        for f in self.funcs:
            if f.name == "main":
                return f
        raise ValueError("module has no func.func @main")

    def walk(self) -> Iterator[Operation]:
        for f in self.funcs:
            yield from f.walk()

    def add_blob(self, hint: str, data: np.ndarray) -> str:
        """Store ``data`` under a fresh handle derived from ``hint``."""
        handle, n = hint or "blob", 1
        while handle in self.blobs:
            handle = f"{hint}_{n}"
            n += 1
        self.blobs[handle] = data
        return handle

    def __str__(self) -> str:
        from .printer import print_module

        return print_module(self)


def region_module(region: Region, parent: Module) -> Module:
    """A control-flow region (ir/ops/control.py) as a module of its own: one
    ``func.func @main`` whose body is the region's block, so passes and
    codegen treat it as they treat a model. The same object each time (what
    a pass records on it, the fusion report, stays); its blob store is the
    parent's (``run_in_region`` keeps a pass's changes to it apart)."""
    block = region.blocks[0]
    if region.module is None or region.module.main.body is not block:
        region.module = Module([Func("main", block)])
    region.module.blobs = parent.blobs
    return region.module


def control_regions(module: Module) -> Iterator[tuple[Operation, int, Module]]:
    """``(op, region index, region module)`` for every control-flow op at the
    top level of ``@main`` (nested ones: call this on the region modules)."""
    for op in list(module.main.body.ops):
        if op.name.startswith("cf."):
            for i, region in enumerate(op.regions):
                yield op, i, region_module(region, module)
