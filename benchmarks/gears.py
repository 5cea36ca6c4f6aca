"""Gears against static compiles: each gear's latency beside a compile of
that shape alone, the artifact sizes, the compile times and the kernels shared.

    python benchmarks/gears.py MODEL.onnx (--dynamic-batch 1,2,4,8 | --dynamic-dims "B=1,4;S=64,128" | --gears ...)
                               [--threads 2] [--repeat 20] [--phases 5] [--out DIR]

For every gear: the geared artifact and a static compile of the gear's
shapes (``input_shapes``) run the same random inputs in one process, one
after the other in alternating phases (both are braze, one thread pool, so
neither runs while the other does); the ratio is the median of the gear's
times over the median of the static compile's, with the lowest and highest
per-phase ratio as the spread. A control row times the static artifact
against a second load of itself (it must give 1.00 within the noise).

Sizes: lib.so of the geared artifact over lib.so of a one-gear artifact (the
first gear). Writes benchmarks/results/<cpu>-<isa>/gears-MODEL.json
(``--out DIR`` elsewhere) and prints the table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import braze
from braze.frontend.gears import gear_shapes, parse_gears
from braze.frontend.importer import load_model
from braze.measure import random_inputs


def _phase_times(first, second, inputs, repeat: int, phases: int) -> tuple[float, float, float]:
    """(ratio of medians, lowest and highest per-phase ratio), first over second."""
    run_a, run_b = first.runner(inputs), second.runner(inputs)
    for run in (run_a, run_b):
        for _ in range(3):
            run()
    a_all, b_all, ratios = [], [], []
    for _ in range(phases):
        a = _times(run_a, repeat)
        b = _times(run_b, repeat)
        a_all += a
        b_all += b
        ratios.append(statistics.median(a) / statistics.median(b))
    return statistics.median(a_all) / statistics.median(b_all), min(ratios), max(ratios)


def _ratio(value: float, low: float, high: float) -> dict:
    return {"ratio": value, "ratio_min": low, "ratio_max": high}


def _fmt(r: dict) -> str:
    return f"{r['ratio']:.2f} ({r['ratio_min']:.2f}-{r['ratio_max']:.2f})"


def _times(run, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        out.append(time.perf_counter() - t0)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model")
    p.add_argument("--dynamic-batch")
    p.add_argument("--dynamic-dims")
    p.add_argument("--gears")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--phases", type=int, default=5)
    p.add_argument("--out", help="folder for the results file (default: benchmarks/results/<cpu>-<isa>/)")
    args = p.parse_args(argv)
    os.environ.pop("BRAZE_CACHE_DIR", None)  # every compile time is a real one
    spec = {"dynamic_batch": args.dynamic_batch, "dynamic_dims": args.dynamic_dims, "gears": args.gears}
    proto = load_model(args.model)
    gears = parse_gears(proto, **spec)

    t0 = time.perf_counter()
    geared = braze.compile(args.model, threads=args.threads, **spec)
    geared_s = time.perf_counter() - t0
    tmp = tempfile.mkdtemp(prefix="braze-gears-")
    geared_lib = os.path.getsize(os.path.join(geared.save(os.path.join(tmp, "geared")), "lib.so"))
    geared = braze.load(os.path.join(tmp, "geared"))
    one = braze.compile(args.model, threads=args.threads, gears=[gears[0].to_dict()])
    one_lib = os.path.getsize(os.path.join(one.save(os.path.join(tmp, "one")), "lib.so"))
    calls = sum(len(g["kernels"]) for g in geared.gears)

    rows, static_s = [], 0.0
    for gear, entry in zip(gears, geared.gears):
        shapes = gear_shapes(proto, gear)
        t0 = time.perf_counter()
        static = braze.compile(args.model, threads=args.threads, input_shapes=shapes)
        static_s += time.perf_counter() - t0
        inputs = random_inputs(entry["inputs"])
        ratio, low, high = _phase_times(geared, static, inputs, args.repeat, args.phases)
        ms = statistics.median(_times(static.runner(inputs), args.repeat)) * 1e3
        rows.append({"name": gear.name, "ms": {"static": ms}, "ratios": {"gear / static": _ratio(ratio, low, high)}})
        print(f"{gear.name:16s} static {ms:8.3f} ms  gear/static {ratio:.2f} ({low:.2f}-{high:.2f})", flush=True)
    control = _phase_times(static, braze.compile(args.model, threads=args.threads, input_shapes=shapes),
                           inputs, args.repeat, args.phases)
    for row in rows:
        row["control"] = _ratio(*control)
    import results_io

    model = os.path.splitext(os.path.basename(args.model))[0]
    result = results_io.result(
        f"gears-{model}", f"{model}: each gear of one geared artifact against a static compile of that gear's shapes",
        rows, threads=args.threads,
        timing=f"both artifacts in one process, {args.phases} alternating phases of {args.repeat} calls each; "
               "the ratio of the medians, and the range of the per-phase ratios",
        control="the static artifact against a second compile of itself", compile_seconds=round(geared_s, 2),
        static_compile_seconds=round(static_s, 2), kernels=len(geared.kernels), kernel_calls=calls,
        lib_bytes=geared_lib, one_gear_lib_bytes=one_lib, size_ratio=round(geared_lib / one_lib, 3))
    lines = [f"# Gears: {model} ({len(gears)} gears), {args.threads} threads", "",
             "| gear | static compile: latency, ms | gear / static (spread) |", "|---|---|---|"]
    lines += [f"| {r['name']} | {r['ms']['static']:.3f} | {_fmt(r['ratios']['gear / static'])} |" for r in rows]
    lines += [f"| control (static / static) | | {_fmt(_ratio(*control))} |", "",
              f"- compile: {geared_s:.1f} s for the {len(gears)} gears in one artifact, "
              f"{static_s:.1f} s for the {len(gears)} static compiles",
              f"- kernels: {len(geared.kernels)} built for the gears' {calls} ({calls - len(geared.kernels)} shared)",
              f"- lib.so: {geared_lib} bytes, {result['size_ratio']:.2f}x the one-gear artifact's {one_lib}"]
    print(f"wrote {results_io.write(result, args.out)}\n\n" + "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
