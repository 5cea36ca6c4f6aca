"""Reads the IR text that ``printer`` writes (MLIR generic op syntax).

Every malformed input raises ``ParseError`` with line:column and what was
expected; nothing else escapes ``parse_module``.
"""

from __future__ import annotations

import json
import re

import numpy as np

from ..errors import ParseError
from .core import Block, Func, Module, Operation, Region, Value
from .registry import lookup
from .types import DTYPES, DenseElements, DenseResource, Location, TensorType

_WS = re.compile(r"(?:\s+|//[^\n]*)*")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.$\-]*")
_SSA = re.compile(r"%([A-Za-z0-9_.$\-]+)")
_NUMBER = re.compile(r"-?(?:\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+)")
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_TENSOR = re.compile(r"tensor<((?:\d+x)*)([a-z0-9]+)>")
_MAX_DEPTH = 200


class Parser:
    def __init__(self, text: str, filename: str = "<text>"):
        self.text, self.filename, self.pos = text, filename, 0
        self.scopes: list[dict[str, Value]] = []
        self.depth = 0

    # --- low level ---------------------------------------------------------------
    def error(self, message: str, pos: int | None = None) -> ParseError:
        pos = self.pos if pos is None else pos
        line = self.text.count("\n", 0, pos) + 1
        col = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        return ParseError(message, line, col, self.filename)

    def skip(self) -> None:
        self.pos = _WS.match(self.text, self.pos).end()

    def peek(self, s: str) -> bool:
        self.skip()
        return self.text.startswith(s, self.pos)

    def accept(self, s: str) -> bool:
        if self.peek(s):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str, what: str | None = None) -> None:
        if not self.accept(s):
            raise self.error(f"expected {what or repr(s)}, found {self.found()}")

    def match(self, regex: re.Pattern, what: str) -> re.Match:
        self.skip()
        m = regex.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected {what}, found {self.found()}")
        self.pos = m.end()
        return m

    def found(self) -> str:
        if self.pos >= len(self.text):
            return "end of input"
        tok = re.match(r"\S{1,20}", self.text[self.pos:])
        return repr(tok.group(0)) if tok else repr(self.text[self.pos])

    def at_end(self) -> bool:
        self.skip()
        return self.pos >= len(self.text)

    def comma_list(self, item, close: str) -> list:
        out = []
        if self.accept(close):
            return out
        while True:
            out.append(item())
            if self.accept(close):
                return out
            self.expect(",", f"',' or '{close}'")

    # --- pieces ------------------------------------------------------------------
    def string(self) -> str:
        m = self.match(_STRING, "a string")
        try:
            return json.loads(m.group(0))
        except ValueError:
            raise self.error("malformed string escape", m.start()) from None

    def type(self) -> TensorType:
        self.skip()
        start = self.pos
        m = self.match(_TENSOR, "a tensor type such as tensor<1x3xf32>")
        if m.group(2) not in DTYPES:
            raise self.error(f"unknown element type '{m.group(2)}' (known: {', '.join(DTYPES)})", start)
        dims = [int(d) for d in m.group(1).split("x") if d]
        return TensorType(tuple(dims), m.group(2))

    def type_list(self) -> list[TensorType]:
        self.expect("(", "'(' before a type list")
        return self.comma_list(self.type, ")")

    def result_types(self) -> list[TensorType]:
        if self.peek("("):
            return self.type_list()
        return [self.type()]

    def scalar(self):
        self.skip()
        for word, value in (("true", True), ("false", False), ("inf", float("inf")),
                            ("-inf", float("-inf")), ("nan", float("nan"))):
            if re.match(re.escape(word) + r"\b", self.text[self.pos:self.pos + len(word) + 1]):
                self.pos += len(word)
                return value
        if self.peek('"'):
            return self.string()
        m = self.match(_NUMBER, "a number, string, true/false, inf or nan")
        s = m.group(0)
        return float(s) if any(c in s for c in ".eE") else int(s)

    def attr_value(self):
        self.enter()
        try:
            if self.accept("["):
                return tuple(self.comma_list(self.attr_value, "]"))
            if self.accept("dense_resource<"):
                handle = self.string() if self.peek('"') else self.match(_IDENT, "a resource handle").group(0)
                self.expect(">")
                return DenseResource(handle)
            if self.accept("dense<"):
                if self.accept("["):
                    values = tuple(self.comma_list(self.scalar, "]"))
                    self.expect(">")
                    return DenseElements(values)
                value = self.scalar()
                self.expect(">")
                return DenseElements((value,), splat=True)
            if self.peek("tensor<"):
                return self.type()
            return self.scalar()
        finally:
            self.depth -= 1

    def attr_dict(self) -> dict:
        out = {}

        def entry():
            start = self.pos
            key = self.string() if self.peek('"') else self.match(_IDENT, "an attribute name").group(0)
            if key in out:
                raise self.error(f"duplicate attribute '{key}'", start)
            self.expect("=", "'=' after attribute name")
            out[key] = self.attr_value()

        self.expect("{")
        self.comma_list(entry, "}")
        return out

    def loc(self) -> Location | None:
        if not self.accept("loc("):
            return None
        name = self.string()
        op_type = self.string() if self.accept(":") else None
        self.expect(")")
        return Location(name, op_type)

    def enter(self) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise self.error(f"nesting deeper than {_MAX_DEPTH}")

    # --- values ------------------------------------------------------------------
    def define(self, name: str, value: Value, pos: int) -> None:
        for scope in self.scopes:
            if name in scope:
                raise self.error(f"redefinition of %{name}", pos)
        self.scopes[-1][name] = value

    def use(self) -> Value:
        self.skip()
        start = self.pos
        name = self.match(_SSA, "an SSA value such as %0").group(1)
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        raise self.error(f"use of undefined value %{name}", start)

    # --- structure ---------------------------------------------------------------
    def module(self) -> Module:
        funcs = []
        wrapped = self.accept("module")
        if wrapped:
            self.expect("{")
        while not (self.at_end() or (wrapped and self.peek("}"))):
            funcs.append(self.func())
        if wrapped:
            self.expect("}")
        if not self.at_end():
            raise self.error(f"expected end of input, found {self.found()}")
        if not funcs:
            raise self.error("expected 'func.func'")
        return Module(funcs)

    def func(self) -> Func:
        self.expect("func.func", "'func.func'")
        self.expect("@", "'@' and the function name")
        name = self.match(_IDENT, "a function name").group(0)
        self.expect("(")
        arg_names, arg_types, arg_pos = [], [], []

        def arg():
            self.skip()
            arg_pos.append(self.pos)
            ssa = self.match(_SSA, "an argument such as %x").group(1)
            self.expect(":", "':' and the argument type")
            arg_types.append(self.type())
            attrs = self.attr_dict() if self.peek("{") else {}
            arg_names.append((ssa, attrs.get("name", ssa)))

        self.comma_list(arg, ")")
        self.expect("->", "'->' and the result types")
        result_names = []

        def result():
            t = self.type()
            attrs = self.attr_dict() if self.peek("{") else {}
            result_names.append(attrs.get("name"))
            return t

        self.expect("(")
        declared = self.comma_list(result, ")")
        body = Block(arg_types, [n for _, n in arg_names])
        self.scopes.append({})
        for (ssa, _), a, pos in zip(arg_names, body.args, arg_pos):
            self.define(ssa, a, pos)
        self.expect("{")
        start = self.pos
        while not self.accept("}"):
            if self.at_end():
                raise self.error("expected '}' to close the function")
            body.append(self.op())
        self.scopes.pop()
        f = Func(name, body, result_names if all(result_names) else None)
        term = body.terminator
        if term is None or term.name != "func.return":
            raise self.error(f"func @{name} must end with \"func.return\"", start)
        if [v.type for v in term.operands] != declared:
            raise self.error(f"func @{name} declares results ({', '.join(map(str, declared))}) "
                             f"but returns ({', '.join(str(v.type) for v in term.operands)})", start)
        return f

    def op(self) -> Operation:
        self.enter()
        self.skip()
        op_start = self.pos
        results = []
        if self.peek("%"):
            def res():
                self.skip()
                return self.pos, self.match(_SSA, "a result name").group(1)
            results.append(res())
            while self.accept(","):
                results.append(res())
            self.expect("=", "'=' after the result names")
        self.skip()
        name_pos = self.pos
        name = self.string() if self.peek('"') else None
        if name is None:
            raise self.error(f"expected an op name in quotes such as \"math.add\", found {self.found()}")
        if lookup(name) is None:
            raise self.error(f"unknown op '{name}' (`braze ops` lists the ops)", name_pos)
        self.expect("(", "'(' and the operands")
        operands = self.comma_list(self.use, ")")
        regions = []
        if self.accept("("):
            regions = self.comma_list(self.region, ")")
        attrs = self.attr_dict() if self.peek("{") else {}
        self.expect(":", "':' and the op's type")
        types_pos = self.pos
        in_types = self.type_list()
        self.expect("->", "'->' and the result types")
        out_types = self.result_types()
        loc = self.loc()
        if len(in_types) != len(operands):
            raise self.error(f"'{name}' has {len(operands)} operands but {len(in_types)} operand types", types_pos)
        for i, (v, t) in enumerate(zip(operands, in_types)):
            if v.type != t:
                raise self.error(f"'{name}' operand #{i} is declared {t} but the value has type {v.type}", types_pos)
        if len(out_types) != len(results):
            raise self.error(f"'{name}' defines {len(results)} values but has {len(out_types)} result types", op_start)
        op = Operation(name, operands, out_types, attrs, regions, loc)
        for (pos, ssa), r in zip(results, op.results):
            self.define(ssa, r, pos)
            if name == "const" and not ssa.isdigit():
                r.name = ssa
        self.depth -= 1
        return op

    def region(self) -> Region:
        self.expect("{", "'{' to open a region")
        region = Region()
        self.scopes.append({})
        while not self.accept("}"):
            self.expect("^", "a block label such as ^bb0")
            self.match(_IDENT, "a block label")
            self.expect("(")
            decls = []

            def decl():
                self.skip()
                pos = self.pos
                ssa = self.match(_SSA, "a block argument").group(1)
                self.expect(":")
                decls.append((pos, ssa, self.type()))

            self.comma_list(decl, ")")
            self.expect(":", "':' after the block label")
            block = region.add_block(Block([t for _, _, t in decls]))
            for (pos, ssa, _), a in zip(decls, block.args):
                self.define(ssa, a, pos)
            while not (self.peek("}") or self.peek("^")):
                if self.at_end():
                    raise self.error("expected '}' to close the region")
                block.append(self.op())
        self.scopes.pop()
        return region


def parse_module(text: str, filename: str = "<text>", blobs: dict[str, np.ndarray] | None = None) -> Module:
    """Parse IR text into a Module (not verified: call ``verify``)."""
    try:
        module = Parser(text, filename).module()
    except RecursionError:
        raise ParseError("input nests too deeply", 1, 1, filename) from None
    if blobs:
        module.blobs.update(blobs)
    return module
