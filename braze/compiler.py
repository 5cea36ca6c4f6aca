"""``braze.compile``: ONNX model -> Artifact, the steps in order."""

from __future__ import annotations

import dataclasses
import os
import time

from .ir import print_module
from .passes import PassManager
from .runtime import cache as runtime_cache
from .runtime.artifact import FORMAT, Artifact, tvm_version
from .targets import get_target
from .targets.isa import requirements
from .version import __version__

#: What every compile runs before fusion and codegen.
PREPARE = "canonicalize,cse,dce"
def codegen_fingerprint() -> str:
    """A digest of braze's code generator sources (lowerings, schedules):
    the compile cache's entries stop matching when the generated code would
    change for the same IR."""
    import hashlib
    import pathlib

    root = pathlib.Path(__file__).parent / "codegen"
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def compile(model, target="cpu", level: int = 2, fusion=None, input_shapes=None, threads: int | None = None,
            progress=None, cache_dir: str | None = None, schedules: dict | None = None,
            tuning_db: str | None = None, **controls) -> Artifact:
    """Compile an ONNX model (path, bytes or ModelProto) into an Artifact.

    ``level`` is the fusion level (0: one kernel per op, default 2); ``fusion`` the other
    fusion controls (a ``FusionOptions`` or a dict of its fields: no_fuse,
    only_fuse, skip_nodes, scope, switch, rules, max_group_size, ...);
    ``input_shapes`` binds dynamic input dimensions; ``threads`` the CPU
    threads to run with. ``progress(message)`` is called at each step. With
    ``cache_dir`` (or ``BRAZE_CACHE_DIR``) an identical earlier compile is reused.
    ``schedules`` pins kernels' schedules: kernel name -> ``{"rule": NAME,
    "params": {...}}`` (see ``braze kernels`` for the names). ``tuning_db``
    is a folder written by ``braze tune``: kernels it has records for get
    their tuned schedules (docs/performance.md). The fusion controls may
    also come as keywords (``no_fuse=["Slice"], strict_rules=True``), over
    those of ``fusion``.
    """
    from .frontend import import_onnx

    if controls:
        fusion = _with_controls(fusion, controls)

    started = time.perf_counter()
    (progress or _quiet)("importing")
    module = import_onnx(model, input_shapes)
    return compile_module(module, target, level, fusion, threads, progress, cache_dir, _model_name(model),
                          started, schedules, tuning_db)


def pipeline(level: int = 0, fusion=None, target=None) -> PassManager:
    """The passes a compile runs: canonicalize, cse, dce, then fuse (level > 0).
    An Ascend-like ``target`` (a Target) bounds each group's working tile by
    its unified buffer unless ``fusion`` sets ``tile_limit``."""
    from .passes.fusion import Fuse, FusionOptions

    pm = PassManager.parse(PREPARE)
    if level > 0:
        options = fusion if isinstance(fusion, FusionOptions) else _fusion_options(dict(fusion or {}))
        values = {f.name: getattr(options, f.name) for f in dataclasses.fields(FusionOptions)}
        if target is not None and target.npu is not None and not values["tile_limit"]:
            values["tile_limit"] = target.npu.ub_size
        pm.passes.append(Fuse(**{**values, "level": level}))
    return pm


def _with_controls(fusion, controls: dict) -> dict:
    """``fusion`` (None, a dict or a FusionOptions) with ``controls`` over it, as a dict."""
    from .passes.fusion import FusionOptions

    if isinstance(fusion, FusionOptions):
        fusion = {f.name: getattr(fusion, f.name) for f in dataclasses.fields(FusionOptions) if f.name != "level"}
    return {**(fusion or {}), **controls}


