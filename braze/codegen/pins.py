"""Pinned schedules: which schedule a kernel is built with, chosen by a user.

A pin is ``{"rule": NAME, "params": {...}}`` (a rule of
``schedules.RULES`` or ``"generic"``, with parameters overriding the
rule's defaults) or ``{"function": "FILE.py:FUNC"}`` (a user's schedule
function, schedules/user.py). A *pins* mapping is kernel name -> pin; a
pins file is that mapping as JSON::

    {"k10_node_MatMul_109_gelu_epilogue": {"rule": "gemm", "params": {"tile_m": 4, "tile_n": 32}}}

On the command line one pin is ``NAME=RULE[:k=v,k=v]`` or
``NAME=FILE.py:FUNC`` (``--schedule``),
and a kernel may be named by its index alone (``k10``). Every pin is
checked against its kernel before anything is built: an unknown kernel or
rule, a rule that does not fit, an unknown parameter or a value its rule's
declaration (``Rule.params``) does not allow is a ``ScheduleError`` that
says what would fit.
"""

from __future__ import annotations

import difflib
import json
import os
import re

from ..errors import ScheduleError
from .kernel import Kernel, partition
from .schedules import RULES, plan
from .schedules.user import describe, load_function

PIN_KEYS = ("rule", "params", "function")


# --- text forms ----------------------------------------------------------------------------
def parse_params(items) -> dict:
    """``["tile_m=8", "tile_n=32"]`` or ``"tile_m=8,tile_n=32"`` -> ``{"tile_m": 8, "tile_n": 32}``."""
    if isinstance(items, str):
        items = [items]
    params = {}
    for item in items or []:
        for part in filter(None, (p.strip() for p in item.split(","))):
            key, eq, value = part.partition("=")
            if not eq or not key.strip() or not value.strip():
                raise ScheduleError(f"schedule parameter '{part}': expected NAME=VALUE, e.g. tile_m=8")
            try:
                params[key.strip()] = int(value)
            except ValueError:
                raise ScheduleError(f"schedule parameter '{part}': the value must be an integer") from None
    return params


def parse_variant(text: str) -> dict:
    """``"gemm:tile_m=4,tile_n=32"``, ``"gemm"``, ``"generic"`` or a schedule
    function ``"FILE.py:FUNC"`` -> a pin."""
    if re.fullmatch(r".+\.py:\w+", text.strip()):
        return {"function": text.strip()}
    rule, _, params = text.strip().partition(":")
    if not rule:
        raise ScheduleError(f"schedule '{text}': expected RULE[:k=v,k=v], e.g. gemm:tile_m=4,tile_n=32")
    pin = {"rule": rule}
    if params:
        pin["params"] = parse_params(params)
    return pin


def parse_pin(text: str) -> tuple[str, dict]:
    """``"k10=gemm:tile_m=4"`` -> ``("k10", {"rule": "gemm", "params": {"tile_m": 4}})``."""
    name, eq, spec = text.partition("=")
    if not eq or not name.strip() or not spec.strip():
        raise ScheduleError(f"--schedule '{text}': expected KERNEL=RULE[:k=v,k=v], "
                            "e.g. k10=gemm:tile_m=4,tile_n=32 (`braze kernels` lists the kernels)")
    return name.strip(), parse_variant(spec)


def read_pins(path: str) -> dict:
    """A pins file: JSON, kernel name -> pin."""
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        raise ScheduleError(f"pins file {path}: no such file") from None
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise ScheduleError(f"pins file {path}: not readable JSON ({e})") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ScheduleError(f"pins file {path}: expected an object of kernel name -> "
                            '{"rule": NAME, "params": {...}}')
    return data


