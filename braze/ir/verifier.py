"""Checks that a module keeps every op's contract.

Per op: it is registered, its operand count and attributes fit the schema,
its result types are what type inference says, its operands are defined
before it, and its regions are well formed. Errors name the op and its
ONNX node.
"""

from __future__ import annotations

from ..errors import VerifyError
from .core import Block, Module, Operation
from .registry import lookup
from .types import DenseResource


def _where(op: Operation) -> str:
    return f"{op.loc}: " if op.loc else ""


def verify_op(op: Operation, module: Module | None = None) -> None:
    where = _where(op)
    opdef = lookup(op.name)
    if opdef is None:
        raise VerifyError(f"{where}unknown op '{op.name}'")
    lo, hi = opdef.operand_range()
    n = len(op.operands)
    if n < lo or (hi is not None and n > hi):
        want = f"at least {lo}" if hi is None else (f"{lo}" if lo == hi else f"{lo} to {hi}")
        raise VerifyError(f"{where}'{op.name}' takes {want} operands ({', '.join(opdef.operands)}), got {n}")
    if bool(op.regions) != opdef.has_regions:
        raise VerifyError(f"{where}'{op.name}' {'needs' if opdef.has_regions else 'takes no'} regions")
    types = [v.type for v in op.operands]
    if op.name == "const":
        attrs = opdef.normalize_attrs(op.attributes, where)
        if len(op.results) != 1:
            raise VerifyError(f"{where}'const' must have exactly one result")
        opdef.check_value(attrs["value"], op.results[0].type)
        _check_blob(op, attrs["value"], module)
        return
    if op.name == "fuse.group":
        opdef.normalize_attrs(op.attributes, where)
        _verify_group(op, where)
        return
    if op.name.startswith("cf."):
        _verify_control(op, opdef.normalize_attrs(op.attributes, where), where)
        return
    inferred = opdef.infer_types(types, op.attributes, where)
    actual = [r.type for r in op.results]
    if inferred != actual:
        raise VerifyError(
            f"{where}'{op.name}' result types ({', '.join(map(str, actual))}) differ from the inferred "
            f"({', '.join(map(str, inferred))})")


def _check_blob(op: Operation, value, module: Module | None) -> None:
    if not isinstance(value, DenseResource) or module is None or value.handle not in module.blobs:
        return  # text read without weights keeps its handles
    data, ty = module.blobs[value.handle], op.results[0].type
    if tuple(data.shape) != ty.shape or data.dtype != ty.np_dtype:
        raise VerifyError(f"{_where(op)}resource '{value.handle}' holds {data.dtype}{list(data.shape)} "
                          f"but the const is {ty}")


def _verify_group(op: Operation, where: str) -> None:
    if len(op.regions) != 1 or len(op.regions[0].blocks) != 1:
        raise VerifyError(f"{where}'fuse.group' needs one region with one block")
    block = op.regions[0].blocks[0]
    if [a.type for a in block.args] != [v.type for v in op.operands]:
        raise VerifyError(f"{where}'fuse.group' block arguments must have the operand types")
    term = block.terminator
    if term is None or term.name != "fuse.yield":
        raise VerifyError(f"{where}'fuse.group' region must end with \"fuse.yield\"")
    if [v.type for v in term.operands] != [r.type for r in op.results]:
        raise VerifyError(f"{where}'fuse.group' results must have the types its region yields")


def _verify_control(op: Operation, attrs: dict, where: str) -> None:
    """cf.if and cf.loop: isolated one-block regions ending with func.return
    (see ir/ops/control.py for the argument and result lists)."""
    scalar = {"cond": "i1", "trip_count": "i64"}
    for v, name in zip(op.operands, ("trip_count", "cond") if op.name == "cf.loop" else ("cond",)):
        if v.type.shape != () or v.type.dtype != scalar[name]:
            raise VerifyError(f"{where}'{op.name}' {name} must be a scalar {scalar[name]}, got {v.type}")
    if op.name == "cf.if":
        heads, captures, returns = [], op.operands[1:], [r.type for r in op.results]
        regions = 2
    else:
        n = attrs["carried"]
        carried = op.operands[2:2 + n]
        if len(carried) != n:
            raise VerifyError(f"{where}'cf.loop' has {len(op.operands) - 2} values after cond, fewer than "
                              f"carried={n}")
        heads, captures = [op.operands[0].type, op.operands[1].type], op.operands[2:]
        returns = [op.operands[1].type] + [v.type for v in carried]
        if [r.type for r in op.results] != [v.type for v in carried]:
            raise VerifyError(f"{where}'cf.loop' results must have the types of its carried values")
        regions = 1
    if len(op.regions) != regions or any(len(r.blocks) != 1 for r in op.regions):
        raise VerifyError(f"{where}'{op.name}' needs {regions} region(s) of one block each")
    for region in op.regions:
        block = region.blocks[0]
        if [a.type for a in block.args] != heads + [v.type for v in captures]:
            raise VerifyError(f"{where}'{op.name}' region arguments must be "
                              f"({', '.join(map(str, heads + [v.type for v in captures]))})")
        term = block.terminator
        if term is None or term.name != "func.return":
            raise VerifyError(f"{where}'{op.name}' region must end with \"func.return\"")
        if [v.type for v in term.operands] != returns:
            raise VerifyError(f"{where}'{op.name}' region returns ({', '.join(str(v.type) for v in term.operands)})"
                              f", not ({', '.join(map(str, returns))})")


def _verify_block(block: Block, visible: set[int], module: Module) -> None:
    visible = set(visible)
    visible.update(id(a) for a in block.args)
    for i, op in enumerate(block.ops):
        for j, v in enumerate(op.operands):
            if id(v) not in visible:
                raise VerifyError(f"{_where(op)}'{op.name}' operand #{j} is used before it is defined")
        opdef = lookup(op.name)
        if opdef is not None and opdef.terminator and i != len(block.ops) - 1:
            raise VerifyError(f"{_where(op)}'{op.name}' must be the last op of its block")
        verify_op(op, module)
        for region in op.regions:
            for b in region.blocks:  # a control-flow region sees only its arguments
                _verify_block(b, set() if op.name.startswith("cf.") else visible, module)
        visible.update(id(r) for r in op.results)


def verify(module: Module) -> Module:
    """Raise VerifyError on the first broken contract; return the module."""
    for f in module.funcs:
        term = f.body.terminator
        if term is None or term.name != "func.return":
            raise VerifyError(f"func @{f.name} must end with \"func.return\"")
        _verify_block(f.body, set(), module)
    return module
