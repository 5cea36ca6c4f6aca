"""The headline benchmark: braze against onnxruntime on
the full-size models, at each fusion level, on this machine.

    python benchmarks/performance.py [DIR] --levels 1,2,3 --threads 2 [--models resnet50,bert-base]
                                     [--target cpu-avx2] [--self-check] [--out DIR]

DIR (default ~/.cache/braze-models, made by shared/models/make_models.py)
holds NAME.onnx with NAME.inputs.npz and NAME.ref.npz beside it; without
them, inputs are random and onnxruntime gives the reference. For each model
and level: compile (no compile cache, so the time is real), check the
outputs, time braze and onnxruntime (braze.measure.bench, as `braze bench`
does: each engine alone in a worker process of its own, same inputs and
threads, alternating phases that start once both are idle, medians and the
range of the per-phase ratios), then time each kernel (braze.measure.profile) to rate the GEMM
kernels (matmul and conv anchors) in GFLOP/s against the machine's peak,
measured at the start: onnxruntime's MatMul of two N x N fp32 matrices
(N = 2048; B a constant, as weights are) at the same thread count.

``--self-check`` adds each engine against a second worker of itself (the
control). Writes benchmarks/results/<cpu>-<isa>/performance.json
(``-TARGET`` added for a target other than ``cpu``; ``--out DIR``
elsewhere), rewritten after each row so that a long run can be read as it
goes, and prints the tables.
Level 0 (one kernel per op, the unfused baseline) of the large models takes
minutes to run: leave it out of --levels to skip it.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

MODELS = ["resnet50", "mobilenetv2", "bert-base", "vit-base-patch16-224", "yolov8n"]


# --- the machine's peak -----------------------------------------------------------------------------
def _peak_worker(n: int, threads: int, repeat: int, conn) -> None:
    try:
        from onnx import TensorProto, helper, numpy_helper

        from braze.measure import ort_session

        rng = np.random.default_rng(0)
        b = numpy_helper.from_array(rng.standard_normal((n, n)).astype(np.float32), "B")
        graph = helper.make_graph([helper.make_node("MatMul", ["A", "B"], ["C"])], "peak",
                                  [helper.make_tensor_value_info("A", TensorProto.FLOAT, [n, n])],
                                  [helper.make_tensor_value_info("C", TensorProto.FLOAT, [n, n])], [b])
        sess = ort_session(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), threads)
        feed = {"A": rng.standard_normal((n, n)).astype(np.float32)}
        for _ in range(2):
            sess.run(None, feed)
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            sess.run(None, feed)
            times.append(time.perf_counter() - t0)
        conn.send(("ok", statistics.median(times)))
    except BaseException as e:  # report, never hang the parent
        conn.send(("error", f"{type(e).__name__}: {e}"))


def peak(threads: int, n: int = 2048, repeat: int = 7) -> dict:
    """The practical fp32 peak: onnxruntime's n^3 MatMul, in a process of its own."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_peak_worker, args=(n, threads, repeat, child), daemon=True)
    proc.start()
    status, value = parent.recv()
    proc.join(timeout=10)
    if status != "ok":
        raise RuntimeError(f"peak microbenchmark failed: {value}")
    return {"what": f"onnxruntime MatMul {n}x{n}x{n} fp32, B constant, median of {repeat}",
            "n": n, "ms": 1e3 * value, "gflops": 2 * n ** 3 / value / 1e9}


# --- one model at one level -----------------------------------------------------------------------------
def model_row(onnx_path: Path, level: int, threads: int, repeat: int, peak_gflops: float | None,
              profile: bool = True, tolerance: float = 1e-4, tuning_db: str | None = None, say=print,
              target: str = "cpu", self_check: bool = False) -> dict:
    from braze.compiler import compile as braze_compile
    from braze.measure import bench, compare, random_inputs, run_onnxruntime

    name = onnx_path.stem
    t0 = time.perf_counter()
    artifact = braze_compile(str(onnx_path), target=target, level=level, threads=threads, cache_dir=None,
                             tuning_db=tuning_db)
    compile_s = time.perf_counter() - t0
    say(f"{name} level {level}: {len(artifact.kernels)} kernels, compiled in {compile_s:.1f}s")
    inputs_file, ref_file = onnx_path.with_name(f"{name}.inputs.npz"), onnx_path.with_name(f"{name}.ref.npz")
    inputs = dict(np.load(inputs_file)) if inputs_file.exists() else random_inputs(artifact.inputs)
    ref = dict(np.load(ref_file)) if inputs_file.exists() and ref_file.exists() else \
        run_onnxruntime(str(onnx_path), inputs, threads)
    worst = max(e.max_rel for e in compare(artifact.run(inputs), ref))
    row = {"name": name, "level": level, "kernels": len(artifact.kernels), "compile_s": round(compile_s, 2),
           "max_rel": worst, "ok": worst <= tolerance, "tuned": sum(k["schedule"] == "tuned" for k in artifact.kernels)}
    with tempfile.TemporaryDirectory() as tmp:
        saved = artifact.save(os.path.join(tmp, f"{name}.braze"))
        result = bench(saved, str(onnx_path), inputs, threads, repeat=repeat, self_check=self_check)
    control = result.controls.get("onnxruntime")
    row.update({"ms": {"braze": result.braze_ms, "onnxruntime": result.onnxruntime_ms},
                "ratios": {"braze / onnxruntime": result.ratio.to_dict()},
                "control": control.to_dict() if control else None,
                "controls": {k: r.to_dict() for k, r in result.controls.items()},
                "engines": {k: e.to_dict() for k, e in result.timing.engines.items()},
                "phases": result.timing.method(), "spin": result.spin})
    r = row["ratios"]["braze / onnxruntime"]
    say(f"{name} level {level}: braze {result.braze_ms:.2f} ms, onnxruntime {result.onnxruntime_ms:.2f} ms, "
        f"ratio {r['ratio']:.2f} ({r['ratio_min']:.2f}-{r['ratio_max']:.2f})")
    if profile:
        row.update(gemm_figures(artifact, inputs, peak_gflops))
    return row


