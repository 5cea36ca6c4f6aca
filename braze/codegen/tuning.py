"""Tuning kernels with TVM's meta_schedule, and compiling with what it found.

``tune_workloads`` (given kernels; ``braze.tools.tune.tune`` finds a model's)
searches schedules and records the measured ones in a tuning database: a folder
holding meta_schedule's two JSON files. ``TuningDatabase.schedule(kernel,
target)`` gives a kernel the best recorded schedule, or None when the
database has no record for it; ``build`` asks it for every kernel before the
rules. How the search itself is driven is in search.py.

A kernel's *workload* is its unscheduled PrimFunc (``kernel.primfunc``:
weights in their original layout, nothing inlined) under the name
``main``: what meta_schedule tunes and what the database is keyed by,
structurally. Kernels of the same shapes and ops share one workload (BERT's
twelve layers tune once), whatever their names, models or fusion levels.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import time
import warnings
from dataclasses import dataclass

import tvm
import tvm_ffi

from ..errors import TuningError, last_line
from ..ir.registry import Kind
from .kernel import Kernel, primfunc
from .search import Progress, Session, mean
from .tvm_target import tvm_target

#: The files of a tuning database, in its folder (meta_schedule's JSON database).
DB_FILES = ("database_workload.json", "database_tuning_record.json")
#: Kernel kinds worth tuning by default; elementwise/injective kernels are
#: memory-bound and the generic rule (parallel, vectorized) is as good as it gets.
TUNED_KINDS = (Kind.ANCHOR, Kind.REDUCE)


def workload(kernel: Kernel) -> tvm.IRModule:
    """The kernel's unscheduled PrimFunc as meta_schedule's workload."""
    kernel.plain_layouts()
    func = primfunc(kernel).with_attr("global_symbol", "main").with_attr("tirx.noalias", True)
    return tvm.IRModule({"main": func})


def _has_blocks(mod: tvm.IRModule) -> bool:
    from tvm import s_tir

    try:
        s_tir.Schedule(mod).get_sblock("root")
        return True
    except Exception:  # noqa: BLE001 -- an extern call (TOPI's sort, ...): nothing to schedule
        return False


def _flops(mod: tvm.IRModule) -> float:
    from tvm.s_tir.analysis import estimate_tir_flops

    try:
        return float(estimate_tir_flops(mod))
    except Exception:  # noqa: BLE001 -- an op TVM cannot count
        return 0.0


# --- what to tune -----------------------------------------------------------------------------
@dataclass
class Task:
    """One workload to tune and the kernels that share it."""

    kernels: list[str]
    mod: tvm.IRModule
    flops: float

    @property
    def name(self) -> str:
        return self.kernels[0]


def find_tasks(kernels: list[Kernel], names=(), everything: bool = False) -> tuple[list[Task], list[tuple[str, str]]]:
    """The distinct workloads among ``kernels`` that are worth tuning,
    heaviest first (FLOPs times the kernels sharing it), and the kernels
    left out with the reason. ``names`` (kernel or ONNX node names) tunes
    exactly those kernels; ``everything`` also tunes elementwise ones."""
    wanted = set(names or ())
    unknown = wanted - {k.name for k in kernels} - {n for k in kernels for n in k.nodes}
    if unknown:
        raise TuningError(f"no kernel named {', '.join(sorted(unknown))} "
                          f"(kernels: {', '.join(k.name for k in kernels[:8])}{', ...' if len(kernels) > 8 else ''}; "
                          "`braze kernels MODEL` lists them all)")
    tasks: dict[int, list[Task]] = {}
    skipped = []
    for k in kernels:
        if wanted and k.name not in wanted and not wanted & set(k.nodes):
            continue
        if not wanted and not everything and k.kind not in TUNED_KINDS:
            skipped.append((k.name, f"{k.kind.value} kernel (tune it with --kernels {k.name} or --all)"))
            continue
        mod = workload(k)
        if not _has_blocks(mod):
            skipped.append((k.name, "an external call: nothing to schedule"))
            continue
        same = tasks.setdefault(tvm_ffi.structural_hash(mod), [])
        twin = next((t for t in same if tvm_ffi.structural_equal(t.mod, mod)), None)
        if twin is not None:
            twin.kernels.append(k.name)
        else:
            same.append(Task([k.name], mod, _flops(mod)))
    found = [t for same in tasks.values() for t in same]
    return sorted(found, key=lambda t: -t.flops * len(t.kernels)), skipped


# --- the database ----------------------------------------------------------------------------
class TuningDatabase:
    """A tuning database folder. ``open`` checks that it exists and loads."""

    def __init__(self, path: str, db):
        self.path, self.db = path, db

    @staticmethod
    def open(path: str, create: bool = False) -> "TuningDatabase":
        from tvm.s_tir import meta_schedule as ms

        path = os.path.abspath(os.fspath(path))
        files = [os.path.join(path, f) for f in DB_FILES]
        if create:
            os.makedirs(path, exist_ok=True)
        elif not os.path.isdir(path):
            raise TuningError(f"{path}: no tuning database here (make one with `braze tune MODEL --db {path}`)")
        elif not all(os.path.isfile(f) for f in files):
            missing = [os.path.basename(f) for f in files if not os.path.isfile(f)]
            raise TuningError(f"{path}: not a tuning database (missing {', '.join(missing)}; "
                              f"`braze tune MODEL --db {path}` writes one)")
        try:
            db = ms.database.JSONDatabase(work_dir=path, allow_missing=create, module_equality="structural")
        except Exception as e:  # noqa: BLE001 -- TVM's JSON reader raises RuntimeError/ValueError
            raise TuningError(f"{path}: corrupt tuning database ({last_line(e)}); "
                              "delete the folder and tune again") from None
        return TuningDatabase(path, db)

    def fingerprint(self) -> str:
        """A digest of the records: part of the compile cache key."""
        digest = hashlib.sha256()
        for name in DB_FILES:
            with open(os.path.join(self.path, name), "rb") as f:
                digest.update(f.read())
        return digest.hexdigest()[:16]

    def records(self, mod: tvm.IRModule, target, limit: int = 1) -> list:
        """The best measured records of a workload for ``target`` (same
        TVM target kind and CPU), fastest first."""
        if not self.db.has_workload(mod):
            return []
        found = self.db.get_top_k(self.db.commit_workload(mod), max(limit, 1) * 8)
        tgt = tvm_target(target)
        return [r for r in found if _same_machine(r.target, tgt)][:limit]

    def schedule(self, kernel: Kernel, target):
        """The kernel's PrimFunc with its best recorded schedule, or None.
        Sets ``kernel.schedule = "tuned"`` and the record's measured time."""
        mod = workload(kernel)
        found = self.records(mod, target)
        if not found:
            return None
        from tvm import s_tir

        record = found[0]
        sch = s_tir.Schedule(record.workload.mod)
        try:
            record.trace.apply_to_schedule(sch, remove_postproc=False)
        except Exception as e:  # noqa: BLE001 -- e.g. a record from another TVM version: the rules instead
            from .schedules import ScheduleWarning

            warnings.warn(f"kernel {kernel.name}: its record in {self.path} does not apply ({last_line(e)}); "
                          "using the rules (tune again with this TVM version)", ScheduleWarning, stacklevel=3)
            return None
        kernel.plain_layouts()
        kernel.schedule = "tuned"
        kernel.schedule_params = {"run_ms": round(1e3 * mean(record.run_secs), 6)}
        return sch.mod["main"].with_attr("global_symbol", kernel.name)

    def __len__(self) -> int:
        return len(self.db)


