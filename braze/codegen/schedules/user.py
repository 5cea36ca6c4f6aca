"""A user's own schedule: a Python function ``FUNC(sch, kernel, target)``
that schedules an ``s_tir.Schedule`` of the kernel's plain PrimFunc.

The function receives the kernel's TE graph as one PrimFunc (one block per
stage, nothing inlined, weights in their original layout), a braze
``Kernel`` (its ops, shapes, name) and the ``Target`` (``vector_bits``,
``num_cores``). It changes ``sch`` in place (or returns another Schedule).
The helpers the built-in rules use are in ``schedules.tir`` (``inline``,
``anchors``), ``schedules.generic`` (``schedule_generic``) and
``schedules.machine`` (``lanes`` and the rest of the machine model).

A pin names it as ``"FILE.py:FUNC"`` (``braze schedule --fn``, a pins
file's ``"function"``) or, from Python, as the function itself.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Callable

from tvm import s_tir, te

from ...errors import ScheduleError
from ..kernel import Kernel, compute


def load_function(spec) -> Callable:
    """The function a pin names: a callable as is, or ``"FILE.py:FUNC"``."""
    if callable(spec):
        return spec
    if not isinstance(spec, str) or ":" not in spec:
        raise ScheduleError(f"schedule function {spec}: expected FILE.py:FUNC, e.g. my_sched.py:schedule")
    path, name = spec.rsplit(":", 1)
    if not os.path.isfile(path):
        raise ScheduleError(f"schedule function {spec}: no such file {path}")
    module_name = "braze_user_schedule_" + "".join(c if c.isalnum() else "_" for c in os.path.abspath(path))
    loader = importlib.util.spec_from_file_location(module_name, path)
    if loader is None:
        raise ScheduleError(f"schedule function {spec}: {path} is not a Python file")
    module = importlib.util.module_from_spec(loader)
    try:
        loader.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 -- whatever the user's file raises on import
        raise ScheduleError(f"schedule function {spec}: importing {path} failed "
                            f"({type(e).__name__}: {e})") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise ScheduleError(f"schedule function {spec}: {path} has no function '{name}' "
                            f"(it defines: {', '.join(found) or 'nothing callable'})")
    return fn


def describe(spec) -> str:
    """How a pin's function is named in reports and manifests."""
    if isinstance(spec, str):
        return spec
    return f"{getattr(spec, '__module__', '?')}.{getattr(spec, '__qualname__', repr(spec))}"


def schedule_with(kernel: Kernel, target, spec):
    """The kernel's PrimFunc scheduled by the user's function. Sets
    ``kernel.schedule`` ("function") and ``kernel.schedule_params``."""
    fn = load_function(spec)
    kernel.plain_layouts()
    placeholders, outputs = compute(kernel)
    sch = s_tir.Schedule(te.create_prim_func(placeholders + outputs))
    result = fn(sch, kernel, target)
    if isinstance(result, s_tir.Schedule):
        sch = result
    kernel.schedule, kernel.schedule_params = "function", {"function": describe(spec)}
    return sch.mod["main"].with_attr("global_symbol", kernel.name)
