"""Writing benchmark results: one JSON file per run, in the format that
``benchmarks/report.py`` documents and renders.

Every benchmark script builds its file with :func:`result` and saves it with
:func:`write`, by default to ``benchmarks/results/<cpu>-<isa>/NAME.json``
(:func:`host_folder` names the folder after the host: ``intel-xeon-avx512``,
``amd-zen3-avx2``).
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
FORMAT = "braze-results/1"

def time_alone(phases: int = 10, processes: int = 2) -> str:
    """``method.timing`` for a script that times with braze.timing.time_alone."""
    return (f"each engine timed alone in its own worker processes (braze.timing.time_alone): {phases} alternating "
            f"phases over {processes} processes per engine; medians, and the range of the per-phase ratios")


def host() -> dict:
    """The CPU a figure belongs to: model name, vector ISA, LLVM's name, cores."""
    from braze.targets.detect import describe_host

    h = describe_host()
    return {"cpu": h["cpu"], "isa": h["isa"], "llvm_cpu": h["llvm_cpu"], "cores": h["cores"]}


def host_folder(h: dict | None = None) -> str:
    """``<cpu>-<isa>``: vendor and family (Zen generation for AMD, LLVM's name
    for other vendors), then the widest ISA.

    ``Intel(R) Xeon(R) Processor``/AVX-512 -> ``intel-xeon-avx512``,
    ``AMD EPYC 7B13``/znver3/AVX2 -> ``amd-zen3-avx2``, neoverse-v2/SVE ->
    ``neoverse-v2-sve``."""
    h = h or host()
    words = re.sub(r"\((r|tm)\)", " ", h["cpu"].lower()).split()
    llvm = h.get("llvm_cpu") or "unknown"
    zen = re.fullmatch(r"znver(\d+)", llvm)
    if words[:1] == ["amd"] and zen:
        cpu = f"amd-zen{zen.group(1)}"
    elif words[:1] in (["intel"], ["amd"]) and len(words) > 1:
        cpu = f"{words[0]}-{words[1]}"
    else:
        cpu = llvm
    isa = re.sub(r"[^a-z0-9]", "", h["isa"].lower())
    return re.sub(r"[^a-z0-9]+", "-", f"{cpu}-{isa}").strip("-")


def versions() -> dict:
    """The versions a figure depends on (None for a package that is absent)."""
    found = {}
    for name, dist in (("braze", "braze"), ("tvm", "apache-tvm"), ("onnxruntime", "onnxruntime"), ("onnx", "onnx")):
        try:
            found[name] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    if found["braze"] is None:  # a checkout run without installing it
        from braze.version import __version__

        found["braze"] = __version__
    return found


def commit() -> str | None:
    """The checkout's short commit, ``+uncommitted`` when the tree differs."""
    def git(*args):
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT).stdout.strip()

    head = git("rev-parse", "--short", "HEAD")
    if not head:
        return None
    return head + ("+uncommitted" if git("status", "--porcelain", "--untracked-files=no") else "")


def ratio(value: float, low: float, high: float) -> dict:
    """A median ratio and its range, as braze.timing's ``Ratio.as_dict`` gives it."""
    return {"ratio": value, "ratio_min": low, "ratio_max": high}


def result(benchmark: str, what: str, rows: list[dict], *, threads: int | None, timing: str,
           control: str | None, target: str | None = "cpu", **extra) -> dict:
    """One results file: the header every file carries, then ``rows``; a
    ``target`` other than ``cpu`` is part of its name (``gemm-cpu-avx2``).

    Each row has a ``name``, ``ratios`` ({label: ratio}), and optionally
    ``ms`` ({engine: median ms}) and ``control`` (a ratio); anything else a
    script records stays beside them."""
    if target not in (None, "cpu"):
        benchmark = f"{benchmark}-{target}"
    return {"format": FORMAT, "benchmark": benchmark, "what": what,
            "command": " ".join(["python", *sys.argv]) if sys.argv and sys.argv[0] else None,
            "host": host(), "target": target, "threads": threads, "versions": versions(),
            "commit": commit(), "date": datetime.date.today().isoformat(),
            "method": {"timing": timing, "control": control}, **extra, "rows": rows}


def write(doc: dict, folder: Path | None = None) -> Path:
    """Save ``doc`` as ``folder/NAME.json`` (default: this host's results folder)."""
    folder = Path(folder) if folder else RESULTS / host_folder(doc["host"])
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{doc['benchmark']}.json"
    part = path.with_suffix(".json.part")  # a run rewrites its file as it goes: never leave half of one
    part.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    os.replace(part, path)
    return path
