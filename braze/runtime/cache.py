"""A cache of compiled artifacts, keyed by everything that decides the code:
the IR after the pre-codegen passes, the weights' contents, the target,
the fusion level and the braze/TVM versions. Enabled by ``BRAZE_CACHE_DIR``
(or ``cache_dir=``); tests use it so each model compiles once per run."""

from __future__ import annotations

import hashlib
import json
import os

from ..errors import ArtifactError
from .artifact import Artifact, load


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
