"""The converter table: one function per ONNX op type and opset range.

A converter takes the conversion context, the node's inputs as IR values
(None for an omitted optional input) and the node's ONNX attributes as
keyword arguments, and returns the IR value(s) of the node's outputs::

    @converter("LeakyRelu")
    def leaky_relu(ctx, X, *, alpha=0.01):
        return ctx.op("math.leaky_relu", [X], alpha=alpha)

``since`` picks the converter by opset: for a model at opset 17 the
converter with the highest ``since`` <= 17 applies.
"""

from __future__ import annotations

import textwrap
from typing import Callable

from ..ir.registry import declare_source_op_types

# op type -> sorted list of (since_version, converter)
CONVERTERS: dict[str, list[tuple[int, Callable]]] = {}


def converter(*op_types: str, since: int = 1):
    declare_source_op_types(*op_types)  # what manual fusion rules may name (braze.ir.registry)

    def decorate(fn: Callable) -> Callable:
        for op_type in op_types:
            table = CONVERTERS.setdefault(op_type, [])
            if any(s == since for s, _ in table):
                raise AssertionError(f"two converters for {op_type} since opset {since}")
            table.append((since, fn))
            table.sort(key=lambda e: e[0])
        return fn

    return decorate


def find_converter(op_type: str, opset: int) -> Callable | None:
    _load()
    best = None
    for since, fn in CONVERTERS.get(op_type, []):
        if since <= opset:
            best = fn
    return best


def supported_op_types() -> list[str]:
    _load()
    return sorted(CONVERTERS)


def _load() -> None:
    from . import converters  # noqa: F401  (registers every converter)


ONNX_BEGIN = "<!-- BEGIN ONNX TABLE (generated: braze ops --markdown) -->"
ONNX_END = "<!-- END ONNX TABLE -->"


def onnx_table_markdown() -> str:
    """The supported ONNX op types, by first letter, each with the opsets
    where its converter changes (left out when that is opset 1 alone)."""
    _load()
    lines = [ONNX_BEGIN, ""]
    letters: dict[str, list[str]] = {}
    for op_type in sorted(CONVERTERS):
        versions = [since for since, _ in CONVERTERS[op_type]]
        entry = f"`{op_type}`" + ("" if versions == [1] else " " + "/".join(map(str, versions)))
        letters.setdefault(op_type[0], []).append(entry)
    for letter, entries in letters.items():
        lines += textwrap.wrap(f"- **{letter}**: " + ", ".join(entries), 110, subsequent_indent="  ")
    lines += ["", f"{len(CONVERTERS)} op types.", "", ONNX_END]
    return "\n".join(lines)
