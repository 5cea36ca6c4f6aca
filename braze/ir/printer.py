"""IR text: MLIR's generic op syntax; only ``func.func`` has its own form.

Naming is deterministic so that print -> parse -> print is the identity:
function arguments and constants print under their name hint (made unique),
every other value is numbered ``%0, %1, ...`` in print order.
"""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING

from .types import DenseElements, DenseResource, Location, TensorType

if TYPE_CHECKING:  # annotations only: core imports the printer (Module.__str__)
    from .core import Block, Func, Module, Operation, Value

_BARE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.$\-]*$")
_HANDLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.$\-]*$")


def format_string(s: str) -> str:
    return json.dumps(s)


def format_scalar(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)  # shortest repr that round-trips; always has '.', 'e' or 'inf'
    if isinstance(v, str):
        return format_string(v)
    raise TypeError(f"cannot print attribute value {v!r}")


def format_attr(v) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(format_attr(x) for x in v) + "]"
    if isinstance(v, DenseResource):
        h = v.handle if _HANDLE.match(v.handle) else format_string(v.handle)
        return f"dense_resource<{h}>"
    if isinstance(v, DenseElements):
        if v.splat:
            return f"dense<{format_scalar(v.values[0])}>"
        return "dense<[" + ", ".join(format_scalar(x) for x in v.values) + "]>"
    if isinstance(v, TensorType):
        return str(v)
    return format_scalar(v)


def format_attr_dict(attrs: dict) -> str:
    items = []
    for k in sorted(attrs):
        key = k if _BARE.match(k) else format_string(k)
        items.append(f"{key} = {format_attr(attrs[k])}")
    return "{" + ", ".join(items) + "}"


def format_loc(loc: Location | None) -> str:
    if loc is None:
        return ""
    if loc.op_type:
        return f" loc({format_string(loc.name)} : {format_string(loc.op_type)})"
    return f" loc({format_string(loc.name)})"


class _Namer:
    def __init__(self):
        self.names: dict[int, str] = {}
        self.taken: set[str] = set()
        self.counter = 0

    def hinted(self, v: Value) -> str:
        base = sanitize(v.name) if v.name and not v.name.isdigit() else None
        if base is None:
            return self.numbered(v)
        name, n = base, 1
        while name in self.taken:
            name = f"{base}_{n}"
            n += 1
        return self._set(v, name)

    def numbered(self, v: Value) -> str:
        while str(self.counter) in self.taken:
            self.counter += 1
        name = str(self.counter)
        self.counter += 1
        return self._set(v, name)

    def _set(self, v: Value, name: str) -> str:
        self.taken.add(name)
        self.names[id(v)] = name
        return "%" + name

    def __getitem__(self, v: Value) -> str:
        try:
            return "%" + self.names[id(v)]
        except KeyError:
            return "%<<undefined>>"


def sanitize(name: str) -> str:
    """An SSA name for an ONNX tensor name: letters, digits, ``_ . $ -``."""
    s = re.sub(r"[^A-Za-z0-9_.$\-]", "_", name)
    if not s or not (s[0].isalpha() or s[0] == "_"):
        s = "v" + s
    return s


class Printer:
    def __init__(self):
        self.namer = _Namer()
        self.lines: list[str] = []

    def func(self, f: Func) -> None:
        args = []
        for a in f.args:
            text = f"{self.namer.hinted(a)}: {a.type}"
            if a.name is not None and sanitize(a.name) != a.name:
                text += " " + format_attr_dict({"name": a.name})
            args.append(text)
        results = [f"{t} {format_attr_dict({'name': n})}" for t, n in zip(f.result_types, f.result_names)]
        self.lines.append(f"func.func @{f.name}({', '.join(args)}) -> ({', '.join(results)}) {{")
        self.block_ops(f.body, "  ")
        self.lines.append("}")

    def block_ops(self, block: Block, indent: str) -> None:
        for op in block.ops:
            self.op(op, indent)

    def op(self, op: Operation, indent: str) -> None:
        namer = self.namer
        if op.name == "const":
            lhs = [namer.hinted(r) for r in op.results]
        else:
            lhs = [namer.numbered(r) for r in op.results]
        head = f"{', '.join(lhs)} = " if lhs else ""
        operands = ", ".join(namer[v] for v in op.operands)
        text = f'{indent}{head}"{op.name}"({operands})'
        if op.regions:
            opener = text + " ({"
            for region in op.regions:
                self.lines.append(opener)
                for bi, block in enumerate(region.blocks):
                    args = ", ".join(f"{namer.numbered(a)}: {a.type}" for a in block.args)
                    self.lines.append(f"{indent}^bb{bi}({args}):")
                    self.block_ops(block, indent + "  ")
                opener = indent + "}, {"
            text = indent + "})"
        if op.attributes:
            text += " " + format_attr_dict(op.attributes)
        in_types = "(" + ", ".join(str(v.type) for v in op.operands) + ")"
        out_types = "(" + ", ".join(str(r.type) for r in op.results) + ")" if len(op.results) != 1 else str(op.results[0].type)
        text += f" : {in_types} -> {out_types}{format_loc(op.loc)}"
        self.lines.append(text)


def print_module(module: Module) -> str:
    p = Printer()
    for i, f in enumerate(module.funcs):
        if i:
            p.lines.append("")
        p.func(f)
    return "\n".join(p.lines) + "\n"


def print_op(op: Operation) -> str:
    """One op's text (operands may print as undefined): for messages."""
    p = Printer()
    for v in op.operands:
        p.namer.numbered(v)
    p.op(op, "")
    return "\n".join(p.lines)
