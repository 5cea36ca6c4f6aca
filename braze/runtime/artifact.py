"""The artifact: ``NAME.braze/`` with ``lib.so``, ``manifest.json`` and the
final IR text ``model.mlir``. Saved atomically; loading checks versions and
target before anything runs."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time

import numpy as np

from .. import __version__
from ..errors import ArtifactError, InputError
from .quiet import tvm_scope_logs_filtered

FORMAT = 1
LIB, MANIFEST, IR = "lib.so", "manifest.json", "model.mlir"


def tvm_version() -> str:
    import tvm

    return tvm.__version__


class Artifact:
    """A compiled model. ``run({name: array}) -> {name: array}``."""

    def __init__(self, manifest: dict, ir_text: str, executable=None, lib_path: str | None = None):
        self.manifest = manifest
        self.ir_text = ir_text
        self._executable = executable
        self._lib_path = lib_path
        self._vm = None

    # --- description ----------------------------------------------------------------------
    @property
    def inputs(self) -> list[dict]:
        return self.manifest["inputs"]

    @property
    def outputs(self) -> list[dict]:
        return self.manifest["outputs"]

    @property
    def kernels(self) -> list[dict]:
        return self.manifest["kernels"]

    def __repr__(self) -> str:
        ins = ", ".join(f"{i['name']}: {i['dtype']}{i['shape']}" for i in self.inputs)
        return f"<braze.Artifact {self.manifest.get('model', '?')} ({ins}) -> {len(self.outputs)} outputs, " \
               f"{len(self.kernels)} kernels, target {self.manifest['target']['name']}>"

    # --- running -------------------------------------------------------------------------------
    @property
    def vm(self):
        if self._vm is None:
            import tvm
            from tvm import relax

            from .threads import apply_threads

            apply_threads(self.manifest.get("threads"))
            with tvm_scope_logs_filtered():
                self._vm = relax.VirtualMachine(self._library(), tvm.cpu())
        return self._vm

    def _library(self):
        import tvm

        if self._executable is not None:
            return self._executable
        try:
            return tvm.runtime.load_module(self._lib_path)
        except Exception as e:
            raise ArtifactError(f"{self._lib_path}: the compiled library is corrupt and cannot be "
                                f"loaded ({_first_line(e)}); rebuild it with `braze compile`") from None

    def check_inputs(self, inputs: dict) -> list[np.ndarray]:
        names = [i["name"] for i in self.inputs]
        unknown = [k for k in inputs if k not in names]
        missing = [n for n in names if n not in inputs]
        if unknown or missing:
            parts = []
            if missing:
                parts.append(f"missing input(s) {', '.join(missing)}")
            if unknown:
                parts.append(f"unknown input(s) {', '.join(unknown)}")
            raise InputError("; ".join(parts) + f" (the model takes: {', '.join(names)})")
        arrays = []
        for spec in self.inputs:
            a = np.asarray(inputs[spec["name"]])
            if list(a.shape) != list(spec["shape"]):
                raise InputError(f"input '{spec['name']}' has shape {list(a.shape)}, expected {spec['shape']}")
            if str(a.dtype) != spec["dtype"]:
                raise InputError(f"input '{spec['name']}' has dtype {a.dtype}, expected {spec['dtype']}")
            arrays.append(np.ascontiguousarray(a).reshape(a.shape))  # (ascontiguousarray makes 0-d 1-d)
        return arrays

    def _call(self, arrays: list[np.ndarray]):
        import tvm

        return self.vm["main"](*[tvm.runtime.tensor(a) for a in arrays])

    def run(self, inputs: dict) -> dict[str, np.ndarray]:
        result = self._call(self.check_inputs(inputs))
        values = [result] if len(self.outputs) == 1 else list(result)
        return {spec["name"]: v.numpy() for spec, v in zip(self.outputs, values)}

    def time_run(self, inputs: dict, repeat: int = 10, warmup: int = 2) -> list[float]:
        """Seconds per run, ``repeat`` times after ``warmup`` runs."""
        arrays = self.check_inputs(inputs)
        import tvm

        args = [tvm.runtime.tensor(a) for a in arrays]
        main = self.vm["main"]
        for _ in range(warmup):
            main(*args)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            main(*args)
            times.append(time.perf_counter() - t0)
        return times

    # --- saving and loading ------------------------------------------------------------------
    def save(self, path: str) -> str:
        """Write the artifact to ``path`` atomically (a temporary folder renamed at the end)."""
        path = os.path.abspath(path)
        parent = os.path.dirname(path)
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".braze-", dir=parent)
        try:
            if self._executable is not None:
                with tvm_scope_logs_filtered():
                    self._executable.export_library(os.path.join(tmp, LIB))
            else:
                shutil.copyfile(self._lib_path, os.path.join(tmp, LIB))
            # the library's digest lets a loader refuse a damaged lib.so before TVM maps it
            manifest = {**self.manifest, "lib_sha256": _sha256(os.path.join(tmp, LIB))}
            with open(os.path.join(tmp, MANIFEST), "w") as f:
                json.dump(manifest, f, indent=2)
            with open(os.path.join(tmp, IR), "w") as f:
                f.write(self.ir_text)
            if os.path.isdir(path):
                shutil.rmtree(path)
            os.replace(tmp, path)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return path


def load(path: str, check_target: bool = True) -> Artifact:
    """Load an artifact folder; ArtifactError if it is corrupt or mismatched."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise ArtifactError(f"{path}: no such artifact (expected a folder written by `braze compile`)")
    try:
        with open(os.path.join(path, MANIFEST)) as f:
            manifest = json.load(f)
        with open(os.path.join(path, IR)) as f:
            ir_text = f.read()
    except FileNotFoundError as e:
        raise ArtifactError(f"{path}: incomplete artifact, {os.path.basename(e.filename)} is missing") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ArtifactError(f"{path}: corrupt manifest.json ({e})") from None
    if not os.path.isfile(os.path.join(path, LIB)):
        raise ArtifactError(f"{path}: incomplete artifact, {LIB} is missing")
    check_manifest(manifest, path, check_target)
    lib = os.path.join(path, LIB)
    if manifest.get("lib_sha256") not in (None, _sha256(lib)):
        raise ArtifactError(f"{lib}: the compiled library is corrupt (its SHA-256 differs from the manifest's); "
                            "rebuild it with `braze compile`")
    return Artifact(manifest, ir_text, lib_path=lib)


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def check_manifest(manifest: dict, path: str, check_target: bool) -> None:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArtifactError(f"{path}: not a braze artifact of format {FORMAT}")
    rebuild = "rebuild it with `braze compile`"
    for key, have in (("braze", __version__), ("tvm", tvm_version())):
        if manifest.get(key) != have:
            raise ArtifactError(f"{path}: built with {key} {manifest.get(key)}, this is {key} {have}; {rebuild}")
    if check_target:
        from ..targets import host_cpu

        want, host = manifest.get("target", {}), host_cpu()
        if want.get("kind") != host.kind or want.get("mcpu") != host.mcpu:
            raise ArtifactError(f"{path}: built for target {want.get('name')} ({want.get('kind')} "
                                f"{want.get('mcpu')}), this machine is {host.kind} {host.mcpu}; {rebuild}")


def _first_line(e: Exception) -> str:
    lines = [l for l in str(e).splitlines() if l.strip()]
    return lines[-1] if lines else type(e).__name__
