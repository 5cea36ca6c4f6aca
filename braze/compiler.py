"""``braze.compile``: ONNX model -> Artifact, the steps in order."""

from __future__ import annotations

import os
import time

from . import __version__
from .ir import print_module
from .passes import PassManager
from .runtime import cache as runtime_cache
from .runtime.artifact import FORMAT, Artifact, tvm_version
from .targets import get_target

#: What every compile runs before codegen.
PREPARE = "canonicalize,cse,dce"


def compile(model, target="cpu", level: int = 0, input_shapes=None, threads: int | None = None,
            progress=None, cache_dir: str | None = None) -> Artifact:
    """Compile an ONNX model (path, bytes or ModelProto) into an Artifact.

    ``level`` is the fusion level (0: one kernel per op); ``input_shapes``
    binds dynamic input dimensions; ``threads`` the CPU threads to run with.
    ``progress(message)`` is called at each step. With ``cache_dir`` (or
    ``BRAZE_CACHE_DIR``) an identical earlier compile is reused.
    """
    from .frontend import import_onnx

    started = time.perf_counter()
    (progress or _quiet)("importing")
    module = import_onnx(model, input_shapes)
    return compile_module(module, target, level, threads, progress, cache_dir, _model_name(model), started)


def compile_module(module, target="cpu", level: int = 0, threads: int | None = None, progress=None,
                   cache_dir: str | None = None, name: str = "model", started: float | None = None) -> Artifact:
    """Compile an IR module (e.g. from ``braze.load_onnx`` or parsed IR text)."""
    from .codegen import build
    from .frontend import onnx_version

    say = progress or _quiet
    started = started or time.perf_counter()
    tgt = get_target(target, threads)
    pm = PassManager.parse(PREPARE)
    say(f"running {pm}")
    pm.run(module)
    ir_text = print_module(module)
    cache = runtime_cache.cache_dir(cache_dir)
    if cache:
        settings = {"target": tgt.to_dict(), "level": level, "braze": __version__, "tvm": tvm_version()}
        key = runtime_cache.cache_key(ir_text, module.blobs, settings)
        hit = runtime_cache.lookup(cache, key)
        if hit is not None:
            say("reusing a cached build")
            return hit
    say("building kernels with TVM")
    compiled = build(module, tgt)
    func = module.main
    manifest = {
        "format": FORMAT,
        "braze": __version__,
        "tvm": tvm_version(),
        "onnx": onnx_version(),
        "model": name,
        "target": tgt.to_dict(),
        "threads": threads,
        "level": level,
        "pipeline": str(pm),
        "inputs": [_spec(a.name, a.type) for a in func.args],
        "outputs": [_spec(n, v.type) for n, v in zip(func.result_names, func.outputs)],
        "kernels": [{"name": k.name, "ops": k.op_types, "nodes": k.nodes, "kind": k.kind.value, "rule": k.rule}
                    for k in compiled.kernels],
        "compile_seconds": round(time.perf_counter() - started, 3),
    }
    artifact = Artifact(manifest, ir_text, executable=compiled.executable)
    if cache:
        runtime_cache.store(cache, key, artifact)
    return artifact


def _quiet(message: str) -> None:
    pass


def _spec(name: str, ty) -> dict:
    return {"name": name, "shape": list(ty.shape), "dtype": str(ty.np_dtype)}


def _model_name(model) -> str:
    if isinstance(model, (str, os.PathLike)):
        return os.path.basename(os.fspath(model))
    return getattr(getattr(model, "graph", None), "name", "") or "model"