def _fusion_options(values: dict):
    from .errors import PassError
    from .passes.fusion import FusionOptions

    known = {f.name for f in dataclasses.fields(FusionOptions)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise PassError(f"unknown fusion option(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    return FusionOptions(**values)


def fuse_only(model, level: int = 2, fusion=None, input_shapes=None, target=None):
    """Import and fuse without building: (module, FusionReport). What
    ``braze explain`` shows; needs no TVM for the default target. An
    Ascend-like ``target`` limits fusion and adds each kernel's estimated
    time to the report (``report.estimate``)."""
    from .frontend import import_onnx
    from .passes.fusion import FusionReport

    tgt = None if target in (None, "cpu") else get_target(target)
    module = import_onnx(model, input_shapes)
    pipeline(level, fusion, tgt).run(module)
    report = module.fusion_report
    if report is None:  # level 0: nothing fused
        from .passes.fusion.fuse import count_ops

        n = count_ops(module.main)
        report = FusionReport(level=0, ops_before=n, kernels=n)
    estimate = _estimate(module, tgt)
    if estimate is not None:
        report.estimate = estimate.to_dict()
    return module, report


def _estimate(module, target):
    """The roofline estimate of every kernel on an Ascend-like target; None on others."""
    if target is None or target.npu is None:
        return None
    from .targets.roofline import estimate_module

    return estimate_module(module, target)


def compile_module(module, target="cpu", level: int = 2, fusion=None, threads: int | None = None, progress=None,
                   cache_dir: str | None = None, name: str = "model", started: float | None = None,
                   schedules: dict | None = None, tuning_db: str | None = None) -> Artifact:
    """Compile an IR module (e.g. from ``braze.load_onnx`` or parsed IR text)."""
    from .codegen import build
    from .frontend import onnx_version

    say = progress or _quiet
    started = started or time.perf_counter()
    tgt = get_target(target, threads)
    tuned = _tuning_database(tuning_db, tgt)
    pm = pipeline(level, fusion, tgt)
    say(f"running {pm}")
    pm.run(module)
    ir_text = print_module(module)
    cache = runtime_cache.cache_dir(cache_dir)
    if schedules:  # checked before the build; kN names become full names
        from .codegen.pins import check_schedules

        schedules = check_schedules(module, tgt, schedules)
        if any("function" in pin for pin in schedules.values()):
            cache = None  # a user's schedule function can change under the same name
    if cache:
        settings = {"target": tgt.to_dict(), "level": level, "braze": __version__, "tvm": tvm_version(),
                    "schedules": schedules or {}, "codegen": codegen_fingerprint(),
                    "tuning": tuned.fingerprint() if tuned else None}
        key = runtime_cache.cache_key(ir_text, module.blobs, settings)
        hit = runtime_cache.lookup(cache, key)
        if hit is not None:
            say("reusing a cached build")
            return hit
    say("building kernels with TVM")
    report = module.fusion_report
    compiled = build(module, tgt, on_group_failure=lambda kernel, error: _split_group(kernel, error, report, say),
                     schedules=schedules, tuning_db=tuned)
    if report is not None:
        report.kernels = len(compiled.kernels)
        ir_text = print_module(module)  # a group split back changes the final IR
    estimate = _estimate(module, tgt)  # on the final module: one per built kernel, in order
    if estimate is not None and report is not None:
        report.estimate = estimate.to_dict()
    func = module.main
    manifest = {
        "format": FORMAT,
        "braze": __version__,
        "tvm": tvm_version(),
        "onnx": onnx_version(),
        "model": name,
        "target": tgt.to_dict(),
        "requires": requirements(tgt),
        "threads": threads,
        "level": level,
        "pipeline": str(pm),
        "inputs": [_spec(a.name, a.type) for a in func.args],
        "outputs": [_spec(n, v.type) for n, v in zip(func.result_names, func.outputs)],
        "kernels": [{"name": k.name, "ops": k.op_types, "nodes": k.nodes, "kind": k.kind.value, "rule": k.rule,
                     "schedule": k.schedule, "schedule_params": k.schedule_params,
                     "packed": sorted({p.name for p in k.packings.values()})}
                    for k in compiled.kernels],
        "schedules": _pins_record(schedules),
        "tuning_db": None if tuned is None else {"path": tuned.path, "fingerprint": tuned.fingerprint()},
        "fusion": report.to_dict() if report is not None else None,
        "estimate": None if estimate is None else {"target": tgt.name, "model": "roofline",
                                                   "total_us": round(estimate.total_us, 3)},
        "compile_seconds": round(time.perf_counter() - started, 3),
    }
    if estimate is not None:
        for entry, k in zip(manifest["kernels"], estimate.kernels):
            entry["estimate_us"] = round(k.estimate_us, 4)
    artifact = Artifact(manifest, ir_text, executable=compiled.executable)
    if cache:
        runtime_cache.store(cache, key, artifact)
    return artifact


def _tuning_database(path, target):
    """The tuning database a compile reads (None without one); a TuningError
    if it is missing or corrupt, before any work is done."""
    if not path:
        return None
    from .codegen.tuning import TuningDatabase
    from .errors import TuningError

    if target.kind != "llvm":
        raise TuningError(f"--tuning-db applies to CPU targets; {target.name} builds with {target.kind}")
    return TuningDatabase.open(path)


def _split_group(kernel, error, report, say) -> None:
    """TVM cannot build a fused group: split it back into one kernel per op
    and record why, so that a compile never fails for being too ambitious."""
    from .passes.fusion import Refusal, ungroup

    say(f"group {kernel.group.attributes['name']} failed to build; splitting it: {error}")
    if report is not None:
        name = kernel.group.attributes["name"]
        report.groups = [g for g in report.groups if g.name != name]
        report.refused.append(Refusal(kernel.nodes, "codegen_failed", kernel.rule, str(error)))
    ungroup(kernel.group)


def _pins_record(schedules) -> dict:
    from .codegen.pins import record

    return record(schedules) if schedules else {}


def _quiet(message: str) -> None:
    pass


def _spec(name: str, ty) -> dict:
    return {"name": name, "shape": list(ty.shape), "dtype": str(ty.np_dtype)}


def _model_name(model) -> str:
    if isinstance(model, (str, os.PathLike)):
        return os.path.basename(os.fspath(model))
    return getattr(getattr(model, "graph", None), "name", "") or "model"
