"""The schedule rules' parameters in words, from their declarations
(``Rule.params``): ``braze schedule --rule NAME`` prints one rule's, and
docs/schedules.md holds the table of all of them (a test compares it)."""

from __future__ import annotations

from .rule import RULES, Param, Rule

BEGIN = "<!-- BEGIN RULE TABLE (generated: braze.codegen.schedules.doc.rule_table_markdown) -->"
END = "<!-- END RULE TABLE -->"


def _grid(p: Param) -> str:
    return ", ".join(map(str, p.grid)) or "-"


def params_text(rule: Rule) -> str:
    """A rule's parameters as `braze schedule --rule NAME` prints them."""
    lines = [f"{rule.name} ({', '.join(rule.ops)}): {rule.doc.strip()}"]
    if rule.tiles is not None:
        lines.append(f"  grid: {' '.join((rule.tiles.__doc__ or 'its register tiles').split())} Then each "
                     "parameter alone, to the values of its own grid.")
    if not rule.params:
        return "\n".join(lines + ["  no parameters"])
    for p in rule.params:
        flags = [f for f, on in (("0 turns it off", p.off), ("fixes the packed layout", p.packs)) if on]
        lines += [f"  {p.name}: {p.meaning}",
                  f"    default: {p.default}",
                  f"    values:  {p.allowed()}",
                  f"    grid:    {_grid(p)}"]
        if flags:
            lines.append(f"    ({'; '.join(flags)})")
    return "\n".join(lines)


def rule_table_markdown() -> str:
    """One row per rule and parameter, rules by name, between the BEGIN and
    END markers; parameters a rule shares with one described above (the
    same declaration) are one row that names it."""
    lines = [BEGIN, "", "| rule | ops | parameter | meaning | default | values | grid |",
             "|---|---|---|---|---|---|---|"]
    described: dict[Param, str] = {}
    for name in sorted(RULES):
        rule = RULES[name]
        own = [p for p in rule.params if p not in described]
        shared = [p for p in rule.params if p in described]
        rows = [[f"`{p.name}`" + (" (packs)" if p.packs else ""), p.meaning, str(p.default), p.allowed(), _grid(p)]
                for p in own]
        for source in dict.fromkeys(described[p] for p in shared):
            names = ", ".join(f"`{p.name}`" for p in shared if described[p] == source)
            rows.append([names, f"as `{source}`'s", "", "", ""])
        for i, cells in enumerate(rows or [["-", "no parameters", "", "", ""]]):
            head = [f"`{name}`", ", ".join(f"`{op}`" for op in rule.ops)] if i == 0 else ["", ""]
            lines.append("| " + " | ".join(c.replace("|", "∣") for c in head + cells) + " |")
        described.update((p, name) for p in own)
    lines += ["", END]
    return "\n".join(lines)
