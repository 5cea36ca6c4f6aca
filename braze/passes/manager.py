"""Passes, the pass registry, and pipelines.

A pass is a frozen dataclass registered by name; its fields are its options
and ``run(module)`` returns whether it changed anything::

    @register_pass
    @dataclass(frozen=True)
    class Fuse(Pass):
        name: ClassVar[str] = "fuse"
        level: int = 2
        no_fuse: tuple[str, ...] = ()

The pipeline string ``canonicalize,fuse{level=3 no-fuse=Slice,Concat}`` and
``PassManager([Canonicalize(), Fuse(level=3, no_fuse=("Slice", "Concat"))])``
are the same thing, and ``str()`` of either gives the string back.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import time
import typing
from dataclasses import dataclass
from typing import ClassVar, TextIO

from ..errors import BrazeError, PassError
from ..ir import Module, control_regions, print_module, verify

PASSES: dict[str, type["Pass"]] = {}


@dataclass(frozen=True)
class Pass:
    name: ClassVar[str] = ""
    #: A short title for --print-ir-after-all headers and timing reports.
    title: ClassVar[str] = ""

    def run(self, module: Module) -> bool:
        raise NotImplementedError

    def __str__(self) -> str:
        opts = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value != f.default:
                opts.append(f"{f.name.replace('_', '-')}={_format_option(value)}")
        return self.name + ("{" + " ".join(opts) + "}" if opts else "")


def register_pass(cls: type[Pass]) -> type[Pass]:
    if not cls.name or cls.name in PASSES:
        raise AssertionError(f"pass name {cls.name!r} is empty or taken")
    PASSES[cls.name] = cls
    return cls


def available_passes() -> dict[str, type[Pass]]:
    from . import builtin  # noqa: F401  (registers the built-in passes)

    return dict(sorted(PASSES.items()))


# --- pipeline strings -------------------------------------------------------------------
def _format_option(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(_format_option(v) for v in value)
    text = str(value)
    return f'"{text}"' if re.search(r'[\s{}"]', text) or text == "" else text


def _split_top(text: str, sep: str) -> list[str]:
    """Split on ``sep`` outside braces and quotes."""
    parts, depth, quote, cur = [], 0, False, []
    for ch in text:
        if ch == '"':
            quote = not quote
        elif not quote and ch == "{":
            depth += 1
        elif not quote and ch == "}":
            depth -= 1
        is_sep = ch.isspace() if sep == " " else ch == sep
        if is_sep and depth == 0 and not quote:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if quote or depth:
        raise PassError(f"pipeline '{text}': unbalanced {'quote' if quote else 'braces'}")
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _convert(pass_name: str, field: dataclasses.Field, raw: str):
    kind = typing.get_type_hints(PASSES[pass_name])[field.name]
    raw = raw[1:-1] if len(raw) >= 2 and raw[0] == raw[-1] == '"' else raw
    try:
        if kind is bool:
            if raw.lower() not in ("true", "false", "1", "0", "on", "off"):
                raise ValueError
            return raw.lower() in ("true", "1", "on")
        if kind is int:
            return int(raw)
        if kind is float:
            return float(raw)
        if kind is str:
            return raw
        if typing.get_origin(kind) is tuple:
            return tuple(p.strip() for p in raw.split(",") if p.strip())
    except ValueError:
        pass
    name = getattr(kind, "__name__", str(kind))
    raise PassError(f"pass '{pass_name}': option '{field.name.replace('_', '-')}' expects {name}, got '{raw}'")


def parse_pass(text: str) -> Pass:
    m = re.fullmatch(r"([A-Za-z0-9_\-]+)\s*(?:\{(.*)\})?", text.strip(), flags=re.S)
    if not m:
        raise PassError(f"cannot parse pass '{text}' (expected name or name{{opt=value ...}})")
    passes = available_passes()
    name = m.group(1)
    if name not in passes:
        raise PassError(f"unknown pass '{name}' (available: {', '.join(passes)})")
    cls = passes[name]
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for item in _split_top(m.group(2) or "", " "):
        key, eq, raw = item.partition("=")
        key = key.strip().replace("-", "_")
        if key not in fields:
            known = ", ".join(k.replace("_", "-") for k in fields) or "none"
            raise PassError(f"pass '{name}' has no option '{key.replace('_', '-')}' (options: {known})")
        kwargs[key] = _convert(name, fields[key], raw.strip()) if eq else True
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise PassError(f"pass '{name}': {e}") from None


def run_in_regions(p: Pass, module: Module) -> bool:
    """Run ``p`` on every control-flow region of ``module``, nested ones
    too, each as a module of its own (ir.region_module): passes recurse
    into regions without knowing about them. A region's module works on a
    copy of the blob store; the blobs the pass adds there join the parent's
    (deletions do not: the parent's DCE sees every region)."""
    changed = False
    for _, _, sub in control_regions(module):
        sub.blobs = dict(module.blobs)
        changed |= bool(p.run(sub))
        changed |= run_in_regions(p, sub)
        module.blobs.update({h: d for h, d in sub.blobs.items() if h not in module.blobs})
        sub.blobs = module.blobs
    return changed


# --- the manager ----------------------------------------------------------------------------
class PassManager:
    """Runs passes in order; can verify, time and print the IR after each.

    ``PassManager.parse("canonicalize,cse,fuse{level=3}")`` builds one from
    a pipeline string (docs/passes.md); ``run(module)`` runs it (in every
    control-flow region too) and raises ``PassError`` naming a pass whose
    output does not verify.

    Example::

        pm = braze.PassManager.parse("canonicalize,cse,dce", print_ir_after_all=True)
        pm.run(braze.load_onnx("model.onnx"))
        print(pm.timing_report())
    """

    def __init__(self, passes: list[Pass], verify_each: bool = True, print_ir_after_all: bool = False,
                 out: TextIO | None = None):
        self.passes = list(passes)
        self.verify_each = verify_each
        self.print_ir_after_all = print_ir_after_all
        self.out = out
        self.timings: list[tuple[str, float, bool]] = []  # (pass, seconds, changed)

    @classmethod
    def parse(cls, pipeline: str, **kwargs) -> "PassManager":
        return cls([parse_pass(p) for p in _split_top(pipeline, ",")], **kwargs)

    def __str__(self) -> str:
        return ",".join(str(p) for p in self.passes)

    def run(self, module: Module) -> Module:
        for p in self.passes:
            start = time.perf_counter()
            try:
                changed = bool(p.run(module))
                changed |= run_in_regions(p, module)
            except BrazeError:
                raise
            self.timings.append((str(p), time.perf_counter() - start, changed))
            if self.verify_each:
                try:
                    verify(module)
                except BrazeError as e:
                    raise PassError(f"the IR does not verify after pass '{p}': {e}") from None
            if self.print_ir_after_all:
                title = p.title or type(p).__name__
                out = self.out or sys.stderr
                out.write(f"// -----// IR Dump After {title} ({p.name}) //----- //\n")
                out.write(print_module(module))
                out.write("\n")
        return module

    def timing_report(self) -> str:
        total = sum(t for _, t, _ in self.timings) or 1e-12
        lines = ["  seconds   share  changed  pass"]
        for name, t, changed in self.timings:
            lines.append(f"  {t:7.4f}  {100 * t / total:5.1f}%  {'yes' if changed else 'no':>7}  {name}")
        lines.append(f"  {total:7.4f}  100.0%           total")
        return "\n".join(lines)
