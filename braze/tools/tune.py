"""``braze tune``: a model's kernels, found as a compile would build them,
searched with meta_schedule into a tuning database (codegen/tuning.py keeps
the database and the search of given kernels; this is the model-level
driver, above the compiler)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from ..codegen.kernel import partition
from ..codegen.tuning import TaskResult, TuningDatabase, find_tasks, tune_workloads
from ..compiler import fuse_only
from ..errors import RemoteError, TuningError
from ..targets import get_target


@dataclass
class TuneReport:
    db: str
    level: int
    trials: int
    results: list[TaskResult] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    records_before: int = 0  # measured candidates of these workloads already in the database
    remote: dict | None = None  # --rpc: {"tracker", "key", "servers", "target"}

    def to_dict(self) -> dict:
        return {"db": self.db, "level": self.level, "trials": self.trials, "seconds": round(self.seconds, 1),
                "tasks": [r.to_dict() for r in self.results],
                "skipped": [{"kernel": k, "reason": why} for k, why in self.skipped],
                "records_before": self.records_before, "records_after": sum(r.trials for r in self.results),
                "workloads_already_tuned": sum(1 for r in self.results if r.skipped), "remote": self.remote}

    def table(self) -> str:
        lines = [f"{'kernel':<40} {'shared':>6} {'MFLOP':>9} {'trials':>6} {'best ms':>9} {'GFLOP/s':>8}"]
        for r in self.results:
            best = f"{r.best_ms:9.4f}" if r.best_ms else f"{'-':>9}"
            rate = f"{r.flops / r.best_ms / 1e6:8.1f}" if r.best_ms and r.flops else f"{'-':>8}"
            lines.append(f"{r.kernels[0]:<40} {len(r.kernels):>6} {r.flops / 1e6:9.2f} {r.trials:>6} {best} {rate}"
                         + (f"  ({r.skipped})" if r.skipped else ""))
        lines.append(f"\n{len(self.results)} workloads ({sum(len(r.kernels) for r in self.results)} kernels) "
                     f"in {self.db}; {len(self.skipped)} kernels left to the rules; {self.seconds:.0f}s")
        return "\n".join(lines)


def tune(model, db: str, level: int = 2, trials: int = 64, kernels=(), everything: bool = False, fusion=None,
         input_shapes=None, target="cpu", threads: int | None = None, progress=None, say=None,
         seed: int | None = None, rpc: str | None = None, key: str | None = None, builders: int = 1,
         resume: bool = False, layout: str = "blocked") -> TuneReport:
    """Tune an ONNX model's kernels (as ``compile`` at ``level`` with the
    same fusion controls would build them) into the database folder ``db``;
    ``braze.compile(model, level=level, tuning_db=db)`` then uses the records.
    ``say(message)`` is told each step, ``progress(Progress)`` each measured batch.

    ``rpc`` (``HOST:PORT`` of a TVM RPC tracker) and ``key``: candidates
    are measured on the tracker's servers of that key (remote.py), for
    ``target`` or, when it is None, for the CPU a server reports.
    ``builders`` > 1 builds candidates in that many processes. ``resume``
    continues a database that must exist, saying what it already holds
    (a run without it resumes too, silently)."""
    say = say or (lambda message: None)
    started = time.perf_counter()
    if resume and not os.path.isdir(db):
        raise TuningError(f"--resume: no tuning database at {db} to continue (drop --resume to start one)")
    remote, tgt, runner = _remote(rpc, key, target, threads, say) if rpc else (None, None, None)
    tgt = tgt or get_target(target or "cpu", threads)
    say(f"importing and fusing at level {level}")
    module, _ = fuse_only(model, level, fusion, input_shapes, tgt, layout=layout)
    found = partition(module.main)
    tasks, skipped = find_tasks(found, kernels, everything)
    where = f"on {remote['servers']} '{key}' server(s) of {rpc}" if remote else f"{tgt.num_cores} thread(s)"
    say(f"{len(found)} kernels: {len(tasks)} workloads to tune ({sum(len(t.kernels) for t in tasks)} kernels), "
        f"{len(skipped)} left to the rules; up to {trials} trials each, {where}, into {db}")
    before = _recorded(db, tasks, tgt, trials)
    if os.path.isdir(db):
        full = sum(1 for n in before if n >= trials)
        say(f"{db}: {full} workloads already have {trials} records, skipped; {len(tasks) - full} to tune "
            f"({sum(before)} records of these workloads kept)")
    if remote:
        progress = _with_servers(progress, rpc, key, remote["servers"])
    results = tune_workloads(tasks, tgt, db, trials, progress, seed, runner=runner, builder=_builder(builders))
    return TuneReport(os.path.abspath(db), level, trials, results, skipped, time.perf_counter() - started,
                      sum(before), remote)


def _remote(rpc: str, key: str | None, target, threads: int | None, say):
    """({"tracker", "key", "servers", "target"}, the Target, the runner
    factory) for tuning on a tracker's servers; RemoteError if it has none."""
    from ..codegen import remote

    tracker = remote.Tracker.parse(rpc, key)
    found = remote.require_servers(tracker)
    say(f"tracker {tracker}: {found.total} '{key}' server(s) ({', '.join(found.addresses)}), {found.free} free")
    if target is None:
        tgt, why = remote.server_target(tracker, threads)
        say(f"target: {why}")
    else:
        tgt = get_target(target, threads)
    info = {"tracker": str(tracker), "key": key, "servers": found.total, "target": tgt.name, "mcpu": tgt.mcpu}
    return info, tgt, (lambda: remote.rpc_runner(tracker, found.total))


def _with_servers(progress, rpc: str, key: str, started: int):
    """``progress`` with the key's servers in use filled in (asked of the
    tracker at most every few seconds: servers come and go mid-tune)."""
    from ..codegen import remote

    if progress is None:
        return None
    tracker, last = remote.Tracker.parse(rpc, key), {"at": 0.0, "text": ""}

    def report(p):
        if time.monotonic() - last["at"] > 2.0:
            try:
                found = remote.servers(tracker)
                left = f" (of {started})" if found.total != started else ""
                last["text"] = f"on {found.total}{left} '{key}' server(s)"
            except RemoteError:
                last["text"] = f"tracker {tracker} not answering"
            last["at"] = time.monotonic()
        p.servers = last["text"]
        progress(p)

    return report


#: Seconds a LocalBuilder worker may take for one candidate; its first one
#: includes starting the worker and importing TVM (tens of seconds on a busy
#: machine, beyond meta_schedule's default of 30).
BUILD_TIMEOUT_S = 180


def _builder(builders: int):
    """meta_schedule's LocalBuilder with ``builders`` processes, or None
    (search.py's in-process builder: a pool costs seconds to start, and
    builds of braze's kernels take tens of milliseconds). Its workers
    register only the host's tensor intrinsics, as this process does."""
    if builders <= 1:
        return None

    def make():
        from tvm.s_tir import meta_schedule as ms

        from ..codegen.search import light_intrinsics

        return ms.builder.LocalBuilder(max_workers=builders, timeout_sec=BUILD_TIMEOUT_S,
                                       initializer=light_intrinsics)

    return make


def _recorded(db: str, tasks, target, trials: int) -> list[int]:
    """Measured records per task already in ``db`` (zeros for a new database)."""
    if not os.path.isdir(db):
        return [0] * len(tasks)
    database = TuningDatabase.open(db, create=True)
    return [len(database.records(t.mod, target, trials)) for t in tasks]
