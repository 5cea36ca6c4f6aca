"""Timing engines alone: each engine (a braze artifact, an onnxruntime
session) in a worker process of its own, in alternating phases, and no
phase starts before every worker is measured idle.

Why so much care: a runtime's pool threads keep spinning after a run (TVM's
at its own spin count, threads.py; onnxruntime's too). On a
machine with few cores, an engine timed while the other's threads spin
loses a core to them, and the ratio says more about the order of the runs
than about the engines. So:

1. every engine loads in its own process (``spawn``), and runs a few
   times; the phases are spread over several such processes per engine
   (``processes``), started afresh in generations;
2. phases alternate between the engines, the order rotating each phase
   (A B, B A, A B...: a slow drift of the machine hits both sides alike);
3. before each phase, the harness reads the CPU time of every worker, and
   its own (``/proc/PID/task/*/schedstat``, in nanoseconds), until a whole
   window passes with all of them together under ``IDLE_SHARE`` of one
   core;
4. a phase warms up (``warmup`` calls and ``WARMUP_S`` at least: the first
   calls after a pause find cold caches and sleeping threads), then times
   ``runs`` calls back to back, as a user's loop would (more, when that
   many take less than ``MIN_PHASE_S``);
5. each engine's figure is the median of all its timed calls, with the
   quartiles and the per-phase medians; a ratio is the median of the
   per-phase ratios (each phase against the other engine's phase of the
   same round: a shared machine's speed drifts over seconds, and a drift
   moves both phases of a round alike), with their range.

The machine's other load (CPU busy outside the timed worker during its
phase, from ``/proc/stat``) is recorded too: a control that strays from
1.00 usually shows it.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import BrazeError

#: A worker is idle when, over one window, all workers together used less
#: than this share of one core (the bar braze's own runtime meets after a run).
IDLE_WINDOW_S = 0.05
IDLE_SHARE = 0.02
IDLE_TIMEOUT_S = 10.0
#: A phase warms up for at least this long (after a pause, the first calls find
#: cold caches and sleeping cores, slow for a few milliseconds), and
#: times at least this long (a short phase is at the mercy of one burst of
#: the machine's other load).
WARMUP_S = 0.02
MIN_PHASE_S = 0.05
#: After its last phase, each worker's CPU time is read over this long: what
#: its idle threads burn after a run (braze's default keeps it near zero).
PROBE_S = 0.5


@dataclass(frozen=True)
class Engine:
    """What one worker runs: ``kind`` is ``braze`` (``source`` an artifact
    folder) or ``onnxruntime`` (``source`` an .onnx file). ``spin`` sets a
    braze worker's idle spin (braze.threads)."""

    kind: str
    source: str
    label: str = ""
    spin: str | int | None = None

    @property
    def name(self) -> str:
        return self.label or self.kind


# --- CPU time of a process, all its threads ---------------------------------------------------
def cpu_seconds(pid: int, skip_thread: int | None = None) -> float:
    """CPU time used so far by every thread of process ``pid`` (but the thread
    ``skip_thread``, a native thread id): the scheduler's nanosecond counters
    where Linux has them, else psutil's (in clock ticks, every thread)."""
    tasks = Path(f"/proc/{pid}/task")
    try:
        total = 0
        for task in tasks.iterdir():
            if task.name == str(skip_thread):
                continue
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):  # a thread that just ended
                continue
        return total / 1e9
    except OSError:
        import psutil

        t = psutil.Process(pid).cpu_times()
        return t.user + t.system


def machine_busy_seconds() -> float:
    """CPU time the whole machine has spent busy (all cores, since boot)."""
    import psutil

    t = psutil.cpu_times()  # (guest time is part of user time: not added again)
    return sum(getattr(t, f, 0.0) for f in ("user", "nice", "system", "irq", "softirq", "steal"))


def wait_idle(pids: list[int], window: float = IDLE_WINDOW_S, share: float = IDLE_SHARE,
              timeout: float = IDLE_TIMEOUT_S) -> tuple[float, bool]:
    """Wait until the processes ``pids`` together use less than ``share`` of
    one core over a ``window``. Returns (seconds waited, whether they went
    idle before ``timeout``). The calling thread's own time (reading the
    counters) is left out when ``pids`` holds this process."""
    me = threading.get_native_id()

    def used() -> float:
        return sum(cpu_seconds(p, me if p == os.getpid() else None) for p in pids)

    start = time.perf_counter()
    before = used()
    while True:
        time.sleep(window)
        after = used()
        if after - before < share * window:
            return time.perf_counter() - start, True
        if time.perf_counter() - start > timeout:
            return time.perf_counter() - start, False
        before = after


