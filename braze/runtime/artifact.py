"""The artifact: ``NAME.braze/`` with ``lib.so``, ``manifest.json`` and the
final IR text ``model.mlir``. Saved atomically; loading checks versions and
target before anything runs."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time

import numpy as np

from ..errors import ArtifactError, InputError, last_line
from .folder import check_output_path  # noqa: F401  (the CLI checks its -o with it)
from .folder import MANIFEST, TEMP_PREFIX, library_key, linker, remove_stale_temps, sha256
from .manifest import REBUILD, cannot_run, check_manifest
from .quiet import tvm_scope_logs_filtered

LIB, IR = "lib.so", "model.mlir"


class Artifact:
    """A compiled model, what ``braze.compile`` returns and ``braze.load``
    reads: ``run({name: array}) -> {name: array}``; ``inputs`` and
    ``outputs`` (name, shape, dtype), ``kernels``, ``manifest``;
    ``save(path)`` writes the deployable folder (docs/usage.md, "The
    artifact").

    Example::

        art = braze.compile("model.onnx")
        art.save("model.braze")
        print(art.inputs, art.outputs, len(art.kernels))
    """

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

    @property
    def gears(self) -> list[dict]:
        """The gears it was compiled for (name, dims, function, inputs,
        outputs, kernels); empty for a compile with one shape."""
        return self.manifest.get("gears") or []

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

            from ..threads import apply_threads, note_pool_started

            apply_threads(self.manifest.get("threads"))
            note_pool_started()
            # a CUDA artifact's kernels run on the GPU, its VM on the CPU
            devices = [self.device, tvm.cpu()] if self._on_gpu else self.device
            problem = cannot_run(self.manifest)  # also a model compiled here for another machine
            if problem:
                raise ArtifactError(f"cannot run a model {problem}")
            with tvm_scope_logs_filtered():
                self._vm = relax.VirtualMachine(self._library(), devices)
        return self._vm

    @property
    def device(self):
        """Where the kernels run: the first CUDA GPU for a CUDA target, else the CPU."""
        import tvm

        return tvm.cuda(0) if self._on_gpu else tvm.cpu()

    @property
    def _on_gpu(self) -> bool:
        return self.manifest.get("target", {}).get("kind") == "cuda"

    def _library(self):
        import tvm

        if self._executable is not None:
            return self._executable
        key = library_key(self._lib_path, self.manifest.get("lib_sha256"))
        if key in _LIBRARIES:
            return _LIBRARIES[key]
        try:
            library = tvm.runtime.load_module(self._lib_path)
        except Exception as e:
            raise ArtifactError(f"{self._lib_path}: the compiled library is corrupt and cannot be "
                                f"loaded ({last_line(e)}); rebuild it with `braze compile`") from None
        _LIBRARIES[key] = library
        return library

    def gear_for(self, inputs: dict) -> dict | None:
        """The gear whose input shapes ``inputs`` have (None without gears);
        InputError listing the gears if none has."""
        return self._prepare(inputs)[0] if self.gears else None

    def _prepare(self, inputs: dict) -> tuple[dict, list[np.ndarray], int | None]:
        """(the gear or graph to run, the input arrays, the real batch size
        when they were padded up to the gear's; else None)."""
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
        entry, batch = self._entry(inputs)
        arrays = []
        for spec in entry["inputs"]:
            a = np.asarray(inputs[spec["name"]])
            if batch is not None:  # the last sample repeated: no special values in the padding
                a = np.concatenate([a, np.repeat(a[-1:], spec["shape"][0] - batch, axis=0)])
            if list(a.shape) != list(spec["shape"]):
                raise InputError(f"input '{spec['name']}' has shape {list(a.shape)}, expected {spec['shape']}")
            if str(a.dtype) != spec["dtype"]:
                raise InputError(f"input '{spec['name']}' has dtype {a.dtype}, expected {spec['dtype']}")
            arrays.append(np.ascontiguousarray(a).reshape(a.shape))  # (ascontiguousarray makes 0-d 1-d)
        return entry, arrays, batch

    def _entry(self, inputs: dict) -> tuple[dict, int | None]:
        """The graph to run: the gear whose input shapes the inputs have;
        with ``pad_batch``, else the smallest gear with a larger batch (and
        the inputs' batch, to pad from)."""
        if not self.gears:
            return {"function": "main", "inputs": self.inputs, "outputs": self.outputs}, None
        shapes = {k: list(np.shape(v)) for k, v in inputs.items()}
        for gear in self.gears:
            if all(shapes[spec["name"]] == list(spec["shape"]) for spec in gear["inputs"]):
                return gear, None
        if self.manifest.get("pad_batch"):
            batches = {s[0] if s else None for s in shapes.values()}
            batch = batches.pop() if len(batches) == 1 else None
            fits = [g for g in self.gears if batch is not None and all(
                shapes[s["name"]][1:] == list(s["shape"][1:]) and s["shape"][0] > batch for s in g["inputs"])]
            if fits:
                return min(fits, key=lambda g: g["inputs"][0]["shape"][0]), batch
        given = ", ".join(f"{k} {v}" for k, v in shapes.items())
        padded = " (--pad-batch: none with a larger batch and these other dimensions)" \
            if self.manifest.get("pad_batch") else ""
        listed = "; ".join(f"{g['name']} (" + ", ".join(f"{i['name']} {i['shape']}" for i in g["inputs"]) + ")"
                           for g in self.gears)
        raise InputError(f"the input shapes ({given}) match no gear of this artifact{padded}; its gears: {listed}. "
                         "Compile a gear for this shape, or pad the input to a gear's shape")

    def run(self, inputs: dict) -> dict[str, np.ndarray]:
        """Run the model once.

        Args:
            inputs: ``{input name: numpy array}``, every input of the model
                (of a gear's shapes, when the artifact has gears).

        Returns:
            ``{output name: numpy array}``, in the model's output order.

        Raises:
            InputError: a missing or unknown input, or a shape or dtype the
                artifact was not compiled for (it names the input).

        Example::

            outputs = braze.load("model.braze").run({"x": x})
        """
        import tvm

        entry, arrays, batch = self._prepare(inputs)
        result = self.vm[entry["function"]](*[tvm.runtime.tensor(a, self.device) for a in arrays])
        outputs = entry["outputs"]
        values = [v.numpy() for v in ([result] if len(outputs) == 1 else list(result))]
        if batch is not None:  # the padding sliced off, along each output's batch axis
            axes = self.manifest["pad_batch"]["output_axes"]
            values = [np.take(v, range(batch), axis=axis) for v, axis in zip(values, axes)]
        return {spec["name"]: v for spec, v in zip(outputs, values)}

    def runner(self, inputs: dict):
        """A function that runs the model once on ``inputs``, already on the
        device, and returns when it is done (a GPU returns before its kernels
        finish: it waits for them): what timing loops call."""
        import tvm

        device = self.device
        entry, arrays, _ = self._prepare(inputs)
        args = [tvm.runtime.tensor(a, device) for a in arrays]
        main = self.vm[entry["function"]]
        return lambda: (main(*args), device.sync())

    def time_run(self, inputs: dict, repeat: int = 10, warmup: int = 2) -> list[float]:
        """Seconds per run, ``repeat`` times after ``warmup`` runs."""
        run = self.runner(inputs)
        for _ in range(warmup):
            run()
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            run()
            times.append(time.perf_counter() - t0)
        return times

    def kernel_times(self, inputs: dict, repeat: int = 5) -> dict[str, list[float]]:
        """Seconds of every kernel call over ``repeat`` runs (after one warm-up),
        by kernel symbol in the order they first ran, from the VM's
        instrumentation hook (each kernel waited for on a GPU)."""
        import tvm

        entry, prepared, _ = self._prepare(inputs)
        arrays = [tvm.runtime.tensor(a, self.device) for a in prepared]
        vm = self.vm
        main = vm[entry["function"]]
        sync = self.device.sync if self._on_gpu else (lambda: None)
        samples: dict[str, list[float]] = {}
        start = {}

        def instrument(func, symbol, before, ret, *args):
            sync()
            if before:
                start[symbol] = time.perf_counter()
            else:
                samples.setdefault(symbol, []).append(time.perf_counter() - start[symbol])
            return 0

        main(*arrays)  # warm-up
        vm.set_instrument(tvm.runtime.convert(instrument) if hasattr(tvm.runtime, "convert") else instrument)
        try:
            for _ in range(repeat):
                main(*arrays)
        finally:
            vm.set_instrument(None)
        return samples

    # --- saving and loading ------------------------------------------------------------------
    def save(self, path: str) -> str:
        """Write the artifact to ``path`` atomically: a temporary folder beside it,
        renamed at the end. An existing artifact there is replaced; any other file
        or folder is left alone (ArtifactError)."""
        path = os.path.abspath(path)
        parent = os.path.dirname(path)
        check_output_path(path)
        link = linker(self.manifest, path) if self._executable is not None else {}
        try:
            os.makedirs(parent, exist_ok=True)
            remove_stale_temps(parent)
            tmp = tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-", dir=parent)
        except OSError as e:
            raise ArtifactError(f"{path}: cannot write the artifact here ({e.strerror or e})") from None
        try:
            if self._executable is not None:
                with tvm_scope_logs_filtered():
                    self._executable.export_library(os.path.join(tmp, LIB), **link)
            else:
                shutil.copyfile(self._lib_path, os.path.join(tmp, LIB))
            # the library's digest lets a loader refuse a damaged lib.so before TVM maps it
            manifest = {**self.manifest, "lib_sha256": sha256(os.path.join(tmp, LIB))}
            with open(os.path.join(tmp, MANIFEST), "w") as f:
                json.dump(manifest, f, indent=2)
            with open(os.path.join(tmp, IR), "w") as f:
                f.write(self.ir_text)
            if os.path.isdir(path):
                shutil.rmtree(path)
            os.replace(tmp, path)
        except BaseException as e:
            shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(e, OSError):
                raise ArtifactError(f"{path}: cannot write the artifact ({e.strerror or e})") from None
            raise
        return path


def load(path: str, check_target: bool = True, spin=None) -> Artifact:
    """Load an artifact folder; ArtifactError if it is corrupt or mismatched.

    ``spin`` (``"off"``, ``"short"`` (braze's default), ``"long"`` or a count):
    how long TVM's idle workers keep spinning after each kernel; one setting
    per process, chosen before its first run (braze.threads).

    Args:
        path: the folder ``braze compile -o`` or ``Artifact.save`` wrote.
        check_target: refuse an artifact built for a CPU feature this one
            lacks (True), rather than let it stop on an illegal instruction.
        spin: as above; None keeps the process's setting.

    Returns:
        Artifact: ``.run(inputs)``, ``.inputs``, ``.outputs``, ``.kernels``.

    Raises:
        ArtifactError: the folder is missing, corrupt, of another format or
            TVM version, or built for a CPU feature this machine lacks.

    Example::

        outputs = braze.load("model.braze").run({"x": x})
    """
    path = os.fspath(path)
    if spin is not None:
        from ..threads import set_spin

        set_spin(spin)
    if not os.path.isdir(path):
        what = "is a file, not an artifact" if os.path.exists(path) else "no such artifact"
        raise ArtifactError(f"{path}: {what} (expected a folder written by `braze compile`)")
    try:
        with open(os.path.join(path, MANIFEST)) as f:
            manifest = json.load(f)
        with open(os.path.join(path, IR)) as f:
            ir_text = f.read()
    except FileNotFoundError as e:
        raise ArtifactError(f"{path}: incomplete artifact, {os.path.basename(e.filename)} is missing; "
                            f"{REBUILD}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ArtifactError(f"{path}: corrupt manifest.json ({e}); {REBUILD}") from None
    if not os.path.isfile(os.path.join(path, LIB)):
        raise ArtifactError(f"{path}: incomplete artifact, {LIB} is missing; {REBUILD}")
    check_manifest(manifest, path, check_target)
    lib = os.path.join(path, LIB)
    if manifest.get("lib_sha256") not in (None, sha256(lib)):
        raise ArtifactError(f"{lib}: the compiled library is corrupt (its SHA-256 differs from the manifest's); "
                            "rebuild it with `braze compile`")
    return Artifact(manifest, ir_text, lib_path=lib)


#: Libraries loaded by this process. TVM never frees a loaded library's executable
#: (its weights stay in memory), so loading the same artifact again reuses it
#: instead of holding a second copy.
_LIBRARIES: dict[tuple, object] = {}
