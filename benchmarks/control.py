"""The benchmark's controls, at full size: does `braze bench` measure what a
user measures with each engine alone?

    python benchmarks/control.py [DIR] --models mobilenetv2,resnet50,bert-base --threads 2 [--out DIR]

For each model (DIR, default ~/.cache/braze-models, holds NAME.onnx and
ideally NAME.inputs.npz; the embedded demo models are found by name too):

1. compile it at the default level;
2. `braze.measure.bench(..., self_check=True)`, as `braze bench --self-check`
   does: braze and onnxruntime each timed alone, plus the two controls
   (braze against a second braze worker, onnxruntime against a second
   onnxruntime worker), which must give 1.00 +- 0.10;
3. each engine **alone in a fresh process**, nothing else of ours running:
   a plain script (not braze's harness) loads the model, runs it twice,
   then times `--alone-runs` calls back to back and reports the median.
   Each engine is timed alone `--alone-repeats` times, alternating, half
   before the bench and half after it (a shared machine's speed drifts),
   and the median of those medians is its figure;
4. the check: bench's median of each engine within +-15% of the same engine
   alone.

Writes benchmarks/results/<cpu>-<isa>/control.json (``--out DIR``
elsewhere) after each model and prints the table; exit status 1 if a check
fails.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ALONE_TOLERANCE = 0.15


# --- one engine alone, in a fresh process (a user's own timing loop) ---------------------------------
def alone_main(kind: str, source: str, inputs_file: str, threads: int, runs: int) -> None:
    inputs = dict(np.load(inputs_file))
    if kind == "braze":
        os.environ["TVM_NUM_THREADS"] = str(threads)
        import braze.runtime

        artifact = braze.runtime.load(source)
        times = artifact.time_run(inputs, repeat=runs, warmup=2)
    else:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
        sess = ort.InferenceSession(source, opts, providers=["CPUExecutionProvider"])
        for _ in range(2):
            sess.run(None, inputs)
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            sess.run(None, inputs)
            times.append(time.perf_counter() - t0)
    print(json.dumps({"median_ms": 1e3 * statistics.median(times)}))


def alone(kind: str, source: str, inputs_file: str, threads: int, runs: int) -> float:
    out = subprocess.run([sys.executable, __file__, "--alone", kind, source, inputs_file, str(threads), str(runs)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["median_ms"]


# --- one model -------------------------------------------------------------------------------------------
def model_path(folder: Path, name: str) -> Path:
    path = folder / f"{name}.onnx"
    if path.exists():
        return path
    from braze.cli import demo_model_path

    return Path(demo_model_path(name))


def check_model(onnx_path: Path, threads: int, repeat: int, phases: int, alone_runs: int, alone_repeats: int,
                say) -> dict:
    from braze.compiler import compile as braze_compile
    from braze.measure import bench, random_inputs

    name = onnx_path.stem
    artifact = braze_compile(str(onnx_path), threads=threads)
    inputs_file = onnx_path.with_name(f"{name}.inputs.npz")
    inputs = dict(np.load(inputs_file)) if inputs_file.exists() else random_inputs(artifact.inputs)
    with tempfile.TemporaryDirectory() as tmp:
        saved = artifact.save(os.path.join(tmp, f"{name}.braze"))
        np.savez(os.path.join(tmp, "inputs.npz"), **inputs)
        solo = {"braze": [], "onnxruntime": []}

        def alone_rounds(n: int) -> None:
            for _ in range(n):
                for kind, source in (("braze", saved), ("onnxruntime", str(onnx_path))):
                    solo[kind].append(alone(kind, source, os.path.join(tmp, "inputs.npz"), threads, alone_runs))

        # the alone processes bracket the bench in time: the machine's speed drifts
        say(f"{name}: each engine alone, {alone_repeats} times, half before the bench, half after")
        alone_rounds(alone_repeats // 2)
        say(f"{name}: bench --self-check")
        r = bench(saved, str(onnx_path), inputs, threads, repeat=repeat, phases=phases, self_check=True)
        alone_rounds(alone_repeats - alone_repeats // 2)
    row = {"name": name, "ratios": {"braze / onnxruntime": r.ratio.to_dict()},
           "control": r.controls["onnxruntime"].to_dict(), "bench": r.to_dict()}
    for kind in ("braze", "onnxruntime"):
        ms = statistics.median(solo[kind])
        ratio = row["bench"][f"{kind}_ms"] / ms
        row[kind] = {"bench_ms": row["bench"][f"{kind}_ms"], "alone_ms": ms, "alone_runs_ms": solo[kind],
                     "bench_over_alone": ratio, "ok": abs(ratio - 1) <= ALONE_TOLERANCE}
    row["alone_ratio"] = row["braze"]["alone_ms"] / row["onnxruntime"]["alone_ms"]
    row["ok"] = row["braze"]["ok"] and row["onnxruntime"]["ok"] and r.controls_ok
    return row


def markdown(report: dict) -> str:
    h = report["host"]
    lines = [f"Machine: {h['cpu']} ({h['llvm_cpu']}, {h['isa']}), {h['cores']} cores; {report['threads']} threads; "
             f"{report['date']}.", "",
             "| model | bench: braze / onnxruntime | alone: braze / onnxruntime | braze: bench / alone "
             "| onnxruntime: bench / alone | control braze/braze | control onnxruntime/onnxruntime |",
             "|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        b, c = r["bench"], r["bench"]["controls"]
        lines.append(
            f"| {r['name']} | {b['braze_ms']:.2f} / {b['onnxruntime_ms']:.2f} ms = **{b['ratio']:.2f}** "
            f"({b['ratio_min']:.2f}-{b['ratio_max']:.2f}) "
            f"| {r['braze']['alone_ms']:.2f} / {r['onnxruntime']['alone_ms']:.2f} ms = {r['alone_ratio']:.2f} "
            f"| {r['braze']['bench_over_alone']:.2f}{'' if r['braze']['ok'] else ' FAIL'} "
            f"| {r['onnxruntime']['bench_over_alone']:.2f}{'' if r['onnxruntime']['ok'] else ' FAIL'} "
            f"| {c['braze']['ratio']:.2f} ({c['braze']['ratio_min']:.2f}-{c['braze']['ratio_max']:.2f})"
            f"{'' if c['braze']['ok'] else ' FAIL'} "
            f"| {c['onnxruntime']['ratio']:.2f} ({c['onnxruntime']['ratio_min']:.2f}-"
            f"{c['onnxruntime']['ratio_max']:.2f}){'' if c['onnxruntime']['ok'] else ' FAIL'} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--alone":
        kind, source, inputs_file, threads, runs = sys.argv[2:7]
        alone_main(kind, source, inputs_file, int(threads), int(runs))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path, nargs="?", default=Path.home() / ".cache" / "braze-models")
    ap.add_argument("--models", default="mobilenetv2-tiny,mobilenetv2,resnet50,bert-base",
                    help="names in the folder, or embedded demo models (default: %(default)s)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=50, help="bench: timed runs per engine (default 50)")
    ap.add_argument("--phases", type=int, default=10, help="bench: phases per engine (default 10)")
    ap.add_argument("--alone-runs", type=int, default=50, help="timed runs of each alone process (default 50)")
    ap.add_argument("--alone-repeats", type=int, default=4, help="alone processes per engine (default 4)")
    ap.add_argument("--out", type=Path, help="folder for control.json (default: benchmarks/results/<cpu>-<isa>/)")
    args = ap.parse_args()
    os.environ["TVM_NUM_THREADS"] = str(args.threads)

    import results_io

    def say(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    report = results_io.result(
        "control", "the method's controls: bench's figures against each engine alone in a plain loop, and each "
        "engine against a second worker of itself", [], threads=args.threads,
        timing=results_io.time_alone(args.phases, 3) + f" (braze.measure.bench); alone: {args.alone_repeats} "
        f"fresh processes per engine, each timing {args.alone_runs} calls back to back, half before the bench and "
        "half after",
        control="each engine against a second worker of itself; bench within 15% of each engine alone")
    for name in args.models.split(","):
        report["rows"].append(check_model(model_path(args.folder, name), args.threads, args.repeat, args.phases,
                                          args.alone_runs, args.alone_repeats, say))
        path = results_io.write(report, args.out)
    print(f"wrote {path}\n\n" + markdown(report))
    return 0 if all(r["ok"] for r in report["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
