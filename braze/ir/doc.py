"""The op reference table of docs/ir.md, generated from the registry so the
docs cannot drift from the code (a test compares them)."""

from __future__ import annotations

from .registry import all_ops

BEGIN = "<!-- BEGIN OP TABLE (generated: braze ops --markdown) -->"
END = "<!-- END OP TABLE -->"


def _attr(name, spec) -> str:
    if spec.required:
        return f"{name}: {spec.type}"
    return f"{name}: {spec.type} = {spec.default!r}".replace("'", '"')


def op_table_markdown() -> str:
    lines = [BEGIN, "", "| op | kind | operands | attributes | semantics |", "|---|---|---|---|---|"]
    for name, opdef in all_ops().items():
        doc = " ".join((type(opdef).__doc__ or "").split("\n\n")[0].split())
        attrs = "<br>".join(_attr(k, s) for k, s in opdef.attrs.items())
        operands = ", ".join(opdef.operands)
        lines.append(f"| `{name}` | {opdef.kind.value} | {operands} | {attrs} | {doc.replace('|', '∣')} |")
    lines += ["", END]
    return "\n".join(lines)
