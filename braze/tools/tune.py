"""``braze tune``: a model's kernels, found as a compile would build them,
searched with meta_schedule into a tuning database (codegen/tuning.py keeps
the database and the search of given kernels; this is the model-level
driver, above the compiler)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from ..codegen.kernel import partition
from ..codegen.tuning import TaskResult, find_tasks, tune_workloads
from ..compiler import fuse_only
from ..targets import get_target


@dataclass
class TuneReport:
    db: str
    level: int
    trials: int
    results: list[TaskResult] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {"db": self.db, "level": self.level, "trials": self.trials, "seconds": round(self.seconds, 1),
                "tasks": [r.to_dict() for r in self.results],
                "skipped": [{"kernel": k, "reason": why} for k, why in self.skipped]}

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
         seed: int | None = None) -> TuneReport:
    """Tune an ONNX model's kernels (as ``compile`` at ``level`` with the
    same fusion controls would build them) into the database folder ``db``;
    ``braze.compile(model, level=level, tuning_db=db)`` then uses the records.
    ``say(message)`` is told each step, ``progress(Progress)`` each measured batch."""
    say = say or (lambda message: None)
    started = time.perf_counter()
    tgt = get_target(target, threads)
    say(f"importing and fusing at level {level}")
    module, _ = fuse_only(model, level, fusion, input_shapes, target)
    found = partition(module.main)
    tasks, skipped = find_tasks(found, kernels, everything)
    say(f"{len(found)} kernels: {len(tasks)} workloads to tune ({sum(len(t.kernels) for t in tasks)} kernels), "
        f"{len(skipped)} left to the rules; up to {trials} trials each, {tgt.num_cores} thread(s), into {db}")
    results = tune_workloads(tasks, tgt, db, trials, progress, seed)
    return TuneReport(os.path.abspath(db), level, trials, results, skipped, time.perf_counter() - started)
