"""One kernel built and run alone, outside its model: what a schedule
experiment (experiment.py) does with each variant.

The kernel's PrimFunc is compiled as a module of its own and called
directly: its inputs are the model's constants (packed as the schedule
wants them) and random tensors for the rest; its outputs are fresh
buffers. A schedule rule that fails is caught here (the warning a compile
would give when it falls back to the generic schedule) and reported.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..errors import ScheduleError
from ..ir import const_array
from ..ir.types import DTYPES
from ..codegen.kernel import TVM_DTYPES, Kernel
from ..codegen.schedules import RULES, ScheduleWarning

#: a timed round lasts at least this long (a short kernel runs several times)
MIN_REPEAT_MS = 20


def build_alone(kernel: Kernel, target, pins) -> tuple[object, str]:
    """(PrimFunc, why the schedule fell back to generic or ""); pins None: unscheduled."""
    from ..codegen.build import build_kernel

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ScheduleWarning)
        func = build_kernel(kernel, target, pins, scheduled=pins is not None)
    fell = [str(w.message) for w in caught if issubclass(w.category, ScheduleWarning)]
    if not fell:
        return func, ""
    why = fell[0].split(": ", 1)[-1].removesuffix("; using the generic schedule")
    return func, why + " (a compile would use the generic schedule)"


def explicit_pin(kernel: Kernel) -> dict:
    """The pin that rebuilds the kernel as just built by default."""
    if kernel.schedule == "generic":
        return {"rule": "generic"}
    params = list(kernel.schedule_params.values())
    if kernel.schedule in RULES and params and all(p == params[0] for p in params):
        return {"rule": kernel.schedule, "params": dict(params[0])}
    return {}


def compile_alone(kernel: Kernel, func, target):
    import tvm

    from ..codegen.tvm_target import tvm_target

    return tvm.compile(tvm.IRModule({kernel.name: func}), target=tvm_target(target)).jit()


def kernel_inputs(module, kernel: Kernel, seed: int) -> list[np.ndarray]:
    """One array per kernel param: the constant's data, else random (N(0,1)
    floats, integers and booleans in {0, 1})."""
    rng = np.random.default_rng(seed)
    arrays = []
    for param, arg in zip(kernel.params, kernel.args):
        dtype, shape = param.type.np_dtype, param.type.shape
        if arg.owner is not None and arg.owner.name == "const":
            data = const_array(arg.owner, module)
            if data is None:
                raise ScheduleError(f"kernel {kernel.name}: a constant operand has no data (weights not loaded)")
            arrays.append(np.ascontiguousarray(np.asarray(data, dtype)).reshape(shape))
        elif dtype.kind == "f":
            arrays.append(rng.standard_normal(shape).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(rng.random(shape) > 0.5)
        else:
            arrays.append(rng.integers(0, 2, shape).astype(dtype))
    return arrays


def kernel_args(kernel: Kernel, arrays, packings) -> list:
    """The kernel's call arguments: its inputs (constants packed as
    ``packings`` says) as TVM tensors, then fresh output buffers."""
    import tvm

    def packed(i: int, a: np.ndarray):
        # in the dtype the build stores it in (codegen/assemble.py): a packing
        # may compute in float64 (Winograd's transformed weights)
        stored = packings[i].dtype or kernel.params[i].type.dtype
        return tvm.runtime.tensor(np.ascontiguousarray(packings[i].pack(a)).astype(DTYPES[stored]))

    ins = [packed(i, a) if i in packings else tvm.runtime.tensor(a) for i, a in enumerate(arrays)]
    outs = [tvm.runtime.empty(r.type.shape, TVM_DTYPES[r.type.dtype]) for r in kernel.results]
    return ins + outs


def call(lib, kernel: Kernel, arrays, packings) -> list[np.ndarray]:
    args = kernel_args(kernel, arrays, packings)
    lib[kernel.name](*args)
    return [a.numpy() for a in args[len(arrays):]]


def timer(lib, kernel: Kernel, arrays, packings):
    """A function giving the milliseconds of one call (averaged over as many
    calls as fill MIN_REPEAT_MS)."""
    import tvm

    args = kernel_args(kernel, arrays, packings)
    evaluate = lib.time_evaluator(kernel.name, tvm.cpu(), number=1, repeat=1, min_repeat_ms=MIN_REPEAT_MS)
    lib[kernel.name](*args)  # warm-up
    return lambda: evaluate(*args).mean * 1e3


def max_error(got: list[np.ndarray], ref: list[np.ndarray]) -> tuple[float, float]:
    """Max absolute error and that error relative to max(1, |ref|), over all
    outputs; NaN where the reference has NaN counts as equal."""
    worst_abs, worst_rel = 0.0, 0.0
    for g, e in zip(got, ref):
        g, e = g.astype(np.float64), e.astype(np.float64)
        same = (g == e) | (np.isnan(g) & np.isnan(e))
        diff = np.where(same, 0.0, np.nan_to_num(np.abs(g - e), nan=np.inf))
        finite = np.abs(e[np.isfinite(e)])
        scale = max(1.0, float(finite.max()) if finite.size else 1.0)
        worst = float(diff.max()) if diff.size else 0.0
        worst_abs, worst_rel = max(worst_abs, worst), max(worst_rel, worst / scale)
    return worst_abs, worst_rel


