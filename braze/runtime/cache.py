"""A cache of compiled artifacts, keyed by everything that decides the code:
the IR after the pre-codegen passes, the weights' contents, the target,
the fusion level and the braze/TVM versions. Enabled by ``BRAZE_CACHE_DIR``
(or ``cache_dir=``); tests use it so each model compiles once per run."""

from __future__ import annotations

import hashlib
import json
import os

from ..errors import ArtifactError
from ..ir import print_module
from ..version import __version__
from .artifact import Artifact, load
from .manifest import tvm_version


def build_key(modules: list, target, level: int, schedules: dict, tuning) -> str:
    """The key of a compile of ``modules`` (``[(gear or None, Module), ...]``,
    after the passes): their IR and weights, the target, the level, the
    pinned schedules, braze's code generator and the tuning database."""
    module = modules[0][1]
    settings = {"target": target.to_dict(), "level": level, "braze": __version__, "tvm": tvm_version(),
                "schedules": schedules or {}, "codegen": codegen_fingerprint(),
                "tuning": tuning.fingerprint() if tuning else None}
    if len(modules) > 1:
        settings["gears"] = [(gear.name, print_module(m)) for gear, m in modules]
    return cache_key(print_module(module), module.blobs, settings)


def codegen_fingerprint() -> str:
    """A digest of braze's code generator sources (lowerings, schedules):
    the cache's entries stop matching when the generated code would change
    for the same IR."""
    import pathlib

    root = pathlib.Path(__file__).parent.parent / "codegen"
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def cache_key(ir_text: str, blobs: dict, settings: dict) -> str:
    h = hashlib.sha256()
    h.update(json.dumps(settings, sort_keys=True).encode())
    h.update(ir_text.encode())
    for handle in sorted(blobs):
        data = blobs[handle]
        h.update(handle.encode() + str(data.dtype).encode() + str(data.shape).encode())
        h.update(memoryview(data.reshape(-1).view("u1")) if data.flags.c_contiguous else data.tobytes())
    return h.hexdigest()[:32]


def cache_dir(explicit: str | None = None) -> str | None:
    return explicit or os.environ.get("BRAZE_CACHE_DIR") or None


def lookup(directory: str, key: str) -> Artifact | None:
    path = os.path.join(directory, f"{key}.braze")
    if not os.path.isdir(path):
        return None
    try:
        return load(path, check_target=False)  # built for another CPU is no reason to rebuild: running checks
    except ArtifactError:
        return None  # stale or broken entry: rebuild


def store(directory: str, key: str, artifact: Artifact) -> None:
    try:
        artifact.save(os.path.join(directory, f"{key}.braze"))
    except ArtifactError:
        pass  # not cached (no linker for another architecture's code, a full disk): the build still stands