def _same_machine(recorded, target) -> bool:
    if recorded is None:
        return True
    return recorded.kind.name == target.kind.name and recorded.attrs.get("mcpu") == target.attrs.get("mcpu")


# --- tuning ---------------------------------------------------------------------------------------
@dataclass
class TaskResult:
    kernels: list[str]
    flops: float
    trials: int  # measured candidates in the database after tuning
    best_ms: float | None
    skipped: str = ""  # why nothing was tuned (already done)

    def to_dict(self) -> dict:
        return {"kernels": self.kernels, "flops": self.flops, "trials": self.trials, "best_ms": self.best_ms,
                "gflops": self.flops / self.best_ms / 1e6 if self.best_ms else None, "skipped": self.skipped}


def tune_workloads(tasks: list[Task], target, db_path: str, trials: int = 64, progress=None,
                   seed: int | None = None, runner=None, builder=None) -> list[TaskResult]:
    """Tune ``tasks`` (from ``find_tasks``) into the database at ``db_path``
    (created if absent): up to ``trials`` measured candidates per workload,
    counting those already in the database, so that a second run resumes.
    ``progress(Progress)`` is called when a workload starts and after each
    measured batch. One result per task, in order. ``runner`` and
    ``builder`` make meta_schedule's runner and builder (remote.py's RPC
    runner measures on other machines: this one's ISA does not matter)."""
    if target.kind != "llvm":
        raise TuningError(f"tuning runs kernels on a CPU; target {target.name} "
                          f"({target.kind}) cannot be measured by braze tune")
    from ..targets.isa import missing, requirements

    lacking = missing(requirements(target)) if runner is None else []
    if lacking:
        raise TuningError(f"tuning measures kernels on this machine; target {target.name} needs {lacking}: "
                          "tune on a machine that runs it, or for --target cpu or cpu-avx2")
    if trials < 1:
        raise TuningError(f"--trials must be at least 1 (got {trials})")
    if not tasks:
        raise TuningError("no kernel to tune: the model has no matmul, conv, pooling or reduction kernel "
                          "(--all tunes elementwise kernels too)")
    database = TuningDatabase.open(db_path, create=True)
    tgt = tvm_target(target)
    have = [len(database.records(t.mod, target, trials)) for t in tasks]
    todo = [max(trials - n, 0) for n in have]
    if any(todo):
        with Session(os.path.join(database.path, "logs"), target.num_cores, runner, builder) as session:
            started, done, planned = time.perf_counter(), 0, sum(todo)
            for i, (task, count) in enumerate(zip(tasks, todo)):
                if not count:
                    continue
                state = Progress(i + 1, len(tasks), task.name, len(task.kernels), 0, count, done, planned, None,
                                 time.perf_counter() - started, task.flops)
                if progress:  # "kernel i/n ...: 0/N trials" while its first batch is searched
                    progress(dataclasses.replace(state))
                session.search(task.mod, task.name, tgt, database.db, count, state, started, progress, seed)
                done = state.done
                planned -= count - state.trials  # a small search space ends early
    results = []
    for task, count, n in zip(tasks, todo, have):
        best = database.records(task.mod, target)
        results.append(TaskResult(task.kernels, task.flops, len(database.records(task.mod, target, trials)),
                                  1e3 * mean(best[0].run_secs) if best else None,
                                  "" if count else f"already tuned ({n} trials in the database)"))
    return results