def gemm_figures(artifact, inputs: dict, peak_gflops: float | None, repeat: int = 5) -> dict:
    """Per-kernel times (VM instrumentation) of the kernels whose anchor is
    a matmul or a conv: their total, GFLOP/s and share of the run."""
    from braze.ir.registry import contraction
    from braze.measure import profile
    from braze.tools.experiment import kernels

    times = dict(profile(artifact, inputs, repeat=repeat))
    total_ms = sum(times.values())
    gemms = []
    for k in kernels(artifact):
        if contraction(k.anchor) and k.name in times:  # matmuls and convs, blocked ones included
            ms = times[k.name]
            rate = k.flops / ms / 1e6
            gemms.append({"kernel": k.name, "ops": k.ops, "schedule": k.schedule, "mflop": round(k.flops / 1e6, 2),
                          "ms": round(ms, 4), "gflops": round(rate, 1),
                          "pct_peak": round(100 * rate / peak_gflops, 1) if peak_gflops else None})
    gemms.sort(key=lambda g: -g["ms"])
    flops = sum(g["mflop"] for g in gemms) * 1e6
    ms = sum(g["ms"] for g in gemms)
    rate = flops / ms / 1e6 if ms else None
    return {"profile_ms": round(total_ms, 3), "gemm_kernels": len(gemms), "gemm_ms": round(ms, 3),
            "gemm_share": round(ms / total_ms, 3) if total_ms else None,
            "gemm_gflops": round(rate, 1) if rate else None,
            "gemm_pct_peak": round(100 * rate / peak_gflops, 1) if rate and peak_gflops else None,
            "gemm_top": gemms[:5]}


