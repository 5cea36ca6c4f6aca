"""One meta_schedule tuning session: how braze drives TVM's search.

``Session`` sets meta_schedule up once for a ``braze tune`` run; its
``search`` tunes one workload into the database and reports each measured
batch as a ``Progress``. What to tune and what the database holds are in
tuning.py.

Three choices differ from meta_schedule's defaults, all for time on small
machines: candidates are built in this process (``LocalBuilder`` starts a
process pool per batch whose workers re-import TVM's tensor intrinsics, tens
of seconds, for builds of 0.1 s); only the host's tensor intrinsics are
registered; and the evolutionary search's population shrinks for runs of a
few trials. Candidates still run in the runner's worker process, so a
kernel that crashes does not take the session with it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass

import tvm

from ..errors import TuningError, last_line

#: Candidates per batch: one search, then as many builds and timed runs.
BATCH = 32


@dataclass
class Progress:
    """What the progress callback is told when a workload starts and after
    each measured batch."""

    task: int  # 1-based
    tasks: int
    kernel: str
    kernels: int  # kernels sharing this workload
    trials: int  # measured for this workload so far, this run
    task_trials: int  # planned for this workload
    done: int  # measured over all workloads, this run
    planned: int
    best_ms: float | None
    elapsed_s: float
    flops: float = 0.0
    errors: int = 0  # candidates that did not build or run
    servers: str = ""  # remote tuning: "on 1 (of 2) 'KEY' server(s)" (tools/tune.py fills it in)

    @property
    def left_s(self) -> float | None:
        return self.elapsed_s / self.done * (self.planned - self.done) if self.done else None

    def line(self) -> str:
        """One line for a terminal: the kernel, its trials and best time so
        far, a bar of all trials, the time left."""
        best = f", best {self.best_ms:.4g} ms" if self.best_ms else ""
        if self.best_ms and self.flops:
            best += f" ({self.flops / self.best_ms / 1e6:.1f} GFLOP/s)"
        shared = f" (x{self.kernels})" if self.kernels > 1 else ""
        failed = f", {self.errors} failed" if self.errors else ""
        filled = int(20 * self.done / max(self.planned, 1))
        left = "time left: after the first batch" if self.left_s is None else f"{_clock(self.left_s)} left"
        where = f", {self.servers}" if self.servers else ""
        return (f"kernel {self.task}/{self.tasks} {self.kernel}{shared}: {self.trials}/{self.task_trials} trials"
                f"{failed}{best} [{'#' * filled}{'.' * (20 - filled)}] {self.done}/{self.planned}{where}, {left}")


def _clock(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"


def mean(values) -> float:
    values = [float(v) for v in values or []]
    return sum(values) / len(values) if values else float("nan")


class Session:
    """meta_schedule set up for one run (a context manager): candidates
    measured with ``threads`` threads (TVM_NUM_THREADS for the runner's
    worker), its logs in ``log_dir`` rather than on the console, and Ctrl-C
    noted in ``interrupted`` (TVM reports a KeyboardInterrupt raised inside
    its loop as a RuntimeError)."""

    def __init__(self, log_dir: str, threads: int, runner=None, builder=None):
        self.log_dir, self.threads = log_dir, max(1, threads)
        # factories, called once meta_schedule is set up: remote.py's RPC runner, a LocalBuilder
        self.make_runner, self.make_builder = runner, builder
        self.interrupted, self.saved_sigint = False, None

    def __enter__(self) -> "Session":
        _check_dependencies()
        light_intrinsics()
        from tvm.s_tir import meta_schedule as ms

        self.ms = ms
        if threading.current_thread() is threading.main_thread():
            self.saved_sigint = signal.getsignal(signal.SIGINT)
            signal.signal(signal.SIGINT, self._on_sigint)
        self.saved_threads = os.environ.get("TVM_NUM_THREADS")
        os.environ["TVM_NUM_THREADS"] = str(self.threads)
        os.makedirs(self.log_dir, exist_ok=True)
        self.logger = logging.getLogger("tvm.s_tir.meta_schedule")
        self.saved_logger = (self.logger.level, self.logger.propagate, list(self.logger.handlers))
        handler = logging.FileHandler(os.path.join(self.log_dir, "tune.log"))
        handler.setFormatter(logging.Formatter("%(asctime)s [%(levelname)s] %(name)s: %(message)s"))
        self.logger.handlers = [handler]
        self.logger.setLevel(logging.INFO)
        self.logger.propagate = False
        self.builder = self.make_builder() if self.make_builder else _builder()
        self.runner = self.make_runner() if self.make_runner else ms.runner.LocalRunner(timeout_sec=60)
        return self

    def __exit__(self, *exc) -> bool:
        if self.saved_sigint is not None:
            signal.signal(signal.SIGINT, self.saved_sigint)
        for h in self.logger.handlers:
            h.close()
        self.logger.level, self.logger.propagate, self.logger.handlers = self.saved_logger
        if self.saved_threads is None:
            os.environ.pop("TVM_NUM_THREADS", None)
        else:
            os.environ["TVM_NUM_THREADS"] = self.saved_threads
        return False

    def _on_sigint(self, signum, frame):
        if self.saved_sigint == signal.SIG_IGN:
            return
        self.interrupted = True
        if callable(self.saved_sigint):
            self.saved_sigint(signum, frame)
        raise KeyboardInterrupt

    def search(self, mod: tvm.IRModule, name: str, target: tvm.target.Target, database, trials: int,
               state: Progress, started: float, report=None, seed: int | None = None) -> None:
        """Up to ``trials`` measured candidates of workload ``mod`` into
        ``database`` (a meta_schedule Database), updating ``state`` and
        calling ``report(state)`` after each batch. KeyboardInterrupt on
        Ctrl-C; a TuningError if meta_schedule fails."""
        ms = self.ms
        batch = min(trials, BATCH)
        # meta_schedule's 512 candidates per evolutionary round for full batches, fewer for
        # a run of a few trials (which would otherwise spend most of its time searching)
        strategy = ms.search_strategy.EvolutionarySearch(population_size=min(512, max(64, 16 * batch)))
        context = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply",
                                 search_strategy=strategy, task_name=name,
                                 rand_state=-1 if seed is None else seed, num_threads=self.threads,
                                 logger=logging.getLogger(f"tvm.s_tir.meta_schedule.{name}"))
        try:
            ms.tune.tune_tasks(tasks=[context], task_weights=[1.0], work_dir=self.log_dir, max_trials_global=trials,
                               max_trials_per_task=trials, num_trials_per_iter=batch, builder=self.builder,
                               runner=self.runner, database=database, cost_model="xgb",
                               measure_callbacks=ms.MeasureCallback.create("default")
                               + [_reporter(state, started, report)],
                               task_scheduler="round-robin")
        except Exception as e:  # noqa: BLE001 -- TVM's FFI turns a Ctrl-C inside its loop into RuntimeError
            if self.interrupted:
                raise KeyboardInterrupt from None
            raise TuningError(f"meta_schedule failed on kernel {name} ({last_line(e)}); "
                              "the records measured before it are kept") from None


def _reporter(state: Progress, started: float, report):
    """A measure callback that counts the batch's trials into ``state``."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    @derived_object
    class Report(PyMeasureCallback):
        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
            for r in runner_results:
                if r.run_secs is None:
                    state.errors += 1
                    continue
                ms = 1e3 * mean(r.run_secs)
                state.best_ms = ms if state.best_ms is None else min(state.best_ms, ms)
            state.trials += len(runner_results)
            state.done += len(runner_results)
            state.elapsed_s = time.perf_counter() - started
            if report:
                report(dataclasses.replace(state))  # a snapshot: the caller may keep it

    return Report()


