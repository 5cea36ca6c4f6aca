"""What braze's default idle spin costs in latency: each model's artifact
timed with spin `short` (the default), `long` (TVM's own count) and `off`,
each in worker processes of its own (braze.timing.time_alone: alternating
phases, each started once every worker is idle).

    python benchmarks/spin.py [DIR] --models mobilenetv2,resnet50,bert-base --threads 2 [--gap 0.05] [--out DIR]

Two request patterns: back to back (each call starts as the last one ends),
and with `--gap` seconds of sleep before each call (a server with pauses
between requests; 0 skips it). For each: the median latency of each setting,
the ratio short/long and off/long with the range of the per-phase ratios,
and the CPU time each worker used in the 0.5 s after its last call.

Writes benchmarks/results/<cpu>-<isa>/spin.json (``--out DIR`` elsewhere)
after each model, and prints the table.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SETTINGS = ("short", "long", "off")


def measure(onnx_path: Path, threads: int, gap: float, phases: int, runs: int) -> dict:
    from braze.compiler import compile as braze_compile
    from braze.measure import random_inputs
    from braze.timing import Engine, time_alone

    artifact = braze_compile(str(onnx_path), threads=threads)
    inputs_file = onnx_path.with_name(f"{onnx_path.stem}.inputs.npz")
    inputs = dict(np.load(inputs_file)) if inputs_file.exists() else random_inputs(artifact.inputs)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = artifact.save(os.path.join(tmp, "m.braze"))
        engines = [Engine("braze", path, s, spin=s) for s in SETTINGS]
        for pattern, pause in (("back to back", 0.0), (f"{gap} s apart", gap)):
            if pattern != "back to back" and not gap:
                continue
            t = time_alone(engines, inputs, threads, phases=phases, runs=runs, gap=pause)
            rows.append({
                "name": onnx_path.stem, "calls": pattern, "ms": {s: t.engines[s].median_ms for s in SETTINGS},
                "ratios": {"short / long": t.ratio("short", "long").to_dict(),
                           "off / long": t.ratio("off", "long").to_dict()},
                "control": None, "idle_cpu_s": {s: t.engines[s].cpu_after_run_s for s in SETTINGS},
                "phases": t.method(),
            })
    return rows


def markdown(report: dict) -> str:
    lines = ["| model | calls | short ms | long ms | off ms | short / long | off / long "
             "| idle CPU s after a run: short, long, off |", "|---|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        sl, ol, cpu = r["ratios"]["short / long"], r["ratios"]["off / long"], r["idle_cpu_s"]
        lines.append(f"| {r['name']} | {r['calls']} | {r['ms']['short']:.2f} | {r['ms']['long']:.2f} | "
                     f"{r['ms']['off']:.2f} | **{sl['ratio']:.3f}** ({sl['ratio_min']:.2f}-{sl['ratio_max']:.2f}) | "
                     f"{ol['ratio']:.3f} ({ol['ratio_min']:.2f}-{ol['ratio_max']:.2f}) | "
                     f"{cpu['short']:.3f}, {cpu['long']:.3f}, {cpu['off']:.3f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path, nargs="?", default=Path.home() / ".cache" / "braze-models")
    ap.add_argument("--models", default="mobilenetv2,resnet50,bert-base")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gap", type=float, default=0.05, help="seconds between calls in the second pattern (0: skip)")
    ap.add_argument("--phases", type=int, default=10)
    ap.add_argument("--runs", type=int, default=5, help="timed calls per phase (more when calls are short)")
    ap.add_argument("--out", type=Path, help="folder for spin.json (default: benchmarks/results/<cpu>-<isa>/)")
    args = ap.parse_args()

    import results_io

    report = results_io.result(
        "spin", "braze's idle spin settings against each other: short (the default), long (TVM's count) and off, "
        f"calls back to back and {args.gap} s apart", [], threads=args.threads,
        timing=results_io.time_alone(args.phases, 3), control=None)
    for name in args.models.split(","):
        print(f"[{time.strftime('%H:%M:%S')}] {name}", file=sys.stderr, flush=True)
        report["rows"] += measure(args.folder / f"{name}.onnx", args.threads, args.gap, args.phases, args.runs)
        path = results_io.write(report, args.out)
    print(f"wrote {path}\n\n" + markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
