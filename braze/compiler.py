"""``braze.compile``: ONNX model -> Artifact, the steps in order."""

from __future__ import annotations

import os
import time

from .ir import print_module
from .passes import PassManager
from .pipeline import PREPARE, _with_controls, check_layout, pipeline, precision_options, precision_record
from .runtime import cache as runtime_cache
from .runtime.artifact import Artifact
from .runtime.manifest import FORMAT, tvm_version
from .targets import get_target
from .targets.isa import requirements
from .version import __version__

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
            tuning_db: str | None = None, dynamic_batch=None, dynamic_dims=None, gears=None,
            pad_batch: bool = False, precision_mode: str | None = None, modify_mixlist=None, keep_dtype=None,
            layout: str = "blocked", override_shapes: bool = False, **controls) -> Artifact:
    """Compile an ONNX model (path, bytes or ModelProto) into an Artifact.

    ``level`` is the fusion level (0: one kernel per op, default 2); ``fusion`` the other
    fusion controls (a ``FusionOptions`` or a dict of its fields: no_fuse,
    only_fuse, skip_nodes, scope, switch, rules, max_group_size, ...);
    ``input_shapes`` binds dynamic input dimensions (``{"x": (1, 3, 224,
    224)}``; a fixed one only with ``override_shapes``); ``threads`` the CPU
    threads to run with. ``progress(message)`` is called at each step. With
    ``cache_dir`` (or ``BRAZE_CACHE_DIR``) an identical earlier compile is reused.
    ``schedules`` pins kernels' schedules: kernel name -> ``{"rule": NAME,
    "params": {...}}`` (see ``braze kernels`` for the names). ``tuning_db``
    is a folder written by ``braze tune``: kernels it has records for get
    their tuned schedules (docs/performance.md). The fusion controls may
    also come as keywords (``no_fuse=["Slice"], strict_rules=True``), over
    those of ``fusion``.

    Gears (docs/usage.md, "Dynamic shapes"): ``dynamic_batch="1,2,4,8"``,
    ``dynamic_dims="B=1,4;S=32,64"`` or ``gears="B=1,S=32;B=4,S=128"``
    compile one graph per binding of the model's dynamic dimensions into one
    artifact, which runs the gear its inputs' shapes match. ``pad_batch``
    (with ``dynamic_batch``): a batch between gears runs on the next larger
    gear, padded; allowed only where braze proves the model keeps the
    samples apart (passes/batch.py), else a DynamicShapeError says why not.

    Precision (docs/usage.md, "Precision modes"): ``precision_mode`` is one
    of ATC's modes (``allow_mix_precision``, ``allow_mix_precision_bf16``,
    ``force_fp16``, ``must_keep_origin_dtype``, ...; default: the target's,
    float32 except on Ascend-like targets); ``modify_mixlist`` ATC's JSON
    (a path, or a dict) moving ONNX op types between the white, black and
    gray lists; ``keep_dtype`` a file of node names or ``OpType::X`` lines
    (or a list of them) that keep float32.

    ``layout`` (docs/passes.md, "layout"): ``blocked`` (the default) gives
    conv chains the blocked channel layout (NCHWc) on CPU targets at levels
    1-3; ``plain`` keeps every tensor in the model's own layout.

    Progress goes to ``progress`` when given, else to the ``braze`` logger
    (``logging.getLogger("braze")``, level INFO); a ``progress`` with a
    ``kernels`` attribute (an object with ``start(total)``, ``advance()``
    and ``finish()``) also follows the kernels as TVM builds them.

    Returns:
        Artifact: ``.run({name: array})`` gives ``{name: array}``;
        ``.save(path)`` writes the deployable folder (docs/usage.md).

    Raises:
        ModelLoadError: the file is missing or not an ONNX model.
        OnnxImportError: an op, type or attribute braze does not support
            (``UnsupportedOpError`` lists every such op type at once;
            ``DynamicShapeError`` a shape known only at run time).
        FusionRuleError: a fusion control or rule is invalid (or, with
            ``strict_rules``, matches nothing).
        CodegenError: TVM cannot build the model.

    Example::

        art = braze.compile("model.onnx", level=3, no_fuse=["Slice"])
        y = art.run({"x": x})["y"]
        art.save("model.braze")
    """
    from .frontend import import_onnx, parse_shape_bindings

    if override_shapes:
        input_shapes = parse_shape_bindings(input_shapes, override=True)
    if controls:
        fusion = _with_controls(fusion, controls)
    precision = precision_options(precision_mode, modify_mixlist, keep_dtype)
    check_layout(layout)

    started = time.perf_counter()
    say = progress or _quiet
    say("importing")
    if dynamic_batch is None and dynamic_dims is None and gears is None:
        if pad_batch:
            from .errors import DynamicShapeError

            raise DynamicShapeError("--pad-batch pads up to a larger gear: give the gears with --dynamic-batch")
        module = import_onnx(model, input_shapes)
        return compile_module(module, target, level, fusion, threads, progress, cache_dir, _model_name(model),
                              started, schedules, tuning_db, precision, layout)
    from .errors import DynamicShapeError
    from .frontend.gears import gear_shapes, parse_gears
    from .frontend.importer import load_model

    if input_shapes:
        raise DynamicShapeError("--input-shape binds one shape; with gears, the gears bind the dynamic dimensions")
    proto = load_model(model)
    found = parse_gears(proto, dynamic_batch, dynamic_dims, gears)
    modules = [(g, import_onnx(proto, gear_shapes(proto, g))) for g in found]
    axes = _pad_batch_axes(proto, found, dynamic_batch) if pad_batch else None
    artifact = _compile(modules, target, level, fusion, threads, progress, cache_dir, _model_name(model), started,
                        schedules, tuning_db, precision, layout)
    if axes is not None:
        artifact.manifest["pad_batch"] = {"output_axes": axes}
    return artifact


