"""``braze tune --merge``: tuning databases combined into one, keeping the
fastest record of each workload for each machine.

Tuning on several trackers, or on several days, leaves several databases.
A compile reads one. Workloads are told apart as meta_schedule's JSON
database tells them apart, structurally (the same PrimFunc in two databases
is one workload, whatever its hash there); records measured on different
machines (target kind and CPU, tuning.py's ``_same_machine``) are kept apart,
since a schedule fast on one CPU says nothing about another. Failed
candidates (no run time) are dropped.
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import dataclass

from ..errors import TuningError
from .search import mean
from .tuning import DB_FILES, TuningDatabase


@dataclass
class MergeReport:
    output: str
    sources: dict[str, int]  # path -> records read
    workloads: int
    records: int  # written: one per workload and machine
    failed: int  # records without a run time, dropped

    def to_dict(self) -> dict:
        return {"output": self.output, "sources": self.sources, "workloads": self.workloads,
                "records": self.records, "failed_dropped": self.failed}

    def line(self) -> str:
        read = ", ".join(f"{p} ({n} records)" for p, n in self.sources.items())
        return (f"wrote {self.output}: {self.records} records, the fastest of each of {self.workloads} workloads "
                f"per machine, from {read}" + (f"; {self.failed} failed candidates dropped" if self.failed else ""))


def _machine(record) -> tuple:
    target = record.target
    return ("", "") if target is None else (target.kind.name, str(target.attrs.get("mcpu", "")))


def _seconds(record) -> float:
    value = mean(record.run_secs) if record.run_secs else math.inf
    return math.inf if math.isnan(value) else value


def merge_databases(sources: list[str], output: str) -> MergeReport:
    """Write the database folder ``output`` (replaced if it is a database)
    with the fastest record of every workload and machine in ``sources``."""
    import tvm_ffi
    from tvm.s_tir import meta_schedule as ms

    if len(sources) < 2:
        raise TuningError("--merge takes two or more tuning databases: --merge DB1 DB2 ... -o DB")
    out = os.path.abspath(output)
    if out in {os.path.abspath(s) for s in sources}:
        raise TuningError(f"{output}: the merged database must be a new folder, not one of the sources")
    opened = [TuningDatabase.open(s) for s in sources]
    best: dict[int, list] = {}  # structural hash -> [(mod, {machine: record})]
    counts, failed = {}, 0
    for db in opened:
        records = db.db.get_all_tuning_records()
        counts[db.path] = len(records)
        for record in records:
            if not math.isfinite(_seconds(record)):
                failed += 1
                continue
            mod = record.workload.mod
            same = best.setdefault(tvm_ffi.structural_hash(mod), [])
            entry = next((e for e in same if tvm_ffi.structural_equal(e[0], mod)), None)
            if entry is None:
                entry = (mod, {})
                same.append(entry)
            kept = entry[1].get(_machine(record))
            if kept is None or _seconds(record) < _seconds(kept):
                entry[1][_machine(record)] = record
    _clear(out)
    merged = ms.database.JSONDatabase(work_dir=out, allow_missing=True, module_equality="structural")
    written = 0
    for same in best.values():
        for mod, per_machine in same:
            workload = merged.commit_workload(mod)
            for r in per_machine.values():
                merged.commit_tuning_record(ms.database.TuningRecord(r.trace, workload, r.run_secs, r.target,
                                                                     r.args_info))
                written += 1
    return MergeReport(out, counts, sum(len(s) for s in best.values()), written, failed)


def _clear(path: str) -> None:
    """An empty folder at ``path``: an old database there is replaced, anything else refused."""
    if os.path.isdir(path) and os.listdir(path):
        if not all(os.path.isfile(os.path.join(path, f)) for f in DB_FILES):
            raise TuningError(f"{path}: exists and is not a tuning database; choose another -o")
        shutil.rmtree(path)
    os.makedirs(path, exist_ok=True)
