"""CPU schedule rules: how each kernel's loops are tiled, vectorized and
spread over cores.

``schedule_kernel`` turns a kernel into a scheduled PrimFunc: it picks a rule
for each anchor op (the matmul, the conv), lets the rules pack their constant
operands, builds the TE graph, inlines the elementwise stages, applies the
rules and gives every block left over the generic schedule. A rule that
fails on a kernel is reported and the kernel falls back to the generic
schedule: a schedule is never a reason for a build to fail.

One file per rule (rule.py's ``PRIORITY`` names each rule's module and
orders the rules; importing this package imports them): flash.py
(attention; its TIR in flash_kernel.py), gemm.py, amx.py, dpbf16.py,
vnni.py (vnni and pmaddwd: 8-bit integer matmuls; their intrinsics in
intrinsics_int8.py), amx_int8.py (8-bit matmuls on AMX tiles), conv.py
(conv2d; chain.py computes a pointwise conv inside the depthwise conv
that reads it), blocked.py, vnni_conv.py (vnni_conv and pmaddwd_conv:
8-bit blocked convs; intrinsics_conv8.py), pointwise.py, depthwise.py,
winograd.py. rule.py holds the rule type, its parameters' declaration and
the registry; machine.py the machine model; intrinsics.py the float
tensor intrinsics; tir.py the TIR helpers; generic.py the schedule of
everything else; user.py runs a user's own schedule function.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from tvm import s_tir, te

from ...errors import BrazeError, ScheduleError, last_line
from ... import interrupts
from ..kernel import Kernel, compute
from .generic import attach_to_consumers, schedule_generic, schedule_rows
from .rule import RULES, Param, Rule, candidates, load
from .tir import Schedule, anchors, inline
from .user import describe, schedule_with

__all__ = ["RULES", "Rule", "Param", "Choice", "plan", "schedule_kernel", "ScheduleWarning", "check_params"]

load()


class ScheduleWarning(UserWarning):
    """A rule could not schedule a kernel; it got the generic schedule."""


@dataclass
class Choice:
    index: int  # the anchor op's index in kernel.ops
    rule: Rule
    params: dict  # the rule's defaults for the op, with the pinned values

    @property
    def full(self) -> dict:
        """Every declared parameter: what the rule's functions read."""
        return self.rule.complete(self.params)


def check_params(rule: Rule, op, target, params: dict) -> None:
    """A ScheduleError unless each of ``params`` that ``rule`` declares has
    a value it allows, and the values go together on ``op``. (A kernel's
    pinned params go to each of its anchors: those another anchor's rule
    takes are not this one's to check; ``pins.check_pin`` rejects those
    that no rule of the kernel takes.)"""
    for key, value in params.items():
        p = rule.param(key)
        if p is not None and not p.allows(value):
            raise ScheduleError(f"{rule.name}'s {key} takes {p.allowed()}, got {value!r} ({p.meaning})")
    reason = rule.check(op, target, rule.complete(params)) if rule.check is not None else None
    if reason:
        raise ScheduleError(f"{rule.name}: {reason}")


def plan(kernel: Kernel, target, pins: dict | None = None) -> list[Choice]:
    """The rule (and parameters) for each anchor op of ``kernel``.

    ``pins`` overrides the choice: ``{"rule": NAME, "params": {...}}``; rule
    ``"generic"`` means no rule at all; ``{"function": F}`` is a user's
    schedule function (schedules/user.py), which takes no rule."""
    pins = pins or {}
    wanted = pins.get("rule")
    if wanted is not None and wanted != "generic" and wanted not in RULES:
        raise ScheduleError(f"unknown schedule rule '{wanted}' (rules: generic, {', '.join(sorted(RULES))})")
    choices = []
    if wanted == "generic" or pins.get("function") is not None:
        return choices
    for index, op in enumerate(kernel.ops):
        for rule in candidates(op, kernel, target, wanted):
            params = rule.defaults(op, kernel, target)
            if params is None:
                continue
            params = {**params, **pins.get("params", {})}
            if pins.get("params"):
                check_params(rule, op, target, params)
            choices.append(Choice(index, rule, params))
            break
    return choices


def _describe(choices: list[Choice]) -> str:
    names = list(dict.fromkeys(c.rule.name for c in choices))
    return "+".join(names) if names else "generic"