def _pad_batch_axes(proto, gears, dynamic_batch) -> list[int]:
    """The batch axis of every output, if braze proves the model keeps the
    samples of a batch apart (checked on the largest gear); else a
    DynamicShapeError with the reason."""
    from .errors import DynamicShapeError
    from .frontend import import_onnx
    from .frontend.gears import gear_shapes
    from .passes.batch import Mixes, batch_outputs

    if dynamic_batch is None:
        raise DynamicShapeError("--pad-batch pads the leading dimension of every input: give the gears with "
                                "--dynamic-batch")
    largest = max(gears, key=lambda g: g.to_dict()["batch"])
    module = import_onnx(proto, gear_shapes(proto, largest))
    PassManager.parse(PREPARE).run(module)
    try:
        return batch_outputs(module.main)
    except Mixes as e:
        raise DynamicShapeError(f"--pad-batch refused: braze cannot prove that the model keeps the samples of a "
                                f"batch apart: {e}. Compile a gear for every batch size instead") from None


def fuse_only(model, level: int = 2, fusion=None, input_shapes=None, target=None, precision: dict | None = None,
              layout: str = "blocked"):
    """Import and fuse without building: (module, FusionReport). What
    ``braze explain`` shows; needs no TVM for the default target. An
    Ascend-like ``target`` limits fusion and adds each kernel's estimated
    time to the report (``report.estimate``)."""
    from .frontend import import_onnx
    from .passes.fusion import FusionReport, attach_regions

    tgt = None if target in (None, "cpu") else get_target(target)
    module = import_onnx(model, input_shapes)
    pipeline(level, fusion, tgt, precision, layout).run(module)
    attach_regions(module)
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
                   schedules: dict | None = None, tuning_db: str | None = None,
                   precision: dict | None = None, layout: str = "blocked") -> Artifact:
    """Compile an IR module (e.g. from ``braze.load_onnx`` or parsed IR text)
    with ``compile``'s options (``precision``: ``pipeline.precision_options(...)``).

    Returns:
        Artifact: as ``compile``'s.

    Raises:
        PassError, FusionRuleError, CodegenError: as ``compile``.

    Example::

        module = braze.parse_ir(open("model.mlir").read(), "model.weights.npz")
        art = braze.compile_module(module, level=3)
    """
    return _compile([(None, module)], target, level, fusion, threads, progress, cache_dir, name, started,
                    schedules, tuning_db, precision, layout)


