"""GEMMs: braze against onnxruntime on the
big GEMM shapes of the public models, each as a percentage of the FMA peak.

    python benchmarks/gemm.py [--target cpu] [--threads 2] [--shapes 128x768x3072,...] [--out DIR]
                              [--precision-mode allow_mix_precision_bf16]

The peak: an FMA-throughput loop that braze builds with TVM for the target
(``fma_loop``): every thread runs rounds of ``acc = acc * m + c`` (one FMA,
chained ``PEAK_DEPTH`` deep per statement) on as many independent vector
accumulators as the register file holds less four (12 with AVX2's 16
registers, 28 with AVX-512's 32: more than the FMA latency x units needs),
no memory traffic; the count of FMA instructions in the kernel's assembly
(gemm.json's ``fma_instructions``) checks that LLVM kept it that way. Its rate, 2 FLOP per lane
per FMA, median of several calls, is what the FMA units reach at the clock
the cores really run (turbo, thermal and the VM's share included). A
shared VM's clock moves by a third from minute to minute (measured on Zen 3:
148 to 193 GFLOP/s the same hour), so the loop runs before every shape and
after the last, and the peak is the highest of those medians: a
percentage of it never flatters a kernel timed while the machine ran
fast. The clock it implies is printed beside it (rate / threads / (2 FLOP
x lanes x the descriptor's ``fma_units``)).

The shapes: ``MxKxN`` is a MatMul of an [M, K] input by a constant [K, N]
weight (as the models' weights are); ``conv:HxWxCxK`` a 1x1 Conv of a
[1, C, H, W] input to K channels (resnet50's 56x56x64x256: the GEMM
3136x64x256). Each is compiled by braze at the default level for the
target, checked against onnxruntime, and both engines are timed as
``braze bench`` times them (each alone in a worker process of its own,
alternating phases, medians). GFLOP/s = 2*M*K*N / median time.

With ``--precision-mode``, braze compiles each shape in that mode
(onnxruntime stays float32) and its float32 build of the shape is a third
engine in the same rotation: the ``speedup`` column is the median of the
per-phase ratios float32 time / the mode's time (bfloat16 on AMX tiles:
docs/schedules.md, "amx"). The FMA peak stays float32's, so a 16-bit
kernel may exceed 100% of it.

Writes benchmarks/results/<cpu>-<isa>/gemm.json (``gemm-MODE`` with a
precision mode, ``-TARGET`` added for a target other than ``cpu``; ``--out
DIR`` elsewhere) after each shape, and prints the table.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SHAPES = ["128x768x3072", "128x768x768", "197x768x3072", "128x3072x768", "conv:56x56x64x256"]
PEAK_ITERATIONS = 50_000
#: FMAs chained in one statement: the accumulators stay in registers for
#: that many (TVM keeps a local buffer in memory between statements, and a
#: store-to-load round trip per FMA would halve the rate).
PEAK_DEPTH = 8


# --- the FMA peak ---------------------------------------------------------------------------------------
def fma_loop(lanes: int, accumulators: int, iterations: int, tasks: int):
    """A TIR function: ``tasks`` parallel tasks, each ``iterations`` rounds of
    one FMA on each of ``accumulators`` vectors of ``lanes`` floats."""
    from tvm.script import tirx as T

    def chain(x, m, c):
        for _ in range(PEAK_DEPTH):
            x = x * m + c  # LLVM contracts it into one FMA
        return x

    @T.prim_func
    def main(seed: T.Buffer((2,), "float32"), out: T.Buffer((tasks, accumulators, lanes), "float32")):
        for t in T.parallel(tasks):
            acc = T.decl_buffer((accumulators, lanes), "float32", scope="local")
            for a in T.unroll(accumulators):
                acc[a, T.ramp(0, 1, lanes)] = T.broadcast(seed[0] + T.float32(a), lanes)
            for _ in range(iterations):
                for a in T.unroll(accumulators):
                    acc[a, T.ramp(0, 1, lanes)] = chain(acc[a, T.ramp(0, 1, lanes)], T.broadcast(seed[1], lanes),
                                                        T.broadcast(seed[0], lanes))
            for a in T.unroll(accumulators):
                out[t, a, T.ramp(0, 1, lanes)] = acc[a, T.ramp(0, 1, lanes)]

    return main


def _peak_worker(target_spec: str, threads: int, repeat: int, conn) -> None:
    try:
        import tvm

        from braze.codegen.tvm_target import tvm_target
        from braze.targets import get_target

        target = get_target(target_spec, threads=threads)
        lanes = target.vector_bits // 32
        accumulators = target.vector_registers - 4
        lib = tvm.compile(fma_loop(lanes, accumulators, PEAK_ITERATIONS, threads), target=tvm_target(target))
        asm = "\n".join(m.inspect_source("asm") for m in [lib.mod, *lib.mod.imports] if m.kind == "llvm")
        fmas = sum("vfmadd" in line or "fmla" in line for line in asm.splitlines())
        seed = tvm.runtime.tensor(np.array([1e-3, 0.9999], "float32"))
        out = tvm.runtime.empty((threads, accumulators, lanes), "float32")
        run = lib.mod.time_evaluator("main", tvm.cpu(), number=3, repeat=repeat)
        seconds = statistics.median(run(seed, out).results)
        flop = 2 * lanes * accumulators * PEAK_ITERATIONS * PEAK_DEPTH * threads
        units = target.fma_units
        conn.send(("ok", {"what": f"FMA loop: {threads} threads x {accumulators} accumulators x {lanes} lanes, "
                                  f"{PEAK_ITERATIONS} x {PEAK_DEPTH} FMAs, median of {repeat}",
                          "gflops": flop / seconds / 1e9, "lanes": lanes, "accumulators": accumulators,
                          "fma_units": units, "fma_instructions": fmas,
                          "ghz": flop / seconds / 1e9 / threads / (2 * lanes * units)}))
    except BaseException as e:  # report, never hang the parent
        conn.send(("error", f"{type(e).__name__}: {e}"))


def fma_peak(target_spec: str, threads: int, repeat: int = 9) -> dict:
    """The FMA peak for ``threads`` threads, in a process of its own."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    os.environ["TVM_NUM_THREADS"] = str(threads)
    proc = ctx.Process(target=_peak_worker, args=(target_spec, threads, repeat, child), daemon=True)
    proc.start()
    child.close()
    try:
        status, value = parent.recv()
    except EOFError:
        status, value = "error", f"the peak worker died (exit code {proc.exitcode})"
    proc.join(timeout=10)
    if status != "ok":
        raise RuntimeError(f"FMA peak: {value}")
    return value


