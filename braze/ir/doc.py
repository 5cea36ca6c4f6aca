"""The op reference of docs/ir.md, generated from the registry so the docs
cannot drift from the code (a test compares them)."""

from __future__ import annotations

import textwrap

from .registry import all_ops

BEGIN = "<!-- BEGIN OP TABLE (generated: braze ops --markdown) -->"
END = "<!-- END OP TABLE -->"

#: families of ops with one signature (kind, operands, attributes), listed in a paragraph each rather
#: than a table row
_PLAIN = {("elemwise", ("x",), ""): "**Elementwise**, operand `x`, no attributes",
          ("broadcast", ("lhs", "rhs"), ""): "**Broadcast** (numpy rules), operands `lhs`, `rhs`, no attributes",
          ("reduce", ("x",), "axes: ints, keepdims: bool = True"):
              "**Reductions**, operand `x`, attributes `axes: ints`, `keepdims: bool = True`"}


def _attr(name, spec) -> str:
    if spec.required:
        return f"{name}: {spec.type}"
    return f"{name}: {spec.type} = {spec.default!r}".replace("'", '"')


def _summary(opdef) -> str:
    return " ".join((type(opdef).__doc__ or "").split("\n\n")[0].split())


def _plain_key(opdef):
    key = (opdef.kind.value, tuple(opdef.operands), ", ".join(_attr(k, s) for k, s in opdef.attrs.items()))
    return key if key in _PLAIN else None


def op_table_markdown() -> str:
    ops = all_ops()
    lines = [BEGIN, ""]
    for key, title in _PLAIN.items():
        entries = [f"`{name}`: {_summary(op).rstrip('.').replace(', broadcast', '')}"
                   for name, op in ops.items() if _plain_key(op) == key]
        lines += textwrap.wrap(f"{title}: " + " · ".join(entries) + ".", 110, break_on_hyphens=False) + [""]
    lines += ["| op | kind | operands | attributes | semantics |", "|---|---|---|---|---|"]
    for name, opdef in ops.items():
        if _plain_key(opdef):
            continue
        attrs = "<br>".join(_attr(k, s) for k, s in opdef.attrs.items())
        operands = ", ".join(opdef.operands)
        lines.append(f"| `{name}` | {opdef.kind.value} | {operands} | {attrs} | {_summary(opdef).replace('|', '∣')} |")
    lines += ["", END]
    return "\n".join(lines)
