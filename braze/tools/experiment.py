"""Schedule experiments: what each kernel of a model is, and how fast one
kernel runs under different schedules.

- ``kernels(model or artifact)``: every kernel with its ops, shapes, the
  schedule it gets (rule and parameters), FLOPs and bytes moved.
- ``schedule_variants(model, kernel, variants)``: that one kernel built alone
  under each schedule (a rule with parameters, ``generic``, or a user's
  function), each checked against the unscheduled kernel on the same random
  inputs (constants: the model's real weights) and timed. The fastest
  correct one can be pinned into a compile (pins.py).

The kernel listing and its counting (FLOPs, bytes) are in listing.py, one
kernel's isolated build and run in isolate.py, pins in pins.py.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import asdict, dataclass, field

from ..errors import BrazeError, CodegenError, ScheduleError, last_line
from ..threads import apply_threads, current_threads
from ..targets import get_target
from .isolate import build_alone, call, compile_alone, explicit_pin, kernel_inputs, max_error, timer
from ..codegen.kernel import Kernel, partition
from .listing import KernelInfo, describe_kernel, fused, kernels, kernels_table, op_flops, params_text
from ..codegen.pins import check_pin, find_kernel, parse_variant
from ..codegen.schedules import plan
from ..codegen.schedules.user import describe

#: a variant whose timed rounds add up to this many ms stops after MIN_ROUNDS
SLOW_MS, MIN_ROUNDS = 2000.0, 3


# --- variants -------------------------------------------------------------------------------------
@dataclass
class Variant:
    label: str
    pins: dict  # {} is the default schedule; see pins.py


@dataclass
class Result:
    label: str
    pins: dict
    schedule: str = ""  # what was built
    schedule_params: dict = field(default_factory=dict)
    ms: float | None = None
    gflops: float | None = None
    gbps: float | None = None
    max_abs: float | None = None
    max_rel: float | None = None
    speedup: float | None = None  # the default's time / this one's
    rounds: int = 0  # timed rounds (fewer than asked for a very slow variant)
    ok: bool = False  # built, numerics within tolerance
    error: str = ""

    def to_dict(self) -> dict:
        data = asdict(self)
        data["pins"] = _json_pin(self.pins)
        return data


def _json_pin(pin: dict) -> dict:
    return {**pin, "function": describe(pin["function"])} if pin.get("function") is not None else dict(pin)


def candidates(kernel: Kernel, target) -> tuple[str, dict, list[dict]]:
    """(rule, its default params, alternative params) for the kernel's heaviest
    anchor: a small grid around the defaults that fits the shapes, nearest
    first. ("", {}, []) when no rule takes the kernel."""
    choices = plan(kernel, target)
    if not choices:
        return "", {}, []
    c = max(choices, key=lambda c: op_flops(kernel.ops[c.index]))
    grid = c.rule.grid(kernel.ops[c.index], target, c.params)
    alts = []
    for p in grid:
        full = {**c.params, **p}
        if full != c.params and full not in alts:
            alts.append(full)
    alts.sort(key=lambda p: (sum(p[k] != c.params[k] for k in p), [abs(p[k] - c.params[k]) for k in sorted(p)]))
    return c.rule.name, c.params, alts


def auto_variants(kernel: Kernel, target, count: int = 5) -> list[Variant]:
    """The default schedule, ``count - 2`` alternative tilings of its rule and
    the generic schedule (fewer when the grid is small or no rule applies)."""
    rule, _, alts = candidates(kernel, target)
    variants = [Variant("default", {})]
    for i, params in enumerate(alts[: max(count - 2, 0)], 1):
        variants.append(Variant(f"alt{i}", {"rule": rule, "params": params}))
    if count >= 2 and rule:
        variants.append(Variant("generic", {"rule": "generic"}))
    return variants


def label(pin: dict) -> str:
    if pin.get("function") is not None:
        return "fn " + describe(pin["function"]).rsplit("/", 1)[-1]
    text = ",".join(f"{k}={v}" for k, v in (pin.get("params") or {}).items())
    return " ".join(filter(None, [pin.get("rule"), text])) or "default"


def as_variant(spec, kernel: Kernel, target) -> Variant:
    """A Variant from a Variant, a pin dict, ``"RULE[:k=v,...]"`` or a schedule function."""
    if isinstance(spec, Variant):
        return Variant(spec.label, check_pin(kernel, target, spec.pins))
    if isinstance(spec, str):
        spec = {} if spec == "default" else parse_variant(spec)
    elif callable(spec):
        spec = {"function": spec}
    pin = check_pin(kernel, target, spec)
    return Variant(label(pin), pin)


# --- the experiment -----------------------------------------------------------------------------
@dataclass
class Experiment:
    kernel: KernelInfo
    threads: int
    repeat: int
    tolerance: float
    results: list[Result]

    @property
    def fastest(self) -> Result | None:
        good = [r for r in self.results if r.ok and r.ms is not None]
        return min(good, key=lambda r: r.ms) if good else None

    def pins(self, result: Result | None = None) -> dict:
        """A pins mapping that builds this kernel with ``result`` (the fastest by default)."""
        result = result or self.fastest
        if result is None:
            raise ScheduleError(f"kernel {self.kernel.name}: no variant built correctly; nothing to pin")
        return {self.kernel.name: dict(result.pins)}

    def to_dict(self) -> dict:
        fastest = self.fastest
        return {"kernel": self.kernel.to_dict(), "threads": self.threads, "repeat": self.repeat,
                "tolerance": self.tolerance, "variants": [r.to_dict() for r in self.results],
                "fastest": fastest.label if fastest else None}

    def table(self) -> str:
        k = self.kernel
        rows = []
        for r in self.results:
            nums = [f"{r.ms:.3f}", f"{r.gflops:.1f}", f"{r.gbps:.2f}"] if r.ms is not None else ["-"] * 3
            status = "ok" if r.ok else ("WRONG: " if r.ms is not None else "FAILED: ") + r.error
            rows.append([r.label, r.schedule or "-", params_text(r.schedule_params) or "-", *nums,
                         f"{r.max_rel:.1e}" if r.max_rel is not None else "-",
                         f"{r.speedup:.2f}" if r.speedup is not None else "-", status])
        head = ["variant", "rule", "params", "ms", "GFLOP/s", "GB/s", "max err", "speedup", "status"]
        widths = [max(len(row[i]) for row in rows + [head]) for i in range(len(head) - 1)]

        def line(row):
            cells = [c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
            return "  ".join(cells + [row[-1]])

        best = self.fastest
        return "\n".join([
            f"kernel {k.name}  [{', '.join(k.ops)}]",
            f"  {k.shapes_text}; {k.flops / 1e6:.1f} MFLOP, {k.bytes / 1e6:.2f} MB moved",
            f"  {self.threads} threads; time: median of {self.repeat} rounds (a variant past "
            f"{SLOW_MS / 1000:g} s in all stops after {MIN_ROUNDS})",
            f"  numerics: max error against the unscheduled kernel, relative to max(1, |ref|); "
            f"tolerance {self.tolerance:g}",
            "", line(head), *map(line, rows), "",
            _fastest_line(best)])


def _fastest_line(best: Result | None) -> str:
    if best is None:
        return "no variant built correctly"
    versus = f"{best.speedup:.2f}x the default" if best.speedup else "the default failed"
    return f"fastest: {best.label} ({best.ms:.3f} ms, {versus})"


def schedule_variants(model, kernel: str, variants=None, *, count: int = 5, level: int = 2, fusion=None,
                      input_shapes=None, target="cpu", threads: int | None = None, repeat: int = 10,
                      tolerance: float = 1e-4, seed: int = 0, progress=None,
                      precision: dict | None = None, layout: str = "blocked") -> Experiment:
    """Build kernel ``kernel`` (a name from ``kernels(model)``, or ``kN``) of
    ``model`` alone under each variant and compare them.

    ``variants``: None for the automatic set (``auto_variants``: the default,
    ``count - 2`` alternative tilings, generic); else a list of pins
    (``{"rule": "gemm", "params": {"tile_m": 4}}``), ``"RULE[:k=v,...]"``
    strings, ``Variant``s or schedule functions ``f(sch, kernel, target)``;
    the default schedule is always compared too (first). ``level``,
    ``fusion`` and ``input_shapes`` must be those of the compile the kernel
    name comes from, and ``precision`` (``{"mode": ...}``) and ``layout`` its
    precision and layout options.

    Returns:
        Experiment: each variant's time, error and build status;
        ``.table()`` prints them, ``.fastest`` is the best that built.

    Raises:
        ScheduleError: an unknown kernel name or rule, or a pin its rule refuses.

    Example::

        print(braze.schedule_variants("model.onnx", "k10").table())
    """
    tgt = cpu_target(target, threads)
    if isinstance(model, (str, os.PathLike)) and os.path.isdir(model):
        raise ScheduleError(f"{model}: braze schedule takes the ONNX model (an artifact holds compiled kernels); "
                            "give the .onnx it was compiled from, with the same --level and fusion options")
    module = fused(model, level, fusion, input_shapes, target, precision, layout)
    k = find_kernel(partition(module.main), kernel)
    if variants is None:
        chosen = auto_variants(k, tgt, count)
    else:
        chosen = [Variant("default", {})]
        for spec in variants:
            v = as_variant(spec, k, tgt)
            if v.pins and all(v.pins != c.pins for c in chosen):
                chosen.append(v)
    return run_variants(module, k, tgt, chosen, threads, repeat, tolerance, seed, progress)


def cpu_target(target, threads: int | None = None):
    tgt = get_target(target, threads)
    if tgt.kind != "llvm":
        raise ScheduleError(f"schedule experiments use the CPU schedule rules; target {tgt.name} is {tgt.kind}")
    from ..targets.isa import missing, requirements

    lacking = missing(requirements(tgt))  # also asks the OS for AMX's tile state where the target uses it
    if lacking:
        raise ScheduleError(f"schedule experiments run the kernels here, and target {tgt.name} needs {lacking}: "
                            "time them on a machine that has it")
    return tgt


def run_variants(module, kernel: Kernel, target, variants: list[Variant], threads: int | None = None,
                 repeat: int = 10, tolerance: float = 1e-4, seed: int = 0, progress=None) -> Experiment:
    say = progress or (lambda message: None)
    apply_threads(threads)
    arrays = kernel_inputs(module, kernel, seed)
    say(f"kernel {kernel.name}: the unscheduled reference")
    try:
        reference = call(compile_alone(kernel, build_alone(kernel, target, None)[0], target), kernel, arrays, {})
    except BrazeError:
        raise
    except Exception as e:  # noqa: BLE001 -- TVM's errors
        raise CodegenError(f"kernel {kernel.name}: the unscheduled kernel does not build ({last_line(e)})") from None
    results, timers = [], []
    for v in variants:
        say(f"building variant {v.label}")
        result, clock = _prepare(kernel, target, v, arrays, reference, tolerance)
        results.append(result)
        if clock is not None:
            timers.append((result, clock, []))
    # rounds interleave the variants, so that a busy moment of the machine
    # slows them all rather than one; a very slow variant stops early
    say(f"timing {len(timers)} variants, {repeat} rounds")
    for _ in range(max(1, repeat)):
        for _, clock, samples in timers:
            if len(samples) < MIN_ROUNDS or sum(samples) < SLOW_MS:
                samples.append(clock())
    info = describe_kernel(kernel, target)
    for result, _, samples in timers:
        ms = statistics.median(samples)
        result.ms, result.rounds = round(ms, 4), len(samples)
        result.gflops = round(info.flops / ms / 1e6, 2)
        result.gbps = round(info.bytes / ms / 1e6, 3)
    base = results[0].ms if results and results[0].ok else None
    for r in results:
        if base and r.ms:
            r.speedup = round(base / r.ms, 3)
    return Experiment(info, current_threads(), repeat, tolerance, results)


def _prepare(kernel: Kernel, target, variant: Variant, arrays, reference, tolerance: float):
    """(Result with its numerics, a function that times one round) for one
    variant; the timer is None when the variant did not build."""
    result = Result(variant.label, dict(variant.pins))
    try:
        func, fallback = build_alone(kernel, target, variant.pins)
        if fallback:
            result.error = fallback
            return result, None
        result.schedule, result.schedule_params = kernel.schedule, dict(kernel.schedule_params)
        if not variant.pins:
            result.pins = explicit_pin(kernel)
        packings = dict(kernel.packings)
        lib = compile_alone(kernel, func, target)
        result.max_abs, result.max_rel = max_error(call(lib, kernel, arrays, packings), reference)
    except Exception as e:  # noqa: BLE001 -- a variant that fails is a finding, not a crash
        result.error = last_line(e)
        return result, None
    result.ok = result.max_rel <= tolerance
    if not result.ok:
        result.error = f"max error {result.max_rel:.2e} above the tolerance {tolerance:g}"
    return result, timer(lib, kernel, arrays, packings)


__all__ = ["Experiment", "KernelInfo", "Result", "Variant", "auto_variants", "candidates", "describe_kernel",
           "kernels", "kernels_table", "run_variants", "schedule_variants"]
