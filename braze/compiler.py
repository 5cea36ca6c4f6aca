"""``braze.compile``: ONNX model -> Artifact, the steps in order.

check the options -> load the model once -> bind its shapes or gears
(one imported module each) -> run the passes -> build the kernels with
TVM -> assemble the artifact and its manifest (runtime/manifest.py).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Callable

from .ir import print_module
from .passes import PassManager
from .pipeline import PREPARE, _with_controls, check_layout, pipeline, precision_options, precision_record
from .runtime import cache as runtime_cache
from .runtime.artifact import Artifact
from .runtime.manifest import build_manifest, gear_entry
from .targets import get_target
from .targets.isa import requirements


@dataclass(frozen=True)
class BuildOptions:
    """How modules become an artifact: ``compile``'s options past the
    frontend's, checked. ``precision`` is ``pipeline.precision_options(...)``."""

    target: object = "cpu"  # a target name or a Target
    level: int = 2
    fusion: object = None  # a FusionOptions, or a dict of its fields
    threads: int | None = None
    cache_dir: str | None = None
    schedules: dict | None = None
    tuning_db: str | None = None
    precision: dict | None = None
    layout: str = "blocked"

    def __post_init__(self):
        check_layout(self.layout)


@dataclass(frozen=True)
class Shapes:
    """How the frontend binds the model's dynamic dimensions: one shape
    (``input_shapes``) or gears (one of ``dynamic_batch``, ``dynamic_dims``,
    ``gears``), checked before the model is read."""

    input_shapes: object = None
    dynamic_batch: object = None
    dynamic_dims: object = None
    gears: object = None
    pad_batch: bool = False

    def __post_init__(self):
        from .errors import DynamicShapeError

        if self.pad_batch and self.dynamic_batch is None:
            if not self.geared:
                raise DynamicShapeError("--pad-batch pads up to a larger gear: give the gears with --dynamic-batch")
            raise DynamicShapeError("--pad-batch pads the leading dimension of every input: give the gears with "
                                    "--dynamic-batch")
        if self.geared and self.input_shapes:
            raise DynamicShapeError("--input-shape binds one shape; with gears, the gears bind the dynamic "
                                    "dimensions")

    @property
    def geared(self) -> bool:
        return not (self.dynamic_batch is None and self.dynamic_dims is None and self.gears is None)


@dataclass
class _Job:
    """One compile's progress reporting, name and start time."""

    progress: Callable | None = None
    name: str = "model"
    started: float = field(default_factory=time.perf_counter)

    def say(self, message: str) -> None:
        (self.progress or _quiet)(message)

    @property
    def kernels(self):
        """The progress's kernel tracker (``start``/``advance``/``finish``), if it has one."""
        return getattr(self.progress, "kernels", None)


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
    samples apart (passes/batch_independence.py), else a DynamicShapeError says why not.

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
    from .frontend import parse_shape_bindings

    if override_shapes:
        input_shapes = parse_shape_bindings(input_shapes, override=True)
    options = BuildOptions(target, level, _with_controls(fusion, controls) if controls else fusion, threads,
                           cache_dir, schedules, tuning_db,
                           precision_options(precision_mode, modify_mixlist, keep_dtype), layout)
    shapes = Shapes(input_shapes, dynamic_batch, dynamic_dims, gears, pad_batch)
    job = _Job(progress, _model_name(model))
    job.say("importing")
    modules, pad_axes = _import(model, shapes)
    artifact = _compile(modules, options, job)
    if pad_axes is not None:  # not part of the cache key: recorded on the artifact this compile returns
        artifact.manifest["pad_batch"] = {"output_axes": pad_axes}
    return artifact


def _import(model, shapes: Shapes) -> tuple[list, list[int] | None]:
    """``([(gear or None, Module), ...], the outputs' batch axes or None)``:
    the model read once, imported once per gear (or once, with its input
    shapes bound), and with ``pad_batch`` the proof that it keeps samples apart."""
    from .frontend import import_model, load_model
    from .frontend.gears import import_gears, parse_gears

    proto = load_model(model)
    if not shapes.geared:
        return [(None, import_model(proto, shapes.input_shapes))], None
    found = parse_gears(proto, shapes.dynamic_batch, shapes.dynamic_dims, shapes.gears)
    pad_axes = _pad_batch_axes(proto, found) if shapes.pad_batch else None
    return import_gears(proto, found), pad_axes