def schedule_kernel(kernel: Kernel, target, pins: dict | None = None):
    """The kernel's scheduled PrimFunc. Sets ``kernel.schedule``,
    ``kernel.schedule_params`` and ``kernel.packings``."""
    choices = plan(kernel, target, pins)
    function = (pins or {}).get("function")
    try:
        if function is not None:
            return schedule_with(kernel, target, function)
        return _schedule(kernel, target, choices)
    except BrazeError:
        raise
    except Exception as e:  # noqa: BLE001 -- TVM's ScheduleError and friends: fall back, say so
        interrupts.check()
        if not choices and function is None:
            raise
        reason = last_line(e)
        if function is None and any(c.full.get("chain") for c in choices):
            # a pointwise conv computed inside its depthwise conv (chain.py): each on its own
            warnings.warn(f"kernel {kernel.name}: rule {_describe(choices)} could not chain its convs ({reason}); "
                          "scheduling them one after the other", ScheduleWarning, stacklevel=2)
            try:
                return _schedule(kernel, target, [Choice(c.index, c.rule, {**c.params, "chain": 0}) for c in choices])
            except BrazeError:
                raise
            except Exception as again:  # noqa: BLE001 -- as below
                interrupts.check()
                reason = last_line(again)
        what = f"rule {_describe(choices)}" if function is None else f"function {describe(function)}"
        warnings.warn(f"kernel {kernel.name}: {what} failed ({reason}); "
                      "using the generic schedule", ScheduleWarning, stacklevel=2)
        return _schedule(kernel, target, [])


def _schedule(kernel: Kernel, target, choices: list[Choice]):
    kernel.plain_layouts()
    built = [c for c in choices if c.rule.build is not None]
    if built:  # the rule writes the kernel's PrimFunc itself (a kernel of that op alone)
        c = built[0]
        func = c.rule.build(kernel.ops[c.index], kernel, target, c.full)
        kernel.schedule = c.rule.name
        kernel.schedule_params = {kernel.ops[c.index].name + f"#{c.index}": c.params}
        return func.with_attr("global_symbol", kernel.name)
    kernel.stage_16bit = {id(kernel.ops[c.index].operands[j]) for c in choices
                          for j in c.rule.widened(kernel.ops[c.index], kernel) if j < len(kernel.ops[c.index].operands)}
    for c in choices:
        kernel.packings.update(c.rule.packings(kernel.ops[c.index], kernel, target, c.full))
        if c.rule.lower is not None:
            kernel.lowerings[c.index] = c.rule.lower(kernel.ops[c.index], c.full)
    placeholders, outputs = compute(kernel)
    func = te.create_prim_func(placeholders + outputs)
    sch = Schedule(func)
    try:
        sch.get_sblock("root")
    except Exception:  # noqa: BLE001 -- no block structure (an extern call such as TOPI's sort): as is
        kernel.plain_layouts()
        kernel.schedule, kernel.schedule_params = "extern", {}
        return te.create_prim_func(placeholders + outputs).with_attr("global_symbol", kernel.name)
    blocks = anchors(sch)
    chosen = {c.index: c for c in choices}
    for index, c in chosen.items():  # before inlining: e.g. padding the iteration space
        if index in blocks and c.rule.prepare is not None:
            c.rule.prepare(sch, blocks[index], kernel.ops[index], target, c.full)
    inline(sch, [blocks[i] for i in chosen if i in blocks])
    done: set[str] = set()
    for index, c in chosen.items():
        if index in blocks:
            done |= c.rule.apply(sch, blocks[index], kernel.ops[index], target, c.full)
    rows = not chosen and schedule_rows(sch, target)
    for block in [] if rows else sch.get_child_blocks(sch.get_sblock("root")):
        if sch.get(block).name_hint not in done:
            try:
                schedule_generic(sch, block, target)
            except s_tir.ScheduleError:
                pass  # a primitive refused: the block keeps its plain loops
    attach_to_consumers(sch)
    kernel.schedule = _describe(choices)
    kernel.schedule_params = {kernel.ops[c.index].name + f"#{c.index}": c.params for c in choices}
    return sch.mod["main"].with_attr("global_symbol", kernel.name)