def _builder():
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
    from tvm.s_tir.meta_schedule.builder.local_builder import default_export
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    @derived_object
    class InProcessBuilder(PyBuilder):
        """Builds each candidate here, as LocalBuilder's workers would."""

        def build(self, build_inputs):
            results = []
            for b in build_inputs:
                try:
                    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(b.mod)
                    results.append(BuilderResult(default_export(tvm.tirx.build(mod, b.target)), None))
                except Exception as e:  # noqa: BLE001 -- a candidate TVM cannot build is a failed trial
                    results.append(BuilderResult(None, f"{type(e).__name__}: {last_line(e)}"))
            return results

    return InProcessBuilder()


def _check_dependencies() -> None:
    import importlib.util

    missing = [m for m in ("xgboost", "cloudpickle", "psutil") if importlib.util.find_spec(m) is None]
    if missing:
        raise TuningError(f"tuning needs {', '.join(missing)} (meta_schedule's cost model and process pool): "
                          f"pip install {' '.join(missing)}")


def light_intrinsics() -> None:
    """Register only the host's tensor intrinsics before meta_schedule
    imports ``tvm.s_tir.tensor_intrin`` (whose package import registers
    every target's, CUDA's included). A later explicit import of another
    submodule still works."""
    import importlib
    import importlib.util
    import platform
    import types

    name = "tvm.s_tir.tensor_intrin"
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    package = types.ModuleType(name, "Tensor intrinsics: the host's only (see braze.codegen.search).")
    package.__path__ = list(spec.submodule_search_locations)
    package.__package__ = name
    sys.modules[name] = package
    machine = platform.machine().lower()
    host = {"x86_64": "x86", "amd64": "x86", "i686": "x86", "aarch64": "arm_cpu", "arm64": "arm_cpu"}.get(machine)
    if host:
        setattr(package, host, importlib.import_module(f"{name}.{host}"))