# --- the workers ----------------------------------------------------------------------------------
def _runner(engine: Engine, threads: int, inputs: dict):
    """A function that runs the engine once, loaded in this (worker) process."""
    if engine.kind == "braze":
        os.environ["TVM_NUM_THREADS"] = str(threads)  # before TVM starts its pool
        from .runtime import load

        return load(engine.source, spin=engine.spin).runner(inputs)
    if engine.kind == "onnxruntime":
        from .reference import ort_session

        sess = ort_session(engine.source, threads).session  # timed without the error wrapper
        return lambda: sess.run(None, inputs)
    raise BrazeError(f"unknown engine kind '{engine.kind}' (braze or onnxruntime)")


def _timed(run) -> float:
    t0 = time.perf_counter()
    run()
    return time.perf_counter() - t0


def _worker(engine: Engine, threads: int, inputs: dict, conn) -> None:
    """Runs in its own process: load, run a few times (the estimate of one
    run's time goes back with the pid), then run phases on request."""
    try:
        run = _runner(engine, threads, inputs)
        estimate = sorted(_timed(run) for _ in range(3))[1]
        conn.send(("ready", (os.getpid(), estimate)))
        while True:
            request = conn.recv()
            if request is None:
                return
            warmup, runs, gap = request
            start, done = time.perf_counter(), 0
            while done < warmup or time.perf_counter() - start < WARMUP_S:
                run()
                done += 1
            times = []
            for _ in range(runs):
                if gap:
                    time.sleep(gap)
                t0 = time.perf_counter()
                run()
                times.append(time.perf_counter() - t0)
            conn.send(("times", times))
    except BaseException as e:  # report, never hang the parent
        conn.send(("error", f"{type(e).__name__}: {e}"))


def _expect(conn, tag: str, name: str):
    try:
        got, payload = conn.recv()
    except EOFError:
        raise BrazeError(f"{name} benchmark worker exited before it answered (it crashed or could not start; "
                         "run the engine alone to see why)") from None
    if got != tag:
        raise BrazeError(f"{name} benchmark worker failed: {payload if got == 'error' else got}")
    return payload


# --- results ----------------------------------------------------------------------------------------
def _median(xs):
    return statistics.median(xs)


def _quartiles(xs: list[float]) -> tuple[float, float]:
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


@dataclass
class EngineTimes:
    """One engine's timed calls, phase by phase (seconds)."""

    name: str
    phases: list[list[float]] = field(default_factory=list)
    cpu_after_run_s: float | None = None  # CPU used over PROBE_S after the last phase

    @property
    def all(self) -> list[float]:
        return [t for p in self.phases for t in p]

    @property
    def median_ms(self) -> float:
        return 1e3 * _median(self.all)

    @property
    def phase_medians_ms(self) -> list[float]:
        return [1e3 * _median(p) for p in self.phases]

    def to_dict(self) -> dict:
        q1, q3 = _quartiles(self.all)
        return {"median_ms": self.median_ms, "q1_ms": 1e3 * q1, "q3_ms": 1e3 * q3,
                "min_ms": 1e3 * min(self.all), "max_ms": 1e3 * max(self.all),
                "phase_medians_ms": self.phase_medians_ms, "runs": len(self.all),
                "cpu_after_run_s": self.cpu_after_run_s}


@dataclass(frozen=True)
class Ratio:
    """``a`` over ``b``, phase by phase: each phase of ``a`` over the phase of
    ``b`` in the same round (minutes apart at most, seconds usually), so that
    the machine's slow swings, which move both alike, cancel. ``value`` is the
    median of those ratios, ``low``-``high`` their range."""

    value: float
    low: float
    high: float

    def within(self, tolerance: float) -> bool:
        return abs(self.value - 1.0) <= tolerance

    def to_dict(self) -> dict:
        return {"ratio": self.value, "ratio_min": self.low, "ratio_max": self.high}

    def __str__(self) -> str:
        return f"{self.value:.3f} (phases {self.low:.3f}-{self.high:.3f})"