# --- the tables -------------------------------------------------------------------------------------------
def markdown(report: dict) -> str:
    m, v, p = report["host"], report["versions"], report["peak"]
    lines = [f"Machine: {m['cpu']} (LLVM `{m['llvm_cpu']}`, {m['isa']}), {m['cores']} cores, {report['threads']} "
             f"threads; braze {v['braze']}, TVM {v['tvm']}, onnxruntime {v['onnxruntime']}; {report['date']}."]
    if report.get("target", "cpu") != "cpu":
        lines.append(f"braze built for `{report['target']}` ({report['target_isa']}); onnxruntime keeps its own "
                     "kernels for this CPU.")
    if p is not None:
        lines.append(f"Peak: {p['gflops']:.0f} GFLOP/s ({p['what']}: {p['ms']:.1f} ms).")
    if report.get("tuning_db"):
        lines.append(f"Compiled with the tuning database {report['tuning_db']} "
                     "(`tuned` in the JSON: the kernels that got a tuned schedule).")
    lines += ["", "| model | level | kernels | compile s | max rel err | braze ms | onnxruntime ms | ratio "
              "| ratio per phase | control | GEMM GFLOP/s | GEMM % of peak | GEMM share |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        if "error" in r:
            lines.append(f"| {r['name']} | {r['level']} | error: {r['error']} |")
            continue
        gemm = [_fmt(r.get("gemm_gflops"), ".0f"), _fmt(r.get("gemm_pct_peak"), ".0f", "%"),
                _fmt(None if r.get("gemm_share") is None else 100 * r["gemm_share"], ".0f", "%")]
        q, c = r["ratios"]["braze / onnxruntime"], r["control"]
        lines.append(f"| {r['name']} | {r['level']} | {r['kernels']} | {r['compile_s']:.1f} | "
                     f"{r['max_rel']:.1e}{'' if r['ok'] else ' FAIL'} | {r['ms']['braze']:.2f} | "
                     f"{r['ms']['onnxruntime']:.2f} | **{q['ratio']:.2f}** | {q['ratio_min']:.2f}-{q['ratio_max']:.2f} | "
                     f"{'-' if c is None else format(c['ratio'], '.2f')} | {' | '.join(gemm)} |")
    best = _best_rows(report["rows"])
    if any(r.get("gemm_top") for r in best):
        lines += ["", "Slowest GEMM kernels (matmul/conv anchors) of each model at its best level:", "",
                  "| model | level | kernel | MFLOP | ms | GFLOP/s | % of peak | schedule |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in best:
            for g in r.get("gemm_top", []):
                lines.append(f"| {r['name']} | {r['level']} | `{g['kernel']}` | {g['mflop']:.1f} | {g['ms']:.3f} | "
                             f"{g['gflops']:.0f} | {_fmt(g['pct_peak'], '.0f', '%')} | {g['schedule']} |")
    return "\n".join(lines) + "\n"


def _fmt(value, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def _best_rows(rows: list[dict]) -> list[dict]:
    best: dict[str, dict] = {}
    for r in rows:
        ratio = r["ratios"].get("braze / onnxruntime", {}).get("ratio")
        if ratio is not None and (r["name"] not in best or ratio < best[r["name"]]["ratios"]["braze / onnxruntime"]["ratio"]):
            best[r["name"]] = r
    return list(best.values())


def _isa(target: str) -> str:
    """The widest vector ISA a target builds for, as the tables name it."""
    from braze.targets import get_target
    from braze.targets.isa import requirements

    features = set(requirements(get_target(target))["features"])
    return next((name for flag, name in (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("neon", "NEON"))
                 if flag in features), "SSE")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path, nargs="?", default=Path.home() / ".cache" / "braze-models")
    ap.add_argument("--models", help=f"comma-separated names (default: those of {', '.join(MODELS)} in the folder)")
    ap.add_argument("--levels", default="0,1,2,3", help="comma-separated fusion levels (default 0,1,2,3)")
    ap.add_argument("--threads", type=int, default=2, help="threads for both braze and onnxruntime (default 2)")
    ap.add_argument("--repeat", type=int, default=50,
                    help="timed runs per engine, spread over 10 phases (default 50; more when runs are short)")
    ap.add_argument("--out", type=Path, help="folder for the results file (default: benchmarks/results/<cpu>-<isa>/)")
    ap.add_argument("--self-check", action="store_true", help="add each engine against itself (the control)")
    ap.add_argument("--tuning-db", help="compile with this tuning database (braze tune)")
    ap.add_argument("--no-profile", action="store_true", help="skip the per-kernel GEMM figures")
    ap.add_argument("--target", default="cpu",
                    help="braze's target (default cpu, the host; cpu-avx2 on an AVX-512 host times an AVX2 build)")
    ap.add_argument("--peak-size", type=int, default=2048, help="N of the N^3 MatMul that measures the peak")
    args = ap.parse_args()
    os.environ["TVM_NUM_THREADS"] = str(args.threads)  # before TVM starts its pool in this process
    os.environ.pop("BRAZE_CACHE_DIR", None)  # compile times are real compiles

    names = args.models.split(",") if args.models else [m for m in MODELS if (args.folder / f"{m}.onnx").exists()]
    missing = [n for n in names if not (args.folder / f"{n}.onnx").exists()]
    if missing or not names:
        print(f"error: no {', '.join(missing) or 'model'} .onnx in {args.folder}", file=sys.stderr)
        return 1
    levels = [int(x) for x in args.levels.split(",")]

    def say(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    say(f"measuring the peak (MatMul {args.peak_size}^3, {args.threads} threads)")
    top = None if args.no_profile else peak(args.threads, args.peak_size)
    import results_io

    report = results_io.result(
        "performance", "the public models at each fusion level against onnxruntime, with the GEMM kernels' rate "
        "against onnxruntime's MatMul peak", [], threads=args.threads, target=args.target,
        timing=results_io.time_alone(processes=3) + " (braze.measure.bench, as `braze bench`)",
        control="each engine against a second worker of itself" if args.self_check else None,
        peak=top, tuning_db=args.tuning_db, target_isa=_isa(args.target))
    if top:
        say(f"peak {top['gflops']:.0f} GFLOP/s")
    for name in names:
        for level in levels:
            try:
                row = model_row(args.folder / f"{name}.onnx", level, args.threads, args.repeat,
                                top and top["gflops"], not args.no_profile, tuning_db=args.tuning_db, say=say,
                                target=args.target, self_check=args.self_check)
            except Exception as e:  # noqa: BLE001 -- one model failing must not lose the others' rows
                say(f"{name} level {level} failed:\n{traceback.format_exc()}")
                row = {"name": name, "level": level, "ratios": {}, "control": None,
                       "error": f"{type(e).__name__}: {e}".splitlines()[0]}
            report["rows"].append(row)
            path = results_io.write(report, args.out)
    print(markdown(report))
    say(f"wrote {path}")
    return 0 if all(r.get("ok") for r in report["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
