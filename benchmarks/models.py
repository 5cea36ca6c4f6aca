"""Compile each model at a fusion level, check it against onnxruntime's
reference outputs, and benchmark it against onnxruntime (braze.measure.bench,
as `braze bench` does: each engine timed alone in its own worker process,
same input and threads, alternating phases, medians and per-phase range).

    python benchmarks/models.py ~/.cache/braze-models --levels 0,2 --threads 2 [--models resnet50,bert-base] [--no-bench]
                                [--self-check] [--out DIR]

Writes a markdown table to stdout and, unless --no-bench, the figures to
benchmarks/results/<cpu>-<isa>/models-FOLDER.json (``--out DIR`` elsewhere).
Each folder holds NAME.onnx, and ideally NAME.inputs.npz and NAME.ref.npz (the
layout of shared/models/make_models.py's output and of braze/data); without
them, inputs are random and onnxruntime computes the reference.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from braze.compiler import compile as braze_compile
from braze.errors import BrazeError
from braze.measure import bench, compare, random_inputs, run_onnxruntime
from braze.targets.detect import host_line


def run_model(onnx_path: Path, level: int, threads: int, repeat: int, timed: bool = True,
              self_check: bool = False) -> dict:
    name = onnx_path.stem
    t0 = time.perf_counter()
    artifact = braze_compile(str(onnx_path), level=level, threads=threads)
    compile_s = time.perf_counter() - t0
    inputs_file, ref_file = onnx_path.with_name(f"{name}.inputs.npz"), onnx_path.with_name(f"{name}.ref.npz")
    if inputs_file.exists() and ref_file.exists():
        inputs, ref = dict(np.load(inputs_file)), dict(np.load(ref_file))
    else:  # e.g. the onnx wheel's light_* models: random inputs, onnxruntime as the reference
        inputs = random_inputs(artifact.inputs)
        ref = run_onnxruntime(str(onnx_path), inputs, threads)
    rows = compare(artifact.run(inputs), ref)
    worst = max(r.max_rel for r in rows)
    result = {"name": name, "level": level, "ratios": {}, "control": None, "kernels": len(artifact.kernels),
              "compile_s": compile_s, "max_rel": worst, "ok": worst <= 1e-4}
    if timed:
        with tempfile.TemporaryDirectory() as tmp:
            saved = artifact.save(os.path.join(tmp, f"{name}.braze"))
            timing = bench(saved, str(onnx_path), inputs, threads, repeat=repeat, self_check=self_check)
        control = timing.controls.get("onnxruntime")
        result.update({"ms": {"braze": timing.braze_ms, "onnxruntime": timing.onnxruntime_ms},
                       "ratios": {"braze / onnxruntime": timing.ratio.to_dict()},
                       "control": control.to_dict() if control else None, "phases": timing.timing.method()})
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    ap.add_argument("--models", help="comma-separated names (default: every .onnx in the folder)")
    ap.add_argument("--levels", default="0", help="comma-separated fusion levels, e.g. 0,1,2,3")
    ap.add_argument("--no-bench", action="store_true", help="compile and check numerics only")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeat", type=int, default=50, help="timed runs per engine (default 50)")
    ap.add_argument("--self-check", action="store_true", help="add each engine against itself (the control)")
    ap.add_argument("--out", type=Path, help="folder for the results file (default: benchmarks/results/<cpu>-<isa>/)")
    args = ap.parse_args()
    names = args.models.split(",") if args.models else sorted(p.stem for p in args.folder.glob("*.onnx"))
    results = []
    print(f"Machine: {host_line()}; {args.threads} threads.\n")
    print("| model | level | kernels | compile s | max rel error | braze ms | onnxruntime ms | ratio (per phase) |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        for level in (int(x) for x in args.levels.split(",")):
            try:
                r = run_model(args.folder / f"{name}.onnx", level, args.threads, args.repeat, not args.no_bench,
                              args.self_check)
            except BrazeError as e:
                print(f"| {name} | {level} | error: {e} |")
                continue
            results.append(r)
            q = r["ratios"].get("braze / onnxruntime")
            timing = (f"{r['ms']['braze']:.2f} | {r['ms']['onnxruntime']:.2f} | {q['ratio']:.2f} "
                      f"({q['ratio_min']:.2f}-{q['ratio_max']:.2f})" if q else "- | - | -")
            print(f"| {name} | {level} | {r['kernels']} | {r['compile_s']:.1f} | {r['max_rel']:.1e}"
                  f"{'' if r['ok'] else ' FAIL'} | {timing} |")
            sys.stdout.flush()
    if results and not args.no_bench:
        import results_io

        doc = results_io.result(
            f"models-{args.folder.name.strip('.')}", f"the models of {args.folder.name}/ at fusion levels {args.levels} "
            "against onnxruntime", results,
            threads=args.threads, timing=results_io.time_alone(processes=3) + " (braze.measure.bench, as `braze bench`)",
            control="each engine against a second worker of itself" if args.self_check else None)
        print(f"\nwrote {results_io.write(doc, args.out)}")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