def write_pins(path: str, pins: dict) -> None:
    """A pins file (written to PATH.tmp, then renamed)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(record(pins), f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def record(pins: dict) -> dict:
    """Pins as JSON data (the manifest's ``schedules``): a function is named."""
    out = {}
    for name, pin in (pins or {}).items():
        pin = dict(pin)
        if pin.get("function") is not None:
            pin["function"] = describe(pin["function"])
        out[name] = pin
    return out


# --- checking pins against kernels ---------------------------------------------------------------
def find_kernel(kernels: list[Kernel], name: str) -> Kernel:
    """The kernel called ``name``, or ``kN`` for the N-th kernel."""
    for k in kernels:
        if k.name == name:
            return k
    m = re.fullmatch(r"k(\d+)", name)
    if m and int(m.group(1)) < len(kernels):
        return kernels[int(m.group(1))]
    close = difflib.get_close_matches(name, [k.name for k in kernels], n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ScheduleError(f"no kernel named '{name}' ({len(kernels)} kernels, k0..k{len(kernels) - 1}; "
                        f"`braze kernels MODEL` lists them at the same level and fusion options){hint}")


def rules_for(kernel: Kernel, target) -> list[str]:
    """The rules that fit this kernel (besides ``generic``)."""
    return sorted(name for name in RULES if plan(kernel, target, {"rule": name}))


def check_pin(kernel: Kernel, target, pin) -> dict:
    """``pin`` checked against ``kernel``: a clean copy, or a ScheduleError."""
    where = f"kernel {kernel.name}"
    if not isinstance(pin, dict) or set(pin) - set(PIN_KEYS):
        extra = sorted(set(pin) - set(PIN_KEYS)) if isinstance(pin, dict) else pin
        raise ScheduleError(f"{where}: a pin has the keys rule, params, function; got {extra!r}")
    if pin.get("function") is not None:
        if pin.get("rule") is not None or pin.get("params"):
            raise ScheduleError(f"{where}: a schedule function takes no rule or params")
        load_function(pin["function"])
        return {"function": pin["function"]}
    rule, params = pin.get("rule"), dict(pin.get("params") or {})
    if rule is not None and not isinstance(rule, str):
        raise ScheduleError(f"{where}: rule must be a name, got {rule!r}")
    if rule is not None and rule != "generic" and rule not in RULES:
        raise ScheduleError(f"{where}: unknown schedule rule '{rule}' "
                            f"(rules: generic, {', '.join(sorted(RULES))}; here: {_fits(kernel, target)})")
    if rule == "generic":
        if params:
            raise ScheduleError(f"{where}: the generic schedule takes no parameters (got {', '.join(params)})")
        return {"rule": "generic"}
    choices = plan(kernel, target, {"rule": rule} if rule else None)
    if rule and not choices:
        raise ScheduleError(f"{where}: rule '{rule}' does not apply to its ops ({', '.join(kernel.op_types)}); "
                            f"rules that do: {_fits(kernel, target)}")
    known = {key for c in choices for key in c.params}
    for key in params:
        if key not in known:
            names = "+".join(sorted({c.rule.name for c in choices})) or "generic"
            what = f"rule {names} takes {', '.join(sorted(known))}" if known else \
                f"its schedule ({names}) takes no parameters"
            raise ScheduleError(f"{where}: unknown schedule parameter '{key}' ({what})")
    try:  # each value against its rule's declaration, and together on the op
        plan(kernel, target, {"rule": rule, "params": params} if rule else {"params": params})
    except ScheduleError as e:
        raise ScheduleError(f"{where}: {e}") from None
    out = {} if rule is None else {"rule": rule}
    if params:
        out["params"] = params
    return out


def _fits(kernel: Kernel, target) -> str:
    return ", ".join(["generic", *rules_for(kernel, target)])


def check_schedules(module, target, schedules: dict) -> dict:
    """``schedules`` (kernel name or ``kN`` -> pin) checked against the
    module's kernels; keys become the kernels' full names."""
    if not schedules:
        return {}
    if getattr(target, "kind", "llvm") != "llvm":
        raise ScheduleError(f"pinned schedules choose among the CPU schedule rules; target {target.name} "
                            f"({target.kind}) builds its kernels otherwise: drop --schedule or use a CPU target")
    kernels = partition(module.main)
    out = {}
    for name, pin in schedules.items():
        kernel = find_kernel(kernels, name)
        out[kernel.name] = check_pin(kernel, target, pin)
    return out
