"""An artifact's ``manifest.json``: what a compile records in it, what it
must hold, and whether this machine can run what it describes (checked on
load, before TVM maps any code)."""

from __future__ import annotations

from ..errors import ArtifactError
from ..version import __version__

FORMAT = 1
REBUILD = "rebuild it with `braze compile`"


def tvm_version() -> str:
    import tvm

    return tvm.__version__


def check_manifest(manifest: dict, path: str, check_target: bool) -> None:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArtifactError(f"{path}: not a braze artifact of format {FORMAT}; {REBUILD}")
    rebuild = REBUILD
    for key, kind in (("inputs", list), ("outputs", list), ("kernels", list), ("target", dict)):
        if not isinstance(manifest.get(key), kind):
            raise ArtifactError(f"{path}: corrupt manifest.json ('{key}' is missing or not a {kind.__name__}); "
                                f"{rebuild}")
    for spec in manifest["inputs"] + manifest["outputs"]:
        if not (isinstance(spec, dict) and {"name", "shape", "dtype"} <= set(spec)):
            raise ArtifactError(f"{path}: corrupt manifest.json (an input or output lacks name, shape "
                                f"or dtype: {spec!r}); {rebuild}")
    req = manifest.get("requires")
    if req is not None and not (isinstance(req, dict) and isinstance(req.get("arch"), str)
                                and isinstance(req.get("features"), list)
                                and all(isinstance(f, str) for f in req["features"])):
        raise ArtifactError(f"{path}: corrupt manifest.json ('requires' is not "
                            f'{{"arch": NAME, "features": [NAME, ...]}}); {rebuild}')
    for key, have in (("braze", __version__), ("tvm", tvm_version())):
        if manifest.get(key) != have:
            raise ArtifactError(f"{path}: built with {key} {manifest.get(key)}, this is {key} {have}; {rebuild}")
    if check_target:
        problem = cannot_run(manifest)
        if problem:
            raise ArtifactError(f"{path}: {problem}")


def cannot_run(manifest: dict) -> str | None:
    """Why this machine cannot run the artifact (the CPU's architecture or
    ISA features, the GPU) and what to do; None if it can. Checked before
    TVM maps the code, which would otherwise stop on an illegal instruction."""
    from ..targets import advice, mismatch

    target = manifest.get("target", {})
    if not target and manifest.get("requires") is None:
        return None  # built in this process from IR (tests, tools): for this machine
    problem = mismatch(target, manifest.get("requires"))
    if problem is None:
        return None
    rebuild = advice() if target.get("kind") == "llvm" else REBUILD
    return f"built for target {target.get('name')} {problem}; {rebuild}"


#: The manifest's fields, in the order manifest.json lists them; ``gears``
#: and ``pad_batch`` only for an artifact compiled with gears.
FIELDS = ("format", "braze", "tvm", "onnx", "model", "target", "requires", "threads", "level", "pipeline",
          "layout", "inputs", "outputs", "precision", "kernels", "schedules", "tuning_db", "fusion", "estimate",
          "compile_seconds", "gears")


def build_manifest(settings: dict, module, kernels: list, estimate=None, gears: list[dict] | None = None) -> dict:
    """The manifest of a compiled module: ``settings`` are the compile's own
    fields (model, target, requires, threads, level, pipeline, layout,
    precision, schedules, tuning_db, compile_seconds); the rest comes from
    the final ``module`` (its signature and fusion report), the built
    ``kernels`` (codegen's Kernel objects, each once), the roofline
    ``estimate`` of an Ascend-like target and the ``gears`` entries."""
    from ..frontend import onnx_version

    report = module.fusion_report
    fields = {
        "format": FORMAT,
        "braze": __version__,
        "tvm": tvm_version(),
        "onnx": onnx_version(),
        **settings,
        **signature(module.main),
        "kernels": [_kernel_entry(k) for k in kernels],
        "fusion": report.to_dict() if report is not None else None,
        "estimate": None if estimate is None else {"target": settings["target"]["name"], "model": "roofline",
                                                   "total_us": round(estimate.total_us, 3)},
    }
    if gears is not None:
        fields["gears"] = gears
    if estimate is not None:
        for entry, k in zip(fields["kernels"], estimate.kernels):
            entry["estimate_us"] = round(k.estimate_us, 4)
    return {key: fields[key] for key in FIELDS if key in fields}


def gear_entry(gear, function: str, module, kernels: list[str]) -> dict:
    """One gear of the manifest's ``gears``: its dims, its Relax function
    and the kernels that function calls."""
    report = module.fusion_report
    return {"name": gear.name, "dims": gear.to_dict(), "function": function, **signature(module.main),
            "kernels": kernels, "fusion": report.to_dict() if report is not None else None}


def signature(func) -> dict:
    """The manifest's ``inputs`` and ``outputs`` of a function."""
    return {"inputs": [io_spec(a.name, a.type) for a in func.args],
            "outputs": [io_spec(n, v.type) for n, v in zip(func.result_names, func.outputs)]}


def io_spec(name: str, ty) -> dict:
    return {"name": name, "shape": list(ty.shape), "dtype": str(ty.np_dtype)}


def _kernel_entry(k) -> dict:
    from ..passes.precision import group_dtype

    dtype = group_dtype([r.type for op in k.ops if op.name != "math.cast" for r in op.results])
    return {"name": k.name, "ops": k.op_types, "nodes": k.nodes, "kind": k.kind.value, "rule": k.rule,
            "dtype": dtype, "schedule": k.schedule, "schedule_params": k.schedule_params,
            "packed": sorted({p.name for p in k.packings.values()})}
