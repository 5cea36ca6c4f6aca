"""What an artifact's ``manifest.json`` must hold, and whether this machine
can run what it describes: checked on load, before TVM maps any code."""

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
    from ..targets import mismatch
    from ..targets.isa import advice

    target = manifest.get("target", {})
    if not target and manifest.get("requires") is None:
        return None  # built in this process from IR (tests, tools): for this machine
    problem = mismatch(target, manifest.get("requires"))
    if problem is None:
        return None
    rebuild = advice() if target.get("kind") == "llvm" else REBUILD
    return f"built for target {target.get('name')} {problem}; {rebuild}"
