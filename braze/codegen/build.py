"""IR module -> kernels -> Relax module -> one TVM executable."""

from __future__ import annotations

import warnings

import tvm

from ..errors import BrazeError, CodegenError, last_line
from ..ir import Module
from ..targets import Target
from .. import interrupts
from .assemble import assemble_functions, lowering_pipeline
from .compiled import Compiled, build_functions, distinct
from .gears import agree_packings
from .kernel import Kernel, primfunc
from .schedules import ScheduleWarning, schedule_kernel
from .tvm_target import tvm_target


def build_kernel(kernel: Kernel, target: Target, pins: dict | None = None, scheduled: bool = True,
                 tuned=None):
    """One kernel's PrimFunc, scheduled by braze's rules (``pins`` overrides
    the rule, see schedules.plan); a CodegenError naming the kernel if TVM
    refuses. ``tuned`` (a tuning.TuningDatabase) gives an unpinned kernel
    its tuned schedule when the database has a record for it."""
    try:
        if not scheduled:
            kernel.plain_layouts()
            kernel.schedule = "none"
            return primfunc(kernel)
        if tuned is not None and not pins:
            func = tuned.schedule(kernel, target)
            if func is not None:
                return func
        return schedule_kernel(kernel, target, pins)
    except BrazeError:
        raise
    except Exception as e:  # TVM raises many types; all mean "this kernel cannot be built"
        interrupts.check()
        raise CodegenError(f"kernel {kernel.name} ({', '.join(kernel.nodes)}): {last_line(e)}") from None


def build(module: Module, target: Target, on_group_failure=None, schedules: dict | None = None,
          tuning_db=None) -> Compiled:
    """Build every kernel and the executable. When a fused group's kernel
    cannot be built and ``on_group_failure(kernel, error)`` is given, it is
    called (to split the group back into single ops) and the build goes on;
    otherwise the CodegenError propagates. ``schedules`` pins a kernel's
    schedule: kernel name -> ``{"rule": NAME, "params": {...}}``; ``tuning_db``
    (a tuning.TuningDatabase) gives the kernels it has records for their
    tuned schedules. Ctrl-C stays a KeyboardInterrupt (braze/interrupts.py)."""
    return build_gears([("main", module, on_group_failure)], target, schedules, tuning_db)


def build_gears(gears: list[tuple[str, Module, object]], target: Target, schedules: dict | None = None,
                tuning_db=None, progress=None) -> Compiled:
    """``build`` for several modules, one Relax function each: ``gears`` is
    ``[(function name, module, on_group_failure), ...]``. Kernels identical
    between gears are built and stored once, and so are the weights
    (compiled.build_functions, assemble.assemble_functions). ``progress``
    follows the kernels as they are built (compiled.build_functions)."""
    with interrupts.watch():
        return _build(gears, target, schedules, tuning_db, progress)


def _build(gears, target: Target, schedules: dict | None, tuning_db, progress=None) -> Compiled:
    if target.kind == "cuda":  # GPU kernels: dlight's schedules and nvcc (gpu.py); not the CPU rules
        from . import gpu

        return gpu.build(gears, target, progress)
    schedules = schedules or {}
    # gears agree on packings; control-flow regions (functions of their own) keep theirs
    geared = [i for i, (_, m, _) in enumerate(gears) if m.main.body.parent is None]
    agreed = [{} for _ in gears]
    if len(geared) > 1:
        for i, pins in zip(geared, agree_packings([gears[i][1] for i in geared], target, schedules)):
            agreed[i] = pins
    functions, primfuncs = build_functions(
        gears, lambda k, gear: build_kernel(k, target, agreed[gear].get(k.name, schedules.get(k.name)),
                                            tuned=tuning_db), progress)
    kernels = distinct(functions)
    tgt = tvm_target(target)

    def relax_module():
        return assemble_functions([(name, module, functions[name]) for name, module, _ in gears], primfuncs)

    try:
        executable = tvm.compile(relax_module(), target=tgt, relax_pipeline=lowering_pipeline(tgt))
    except Exception as e:  # noqa: BLE001 -- find the kernels TVM cannot lower, build them unscheduled
        interrupts.check()
        if not _unschedule_failures(kernels, primfuncs, target, tgt):
            raise CodegenError(f"TVM failed to compile the model: {last_line(e)}") from None
        try:
            executable = tvm.compile(relax_module(), target=tgt, relax_pipeline=lowering_pipeline(tgt))
        except Exception as e2:  # noqa: BLE001
            interrupts.check()
            raise CodegenError(f"TVM failed to compile the model: {last_line(e2)}") from None
    return Compiled(executable, kernels, target, {n: [k.name for k in ks] for n, ks in functions.items()})


def _unschedule_failures(kernels: list[Kernel], primfuncs: dict, target: Target, tgt) -> bool:
    """Compile each scheduled kernel alone; those TVM's code generator
    rejects get the unscheduled PrimFunc instead (with a warning). True if
    any was replaced."""
    replaced = False
    for k in kernels:
        if k.schedule in ("none", ""):
            continue
        try:
            tvm.compile(tvm.IRModule({k.name: primfuncs[k.name]}), target=tgt)
        except Exception as e:  # noqa: BLE001
            interrupts.check()
            warnings.warn(f"kernel {k.name}: scheduled code did not compile ({last_line(e)}); "
                          "using the unscheduled kernel", ScheduleWarning, stacklevel=3)
            primfuncs[k.name] = build_kernel(k, target, scheduled=False)
            replaced = True
    return replaced
