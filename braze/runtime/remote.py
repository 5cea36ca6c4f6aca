"""An artifact run on another machine, through TVM's RPC: ``braze run``,
``bench`` and ``profile`` with ``--rpc HOST:PORT --key KEY``.

The artifact's ``lib.so`` is the whole model: kernels, the Relax VM
bytecode and the weights (constants of the executable), so it is all that
travels. It is uploaded to a server of the key (the tracker picks a free
one), loaded there, and a Relax VM is made around it on the server's CPU.
Inputs go over as tensors once; times come from the VM's
``time_evaluator`` on the server, so no RPC round trip is inside a
measured run. The server must run the artifact's CPU (``lib.so`` is
native code for the ISA it was built for): the manifest's requirements are
checked against the CPU the server reports before anything is uploaded.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field

import numpy as np

from ..codegen import remote
from ..errors import RemoteError, last_line

#: The file name the library gets in the server's temporary folder.
REMOTE_LIB = "braze_model.so"


@dataclass
class RemoteRun:
    """An artifact loaded on a server: ``run(inputs)``, ``time(inputs)``."""

    tracker: remote.Tracker
    artifact: object  # braze.runtime.Artifact
    session: object
    vm: object
    device: object
    cpu: str = ""  # the server's CPU, as LLVM names it ("" when it cannot say)
    threads: int = 0  # the server's TVM pool size
    notes: list[str] = field(default_factory=list)

    def _entry(self, inputs: dict):
        import tvm

        entry, arrays, _ = self.artifact._prepare(inputs)
        return entry, [tvm.runtime.tensor(a, self.device) for a in arrays]

    def run(self, inputs: dict) -> dict[str, np.ndarray]:
        """The outputs, computed on the server and brought back."""
        entry, args = self._entry(inputs)
        fn = entry["function"]
        try:
            self.vm.set_input(fn, *args)
            self.vm.invoke_stateful(fn)
            result = self.vm.get_outputs(fn)
        except Exception as e:  # noqa: BLE001 -- the server died, or the model failed there
            raise RemoteError(f"running the model on a '{self.tracker.key}' server of {self.tracker} failed "
                              f"({last_line(e)})") from None
        values = list(result) if isinstance(result, tuple) else [result]
        return {spec["name"]: v.numpy() for spec, v in zip(entry["outputs"], values)}

    def time(self, inputs: dict, repeat: int = 50, number: int = 1, min_repeat_ms: int = 0) -> list[float]:
        """Seconds per run on the server: ``repeat`` samples, each the mean
        of ``number`` runs, after a warm-up run (TVM's time_evaluator)."""
        entry, args = self._entry(inputs)
        fn = entry["function"]
        try:
            self.vm.set_input(fn, *args)
            timer = self.vm.time_evaluator("invoke_stateful", self.device, number=number, repeat=repeat,
                                           min_repeat_ms=min_repeat_ms)
            return [float(t) for t in timer(fn).results]
        except Exception as e:  # noqa: BLE001
            raise RemoteError(f"timing the model on a '{self.tracker.key}' server of {self.tracker} failed "
                              f"({last_line(e)})") from None

    def has_function(self, name: str) -> bool:
        try:
            self.session.get_function(name)
            return True
        except Exception:  # noqa: BLE001 -- "Module has no function"
            return False


def load_remote(artifact, tracker: remote.Tracker, threads: int | None = None) -> RemoteRun:
    """``artifact`` (loaded locally: its manifest and lib.so) uploaded to a
    free server of the key and made ready to run there."""
    from tvm import relax

    if artifact.manifest.get("target", {}).get("kind") != "llvm":
        raise RemoteError("running over RPC takes a CPU artifact (this one is built for "
                          f"{artifact.manifest.get('target', {}).get('kind')})")
    session = remote.connect(tracker)
    found = remote.remote_cpu(session)
    notes = []
    if found is None:
        notes.append("the server does not report its CPU: its ISA was not checked against the artifact's")
    else:
        _check_cpu(artifact.manifest, found, tracker)
    notes.append(f"uploaded lib.so ({os.path.getsize(artifact._lib_path) / 1e6:.1f} MB, weights included)")
    try:
        session.upload(artifact._lib_path, REMOTE_LIB)
        library = session.load_module(REMOTE_LIB)
        device = session.cpu(0)
        vm = relax.VirtualMachine(library, device)
    except Exception as e:  # noqa: BLE001 -- TVM's RPC errors: a typed one, with the server's last line
        raise RemoteError(f"loading {artifact._lib_path} on a '{tracker.key}' server of {tracker} failed "
                          f"({last_line(e)})") from None
    pool = int(session.get_function("runtime.NumThreads")())
    if threads:
        if threads > pool:
            notes.append(f"asked for {threads} threads; the server's pool has {pool} (start the server with "
                         f"TVM_NUM_THREADS={threads})")
        session.get_function("runtime.config_threadpool")(1, min(threads, pool))
        pool = min(threads, pool)
    return RemoteRun(tracker, artifact, session, vm, device, found[0] if found else "", pool, notes)


def _check_cpu(manifest: dict, found: tuple[str, str], tracker) -> None:
    """RemoteError if the server's CPU cannot run code built for the manifest's target."""
    from ..targets import detect

    mcpu, triple = found
    built = manifest.get("target", {})
    arch = (manifest.get("requires") or {}).get("arch") or detect.arch(built.get("mtriple") or None)
    if detect.arch(triple) != arch:
        raise RemoteError(f"the '{tracker.key}' servers of {tracker} are {detect.arch(triple)} ({mcpu}); the "
                          f"artifact is built for {arch}: compile it with --target for that CPU")
    if any(str(k.get("schedule") or "").startswith("amx") for k in manifest.get("kernels", [])):
        raise RemoteError(f"the artifact's bfloat16 or int8 matmuls run on AMX tiles, and a TVM RPC server (the "
                          f"'{tracker.key}' servers of {tracker}) does not ask Linux for AMX's tile state: run it "
                          f"where it is (braze run), or compile for the servers without AMX (e.g. --target "
                          f"cpu-avx512)")
    wide = {"avx512f": 512, "avx2": 256}
    needs = max((wide.get(f, 0) for f in (manifest.get("requires") or {}).get("features", [])), default=0)
    if needs > detect.vector_bits(set(), mcpu):
        raise RemoteError(f"the '{tracker.key}' servers of {tracker} are {mcpu}, without the "
                          f"{needs}-bit vectors the artifact is built for: compile it for that CPU "
                          f"(e.g. --target cpu-avx2)")


# --- what braze bench --rpc reports -----------------------------------------------------------------
@dataclass
class RemoteBench:
    tracker: str
    key: str
    cpu: str
    threads: int
    times_ms: list[float]
    onnxruntime: str  # why there is no onnxruntime figure
    notes: list[str] = field(default_factory=list)

    @property
    def braze_ms(self) -> float:
        return statistics.median(self.times_ms)

    def to_dict(self) -> dict:
        q = statistics.quantiles(self.times_ms, n=4) if len(self.times_ms) > 1 else [self.braze_ms] * 3
        return {"braze_ms": self.braze_ms, "onnxruntime_ms": None, "ratio": None, "threads": self.threads,
                "repeat": len(self.times_ms), "braze": {"median_ms": self.braze_ms, "q1_ms": q[0], "q3_ms": q[2]},
                "onnxruntime": self.onnxruntime, "remote": {"tracker": self.tracker, "key": self.key,
                                                            "cpu": self.cpu}, "notes": self.notes}

    def table(self) -> str:
        d = self.to_dict()["braze"]
        where = (f"on a '{self.key}' server of {self.tracker} ({self.cpu or 'CPU not reported'}), "
                 f"{self.threads} thread(s), timed there by TVM's time_evaluator ({len(self.times_ms)} runs):")
        lines = [where,
                 f"braze median {d['median_ms']:.3f} ms (q1-q3 {d['q1_ms']:.3f}-{d['q3_ms']:.3f})",
                 f"onnxruntime: {self.onnxruntime}"]
        return "\n".join(lines + [f"note: {n}" for n in self.notes])


#: Why ``bench --rpc`` has no onnxruntime figure: a TVM RPC server runs packed
#: functions, not Python, so onnxruntime cannot run there through it.
NO_ONNXRUNTIME = ("not available on the remote server (TVM's RPC runs compiled functions, not Python); "
                  "run `braze bench MODEL.onnx` on that machine to compare")


def bench_remote(artifact, tracker: remote.Tracker, inputs: dict, threads: int | None = None,
                 repeat: int = 50, min_run_ms: int = 20) -> RemoteBench:
    """The artifact's latency on a server: ``repeat`` samples, each the
    mean of as many back-to-back runs as fill ``min_run_ms`` (one for a
    slow model), timed there."""
    started = time.perf_counter()
    loaded = load_remote(artifact, tracker, threads)
    loaded.run(inputs)  # a warm-up, and a check that it runs at all
    times = loaded.time(inputs, repeat=repeat, number=1, min_repeat_ms=min_run_ms)
    notes = loaded.notes + [f"upload, load and timing took {time.perf_counter() - started:.1f} s"]
    return RemoteBench(str(tracker), tracker.key, loaded.cpu, loaded.threads, [1e3 * t for t in times],
                       NO_ONNXRUNTIME, notes)


def run_remote(artifact, tracker: remote.Tracker, inputs: dict) -> dict[str, np.ndarray]:
    """The artifact's outputs for ``inputs``, computed on a server of the key."""
    return load_remote(artifact, tracker).run(inputs)