def _pad_batch_axes(proto, gears) -> list[int]:
    """The batch axis of every output, if braze proves the model keeps the
    samples of a batch apart (checked on the largest gear); else a
    DynamicShapeError with the reason. The proof imports that gear on its
    own: the compile's passes (fold-quant first) would change what it reads."""
    from .errors import DynamicShapeError
    from .frontend.gears import import_gears
    from .passes.batch_independence import Mixes, batch_outputs

    largest = max(gears, key=lambda g: g.to_dict()["batch"])
    [(_, module)] = import_gears(proto, [largest])
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
    options = BuildOptions(target, level, fusion, threads, cache_dir, schedules, tuning_db, precision, layout)
    job = _Job(progress, name) if started is None else _Job(progress, name, started)
    return _compile([(None, module)], options, job)


def _compile(modules: list, options: BuildOptions, job: _Job) -> Artifact:
    """``modules``: ``[(gear or None, Module), ...]``, one Relax function each
    (``main`` for the first; ``gear<i>`` for the others)."""
    tgt = get_target(options.target, options.threads)
    tuned = _tuning_database(options.tuning_db, tgt)
    pm = _run_passes(modules, options, tgt, job)
    module = modules[0][1]
    schedules = _check_pins(module, tgt, options.schedules)
    cache = runtime_cache.cache_dir(options.cache_dir)
    if any("function" in pin for pin in schedules.values()):
        cache = None  # a user's schedule function can change under the same name
    if cache:
        key = runtime_cache.build_key(modules, tgt, options.level, schedules, tuned)
        hit = runtime_cache.lookup(cache, key)
        if hit is not None:
            job.say("reusing a cached build")
            return hit
    job.say("building kernels with TVM")
    compiled, functions = _build(modules, tgt, schedules, tuned, job)
    estimate = _estimate(module, tgt)  # on the final module: one per built kernel, in order
    if estimate is not None and module.fusion_report is not None:
        module.fusion_report.estimate = estimate.to_dict()
    settings = {"model": job.name, "target": tgt.to_dict(), "requires": requirements(tgt),
                "threads": options.threads, "level": options.level, "pipeline": str(pm), "layout": options.layout,
                "precision": precision_record(pm, tgt), "schedules": _pins_record(schedules),
                "tuning_db": None if tuned is None else {"path": tuned.path, "fingerprint": tuned.fingerprint()},
                "compile_seconds": round(time.perf_counter() - job.started, 3)}
    gears = None
    if modules[0][0] is not None:
        gears = [gear_entry(gear, fname, m, compiled.functions[fname])
                 for (gear, m), fname in zip(modules, functions)]
    manifest = build_manifest(settings, module, compiled.kernels, estimate, gears)
    artifact = Artifact(manifest, print_module(module), executable=compiled.executable)  # after any group split
    if cache:
        runtime_cache.store(cache, key, artifact)
    return artifact


def _run_passes(modules: list, options: BuildOptions, tgt, job: _Job) -> PassManager:
    """The compile's pipeline run on every gear's module; the pipeline (the same for every gear)."""
    from .passes.fusion import attach_regions

    for gear, module in modules:
        pm = pipeline(options.level, options.fusion, tgt, options.precision, options.layout)
        job.say(f"running {pm}" + (f" on gear {gear.name}" if gear else ""))
        pm.run(module)
        attach_regions(module)
    return pm


def _check_pins(module, tgt, schedules: dict | None) -> dict:
    """The pinned schedules checked before the build; kN names become full names."""
    if not schedules:
        return {}
    from .codegen.pins import check_schedules

    return check_schedules(module, tgt, schedules)


def _build(modules: list, tgt, schedules: dict, tuned, job: _Job):
    """(Compiled, the Relax function of each gear): every module's kernels
    built with TVM into one executable. A fused group TVM cannot build is
    split back into one kernel per op (``_split_group``)."""
    from .codegen.assemble import region_functions
    from .codegen.build import build_gears

    def on_failure(report):
        return lambda kernel, error: _split_group(kernel, error, report, job.say)

    entries, functions = [], []
    for i, (_, m) in enumerate(modules):  # control-flow regions first: the functions that call them follow
        fname = "main" if i == 0 else f"gear{i}"
        entries += [(rname, sub, on_failure(sub.fusion_report)) for rname, sub in region_functions(fname, m)]
        entries.append((fname, m, on_failure(m.fusion_report)))
        functions.append(fname)
    compiled = build_gears(entries, tgt, schedules=schedules, tuning_db=tuned, progress=job.kernels)
    for (fname, m, _) in entries:
        if m.fusion_report is not None:
            m.fusion_report.kernels = len(compiled.functions[fname])
    return compiled, functions


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


def _model_name(model) -> str:
    if isinstance(model, (str, os.PathLike)):
        return os.path.basename(os.fspath(model))
    return getattr(getattr(model, "graph", None), "name", "") or "model"