# --- one GEMM shape ---------------------------------------------------------------------------------------
def shape_model(spec: str):
    """(onnx model, inputs, flop, label) of one shape spec."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    if spec.startswith("conv:"):
        h, w, c, k = (int(x) for x in spec[5:].split("x"))
        weight = (rng.standard_normal((k, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
        node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[1, 1])
        x_shape, flop, label = [1, c, h, w], 2 * h * w * c * k, f"1x1 conv {h}x{w}x{c}->{k} (GEMM {h * w}x{c}x{k})"
    else:
        m, kk, n = (int(x) for x in spec.split("x"))
        weight = (rng.standard_normal((kk, n)) / np.sqrt(kk)).astype(np.float32)
        node = helper.make_node("MatMul", ["x", "w"], ["y"])
        x_shape, flop, label = [m, kk], 2 * m * kk * n, f"MatMul {m}x{kk}x{n}"
    graph = helper.make_graph([node], "gemm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(weight, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model, {"x": rng.standard_normal(x_shape).astype(np.float32)}, flop, label


def shape_row(spec: str, target: str, threads: int, repeat: int, work: Path, mode: str | None = None) -> dict:
    """One shape: braze (in precision ``mode``, if one) and onnxruntime
    float32, each timed alone; with a mode, braze's float32 build of the
    same shape too, in the same rotation (``f32_gflops``, ``speedup``: the
    mode's throughput over float32's, per phase)."""
    import onnx

    from braze.compiler import compile as braze_compile
    from braze.measure import BRAZE, ORT, compare, run_onnxruntime
    from braze.passes.precision import TOLERANCES
    from braze.timing import Engine, time_alone

    model, inputs, flop, label = shape_model(spec)
    stem = spec.replace(":", "_")
    onnx_path, art_path, f32_path = work / f"{stem}.onnx", work / f"{stem}.braze", work / f"{stem}-f32.braze"
    onnx.save(model, onnx_path)
    artifact = braze_compile(str(onnx_path), target=target, threads=threads, cache_dir=None, precision_mode=mode)
    artifact.save(str(art_path))
    low = artifact.manifest["precision"]["dtype"]
    worst = max(e.max_rel for e in compare(artifact.run(inputs), run_onnxruntime(model, inputs, threads)))
    kernels = [(k["name"], k.get("schedule"), k.get("schedule_params")) for k in artifact.kernels]
    engines = [Engine(BRAZE, str(art_path)), Engine(ORT, str(onnx_path))]
    if mode:
        braze_compile(str(onnx_path), target=target, threads=threads, cache_dir=None).save(str(f32_path))
        engines.append(Engine(BRAZE, str(f32_path), "braze-f32"))
    runs = max(1, -(-repeat // 10))
    timing = time_alone(engines, inputs, threads, phases=10, runs=runs, warmup=2, processes=2)
    braze_ms, ort_ms = timing.engines[BRAZE].median_ms, timing.engines[ORT].median_ms
    row = {"name": label, "shape": spec, "flop": flop, "ms": {"braze": braze_ms, "onnxruntime": ort_ms},
           "ratios": {"braze / onnxruntime": timing.ratio(BRAZE, ORT).to_dict()}, "control": None,
           "gflops": {"braze": flop / braze_ms / 1e6, "onnxruntime": flop / ort_ms / 1e6},
           "kernels": kernels, "mode": mode, "dtype": low, "ok": worst <= TOLERANCES.get(low, 1e-4), "max_rel": worst}
    if mode:
        f32_ms = timing.engines["braze-f32"].median_ms
        row["ms"]["braze-f32"], row["gflops"]["braze-f32"] = f32_ms, flop / f32_ms / 1e6
        row["ratios"]["braze float32 / braze"] = timing.ratio("braze-f32", BRAZE).to_dict()
    return row


# --- the report -----------------------------------------------------------------------------------------
def markdown(report: dict) -> str:
    p = report["peak"]
    top = p["gflops"]
    lines = [f"FMA peak: {top:.1f} GFLOP/s ({p['what']}; the highest of {len(p['runs'])} runs: "
             + ", ".join(f"{g:.0f}" for g in p["runs"]) + f"; implies {p['ghz']:.2f} GHz per core at "
             f"{p['fma_units']} FMA units of {p['lanes']} lanes)", "",
             "| shape | braze GFLOP/s | % of peak | onnxruntime GFLOP/s | % of peak | braze / onnxruntime time "
             "(min-max) | schedule |", "|---|---|---|---|---|---|---|"]
    mode = report.get("precision_mode")
    if mode:
        lines[-2:] = [f"braze in `{mode}` (onnxruntime in float32), and braze's float32 build of each shape "
                      "timed in the same rotation; the FMA peak is float32's.", "",
                      "| shape | braze GFLOP/s | % of FMA peak | braze float32 GFLOP/s | speedup over float32 "
                      "(min-max) | onnxruntime GFLOP/s | braze / onnxruntime time (min-max) | schedule |",
                      "|---|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        if "error" in r:
            lines.append(f"| {r['name']} | failed: {r['error']} |" + " |" * (6 if mode else 5))
            continue
        q, g = r["ratios"]["braze / onnxruntime"], r["gflops"]
        sched = ", ".join(f"{s}" for _, s, _ in r["kernels"])
        flag = "" if r["ok"] else " **outputs differ**"
        if mode:
            u = r["ratios"]["braze float32 / braze"]
            lines.append(f"| {r['name']} | {g['braze']:.1f} | {100 * g['braze'] / top:.0f}% | "
                         f"{g['braze-f32']:.1f} | **{u['ratio']:.2f}** ({u['ratio_min']:.2f}-{u['ratio_max']:.2f}) | "
                         f"{g['onnxruntime']:.1f} | {q['ratio']:.2f} ({q['ratio_min']:.2f}-{q['ratio_max']:.2f}) "
                         f"| {sched} |{flag}")
            continue
        lines.append(f"| {r['name']} | {g['braze']:.1f} | {100 * g['braze'] / top:.0f}% | "
                     f"{g['onnxruntime']:.1f} | {100 * g['onnxruntime'] / top:.0f}% | "
                     f"{q['ratio']:.2f} ({q['ratio_min']:.2f}-{q['ratio_max']:.2f}) | {sched} |" + flag)
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="cpu", help="braze target (cpu, cpu-avx2, cpu-avx512; default cpu)")
    ap.add_argument("--threads", type=int, default=2, help="threads for the peak and both engines (default 2)")
    ap.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated (default {','.join(SHAPES)})")
    ap.add_argument("--repeat", type=int, default=100, help="timed calls per engine and shape (default 100)")
    ap.add_argument("--out", type=Path, help="folder for the results file (default: benchmarks/results/<cpu>-<isa>/)")
    ap.add_argument("--precision-mode", help="compile braze in this mode (allow_mix_precision_bf16, ...) and time "
                                             "its float32 build beside it")
    args = ap.parse_args()
    os.environ["TVM_NUM_THREADS"] = str(args.threads)
    os.environ.pop("BRAZE_CACHE_DIR", None)

    from braze.targets import get_target
    from braze.targets.isa import missing, requirements

    def say(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    target = get_target(args.target, threads=args.threads)
    refused = missing(requirements(target))
    if refused:
        print(f"error: this host cannot run {args.target} code ({refused}): compile it, do not time it",
              file=sys.stderr)
        return 1
    runs = []

    def peak() -> dict:
        """One more run of the FMA loop; the peak so far (the highest run)."""
        run = fma_peak(args.target, args.threads)
        runs.append(run["gflops"])
        say(f"FMA loop {run['gflops']:.1f} GFLOP/s ({run['ghz']:.2f} GHz per core)")
        best = max(runs)
        return {**run, "gflops": best, "ghz": run["ghz"] * best / run["gflops"], "runs": list(runs)}

    import results_io

    mode = args.precision_mode
    report = results_io.result(
        f"gemm-{mode}" if mode else "gemm",
        "float32 GEMMs of the public models' shapes against onnxruntime, and the FMA peak" if not mode else
        f"GEMMs of the public models' shapes, braze in {mode} against its float32 build and onnxruntime float32",
        [], threads=args.threads, target=args.target, timing=results_io.time_alone(), control=None,
        precision_mode=mode, peak=None)
    with tempfile.TemporaryDirectory() as work:
        for spec in args.shapes.split(","):
            report["peak"] = peak()
            say(f"{spec}")
            try:
                row = shape_row(spec, args.target, args.threads, args.repeat, Path(work), args.precision_mode)
            except Exception as e:  # noqa: BLE001 -- one shape failing must not lose the others
                row = {"name": spec, "ratios": {}, "control": None, "error": f"{type(e).__name__}: {e}".splitlines()[0]}
            say(json.dumps({k: row[k] for k in row if k in ("name", "gflops", "error")}))
            report["rows"].append(row)
            results_io.write(report, args.out)
    report["peak"] = peak()
    print(f"wrote {results_io.write(report, args.out)}\n\n" + markdown(report))
    return 0 if all(r.get("ok") for r in report["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