@dataclass
class Timing:
    engines: dict[str, EngineTimes]
    threads: int
    warmup: int
    idle_waits_s: list[float]
    idle_timeouts: int
    background_cores: list[float]
    processes: int = 1

    def ratio(self, a: str, b: str) -> Ratio:
        ea, eb = self.engines[a], self.engines[b]
        per_phase = [x / y for x, y in zip(ea.phase_medians_ms, eb.phase_medians_ms)]
        return Ratio(_median(per_phase), min(per_phase), max(per_phase))

    def method(self) -> dict:
        """How the figures were taken, for reports."""
        return {"phases": len(next(iter(self.engines.values())).phases), "processes_per_engine": self.processes,
                "warmup_per_phase": f"{self.warmup} runs and {WARMUP_S} s at least",
                "idle_wait_max_s": max(self.idle_waits_s, default=0.0),
                "idle_timeouts": self.idle_timeouts,
                "background_cores": _median(self.background_cores) if self.background_cores else 0.0}


# --- the harness --------------------------------------------------------------------------------------
class _Workers:
    """One worker process per engine, loaded and ready; stopped on exit."""

    def __init__(self, engines: list[Engine], threads: int, inputs: dict):
        ctx = mp.get_context("spawn")
        self.procs, self.conns, self.pids, self.estimates = {}, {}, {}, {}
        try:
            for engine in engines:
                parent, child = ctx.Pipe()
                proc = ctx.Process(target=_worker, args=(engine, threads, inputs, child), daemon=True)
                proc.start()
                child.close()  # the worker's end: a worker that dies is then an EOF here, not a hang
                self.procs[engine.name], self.conns[engine.name] = proc, parent
            for name, conn in self.conns.items():
                self.pids[name], self.estimates[name] = _expect(conn, "ready", name)
        except BaseException:
            self.stop()
            raise

    def phase(self, name: str, warmup: int, runs: int, gap: float) -> list[float]:
        self.conns[name].send((warmup, runs, gap))
        return _expect(self.conns[name], "times", name)

    def stop(self) -> None:
        for name, proc in self.procs.items():
            try:
                self.conns[name].send(None)
            except (BrokenPipeError, OSError):
                pass
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def time_alone(engines: list[Engine], inputs: dict, threads: int, phases: int = 10, runs: int = 5,
               warmup: int = 2, gap: float = 0.0, processes: int = 3) -> Timing:
    """Time each engine in ``phases`` phases of ``runs`` calls (more when
    that many take less than ``MIN_PHASE_S``), one engine at a time, each
    phase starting once every worker is idle (module docstring).

    The phases are spread over ``processes`` generations of workers: each
    generation starts a fresh process per engine: on a shared VM one process
    can run at its own speed for its whole life (placement, page layout),
    and over several processes such a one moves the medians little.

    ``gap`` sleeps that long before each timed call (a request pattern with
    pauses, instead of back to back)."""
    names = [e.name for e in engines]
    if len(set(names)) != len(names):
        raise BrazeError(f"engine names must differ: {names}")
    result = Timing({n: EngineTimes(n) for n in names}, threads, warmup, [], 0, [])
    generations = max(1, min(processes, phases))
    result.processes = generations
    p = 0
    for g in range(generations):
        with _Workers(engines, threads, inputs) as workers:
            per_phase = {n: max(runs, math.ceil(MIN_PHASE_S / max(est, 1e-6))) for n, est in workers.estimates.items()}
            for _ in range(phases * (g + 1) // generations - phases * g // generations):
                k = p % len(names)
                for name in names[k:] + names[:k]:
                    _one_phase(result, workers, name, warmup, per_phase[name], gap, probe=p == phases - 1)
                p += 1
    return result


def _one_phase(result: Timing, workers: _Workers, name: str, warmup: int, runs: int, gap: float,
               probe: bool) -> None:
    """Wait for quiet, time one phase of ``name``, note the machine's other
    load meanwhile and, when ``probe``, the worker's CPU use after it."""
    pid = workers.pids[name]
    waited, idle = wait_idle([os.getpid(), *workers.pids.values()])  # this process's own pool too
    result.idle_waits_s.append(waited)
    result.idle_timeouts += not idle
    busy0, mine0, t0 = machine_busy_seconds(), cpu_seconds(pid), time.perf_counter()
    result.engines[name].phases.append(workers.phase(name, warmup, runs, gap))
    wall = time.perf_counter() - t0
    others = (machine_busy_seconds() - busy0) - (cpu_seconds(pid) - mine0)
    result.background_cores.append(max(0.0, others / wall))
    if probe:
        before = cpu_seconds(pid)
        time.sleep(PROBE_S)
        result.engines[name].cpu_after_run_s = cpu_seconds(pid) - before