def _compile(modules, target, level, fusion, threads, progress, cache_dir, name, started, schedules,
             tuning_db, precision=None, layout: str = "blocked") -> Artifact:
    """``modules``: ``[(gear or None, Module), ...]``, one Relax function each
    (``main`` for the first; ``gear<i>`` for the others)."""
    from .codegen.assemble import region_functions
    from .passes.fusion import attach_regions
    from .codegen.build import build_gears
    from .frontend import onnx_version
    from .passes.precision import group_dtype

    say = progress or _quiet
    started = started or time.perf_counter()
    tgt = get_target(target, threads)
    tuned = _tuning_database(tuning_db, tgt)
    for gear, module in modules:
        pm = pipeline(level, fusion, tgt, precision, layout)
        say(f"running {pm}" + (f" on gear {gear.name}" if gear else ""))
        pm.run(module)
        attach_regions(module)
    module = modules[0][1]
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
        if len(modules) > 1:
            settings["gears"] = [(gear.name, print_module(m)) for gear, m in modules]
        key = runtime_cache.cache_key(ir_text, module.blobs, settings)
        hit = runtime_cache.lookup(cache, key)
        if hit is not None:
            say("reusing a cached build")
            return hit
    say("building kernels with TVM")

    def on_failure(report):
        return lambda kernel, error: _split_group(kernel, error, report, say)

    entries, gear_entries = [], []
    for i, (_, m) in enumerate(modules):  # control-flow regions first: the functions that call them follow
        fname = "main" if i == 0 else f"gear{i}"
        entries += [(rname, sub, on_failure(sub.fusion_report)) for rname, sub in region_functions(fname, m)]
        gear_entries.append((fname, m, on_failure(m.fusion_report)))
        entries.append(gear_entries[-1])
    compiled = build_gears(entries, tgt, schedules=schedules, tuning_db=tuned,
                           progress=getattr(progress, "kernels", None))
    for (fname, m, _) in entries:
        if m.fusion_report is not None:
            m.fusion_report.kernels = len(compiled.functions[fname])
    report = module.fusion_report
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
        "layout": layout,
        **_signature(func),
        "precision": precision_record(pm, tgt),
        "kernels": [{"name": k.name, "ops": k.op_types, "nodes": k.nodes, "kind": k.kind.value, "rule": k.rule,
                     "dtype": group_dtype([r.type for op in k.ops if op.name != "math.cast" for r in op.results]),
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
    if modules[0][0] is not None:
        manifest["gears"] = [_gear_entry(gear, fname, m, compiled.functions[fname])
                             for (gear, _), (fname, m, _) in zip(modules, gear_entries)]
    if estimate is not None:
        for entry, k in zip(manifest["kernels"], estimate.kernels):
            entry["estimate_us"] = round(k.estimate_us, 4)
    artifact = Artifact(manifest, ir_text, executable=compiled.executable)
    if cache:
        runtime_cache.store(cache, key, artifact)
    return artifact


def _gear_entry(gear, function: str, module, kernels: list[str]) -> dict:
    func = module.main
    return {"name": gear.name, "dims": gear.to_dict(), "function": function,
            **_signature(func),
            "kernels": kernels,
            "fusion": module.fusion_report.to_dict() if module.fusion_report is not None else None}


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
    """Progress without a ``progress`` callback: the ``braze`` logger."""
    import logging

    logging.getLogger("braze").info(message)


def _signature(func) -> dict:
    """The manifest's ``inputs`` and ``outputs`` of a function."""
    return {"inputs": [_spec(a.name, a.type) for a in func.args],
            "outputs": [_spec(n, v.type) for n, v in zip(func.result_names, func.outputs)]}


def _spec(name: str, ty) -> dict:
    return {"name": name, "shape": list(ty.shape), "dtype": str(ty.np_dtype)}


def _model_name(model) -> str:
    if isinstance(model, (str, os.PathLike)):
        return os.path.basename(os.fspath(model))
    return getattr(getattr(model, "graph", None), "name", "") or "model"
