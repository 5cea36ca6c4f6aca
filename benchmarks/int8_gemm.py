"""The int8 GEMM of a quantized model: braze against onnxruntime, as a share of the VNNI and AMX-INT8 peaks.

    python benchmarks/int8_gemm.py [--target cpu] [--threads 2] [--shapes 128x768x3072,...]
                                   [--variants vnni,8x2,6x4] [--repeat 100] [--out DIR]

The model, for each shape ``MxKxN``: ONNX ``MatMulInteger`` of a uint8
``[M, K]`` input by a constant int8 ``[K, N]`` weight, ``Cast`` to float32
and ``Mul`` by a per-column scale, as a quantized model's matmul and its
dequantization. braze compiles it to one kernel (the ``amx_int8`` rule
where the target has AMX-INT8, else ``vnni``, else ``pmaddwd`` where it has
no VNNI; docs/schedules.md); the table names the rule. onnxruntime
runs its MatMulInteger kernel (MLAS), then the two elementwise nodes. Both
are checked exactly against numpy's int32 product.

Timing: ``braze.timing.time_alone`` (as ``braze bench``): each engine alone
in worker processes of its own, 10 alternating phases over 2 processes per
engine, medians of the timed calls; a ratio is the median of the per-phase
ratios, with their range. The control: braze against a second worker of
the same build (``braze#2``), which should read 1.00. ``--variants``
adds braze builds to the same rotation, each against the default build: a
rule's name (``vnni``: that rule with its own parameters) or ``RxV``, the
``vnni`` rule pinned to that register block (rows x vectors).

The peak: a VPDPBUSD loop that braze builds with TVM for the target
(``vnni_loop``): every thread runs rounds of the ``vnni`` rule's own step
(``intrinsics_int8.vpdpbusd_llvm``) on as many independent accumulators as
the registers hold less four, chained ``PEAK_DEPTH`` deep, no memory
traffic; the count of VPDPBUSD in its assembly checks that LLVM kept it
that way. Its rate, ``4 * lanes`` multiply-adds an instruction, median of
several calls, is what the cores reach at the clock they really run; it
runs before every shape and after the last, and the peak is the highest of
those medians (benchmarks/gemm.py's method for the FMA peak). The clock it
implies at ``fma_units`` VNNI ports a core (the FMA ports: rate / threads
/ (4 * lanes * fma_units)) is printed beside it. Without VNNI in the
target there is no peak, and no share of it.

The AMX-INT8 peak, where the target has AMX-INT8: likewise a TDPBUSD loop
(``amx_loop``), each thread chaining TDPBUSD on the four accumulator tiles
of the ``amx_int8`` rule's block (16 x 16 x 64 multiply-adds each), from
two A and two B tiles loaded once, no memory traffic in the loop; the
clock it implies at one TDPBUSD every 16 cycles a core is printed beside it.

Writes benchmarks/results/<cpu>-<isa>/int8-gemm.json (``int8-gemm-TARGET``
for a target other than ``cpu``; ``--out DIR`` elsewhere) after each shape,
and prints the table.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SHAPES = ["128x768x3072"]
PEAK_ITERATIONS = 20_000
#: VPDPBUSD chained in one statement (as benchmarks/gemm.py's PEAK_DEPTH)
PEAK_DEPTH = 8
#: multiply-adds a core's tile unit does a cycle: a TDPBUSD (16 x 16 x 64) every 16 cycles
TDPBUSD_MACS_PER_CYCLE = 1024


# --- the VNNI peak ------------------------------------------------------------------------------------
def vnni_loop(lanes: int, accumulators: int, iterations: int, tasks: int):
    """A TIR function: ``tasks`` parallel tasks, each ``iterations`` rounds
    of ``PEAK_DEPTH`` VPDPBUSD on each of ``accumulators`` vectors of
    ``lanes`` int32."""
    from tvm.script import tirx as T

    from braze.codegen.schedules.intrinsics_int8 import vpdpbusd_llvm

    step, vec = f"braze_vpdpbusd_{32 * lanes}", f"int32x{lanes}"

    def chain(x, word, panel):
        for _ in range(PEAK_DEPTH):
            x = T.call_pure_extern(vec, step, x, word, panel)
        return x

    @T.prim_func
    def main(seed: T.Buffer((lanes,), "int32"), out: T.Buffer((tasks, accumulators, lanes), "int32")):
        for t in T.parallel(tasks):
            acc = T.decl_buffer((accumulators, lanes), "int32", scope="local")
            with T.attr(0, "pragma_import_llvm", vpdpbusd_llvm(lanes)):
                for a in T.unroll(accumulators):
                    acc[a, T.ramp(0, 1, lanes)] = T.broadcast(seed[0] + a, lanes)
                for _ in range(iterations):
                    for a in T.unroll(accumulators):
                        acc[a, T.ramp(0, 1, lanes)] = chain(acc[a, T.ramp(0, 1, lanes)], seed[1],
                                                            seed[T.ramp(0, 1, lanes)])
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
        lib = tvm.compile(vnni_loop(lanes, accumulators, PEAK_ITERATIONS, threads), target=tvm_target(target))
        asm = "\n".join(m.inspect_source("asm") for m in [lib.mod, *lib.mod.imports] if m.kind == "llvm")
        seed = tvm.runtime.tensor(np.arange(lanes, dtype="int32"))
        out = tvm.runtime.empty((threads, accumulators, lanes), "int32")
        run = lib.mod.time_evaluator("main", tvm.cpu(), number=3, repeat=repeat)
        seconds = statistics.median(run(seed, out).results)
        macs = 4 * lanes * accumulators * PEAK_ITERATIONS * PEAK_DEPTH * threads
        conn.send(("ok", {"what": f"VPDPBUSD loop: {threads} threads x {accumulators} accumulators x {lanes} lanes, "
                                  f"{PEAK_ITERATIONS} x {PEAK_DEPTH} VPDPBUSD, median of {repeat}",
                          "gmacs": macs / seconds / 1e9, "lanes": lanes, "accumulators": accumulators,
                          "ports": target.fma_units, "vpdpbusd_instructions": asm.count("vpdpbusd"),
                          "ghz": macs / seconds / 1e9 / threads / (4 * lanes * target.fma_units)}))
    except BaseException as e:  # report, never hang the parent
        conn.send(("error", f"{type(e).__name__}: {e}"))


def vnni_peak(target_spec: str, threads: int, repeat: int = 9, worker=_peak_worker, what: str = "VNNI") -> dict:
    """The VPDPBUSD peak (``worker``'s: ``_amx_peak_worker`` for TDPBUSD's)
    for ``threads`` threads, in a process of its own."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    os.environ["TVM_NUM_THREADS"] = str(threads)
    proc = ctx.Process(target=worker, args=(target_spec, threads, repeat, child), daemon=True)
    proc.start()
    child.close()
    try:
        status, value = parent.recv()
    except EOFError:
        status, value = "error", f"the peak worker died (exit code {proc.exitcode})"
    proc.join(timeout=10)
    if status != "ok":
        raise RuntimeError(f"{what} peak: {value}")
    return value


# --- the AMX-INT8 peak --------------------------------------------------------------------------------
def amx_loop(iterations: int, tasks: int):
    """A TIR function: ``tasks`` parallel tasks, each ``iterations`` rounds
    of ``PEAK_DEPTH`` TDPBUSD on each of the four accumulator tiles (tiles
    0-3, fed by A tiles 4, 5 and B tiles 6, 7 as in the ``amx_int8`` block)."""
    from tvm.script import tirx as T

    from braze.codegen.schedules.intrinsics_int8 import _amx_int8_config

    def tile(name: str, *args):
        return T.call_llvm_intrin("void", f"llvm.x86.{name}", *args)

    @T.prim_func
    def main(src: T.Buffer((1024,), "int8"), out: T.Buffer((tasks, 4, 256), "int32")):
        for t in T.parallel(tasks):
            _amx_int8_config()
            for a in T.unroll(4):
                tile("tilezero", T.Cast("int8", a))
                tile("tileloadd64", T.Cast("int8", 4 + a), T.address_of(src[0]), T.int64(64))
            for _ in range(iterations):
                for _d in T.unroll(PEAK_DEPTH):
                    for a in T.unroll(4):
                        tile("tdpbusd", T.Cast("int8", a), T.Cast("int8", 4 + a // 2), T.Cast("int8", 6 + a % 2))
            for a in T.unroll(4):
                tile("tilestored64", T.Cast("int8", a), T.address_of(out[t, a, 0]), T.int64(64))
            tile("tilerelease")

    return main


def _amx_peak_worker(target_spec: str, threads: int, repeat: int, conn) -> None:
    try:
        import tvm

        from braze.codegen.tvm_target import tvm_target
        from braze.targets import get_target
        from braze.targets.isa import amx_permitted

        if not amx_permitted():
            raise RuntimeError("the OS refused this process AMX tile state")
        target = get_target(target_spec, threads=threads)
        iterations = PEAK_ITERATIONS // 2
        lib = tvm.compile(amx_loop(iterations, threads), target=tvm_target(target))
        asm = "\n".join(m.inspect_source("asm") for m in [lib.mod, *lib.mod.imports] if m.kind == "llvm")
        src = tvm.runtime.tensor(np.ones(1024, dtype="int8"))
        out = tvm.runtime.empty((threads, 4, 256), "int32")
        run = lib.mod.time_evaluator("main", tvm.cpu(), number=3, repeat=repeat)
        seconds = statistics.median(run(src, out).results)
        macs = 16 * 16 * 64 * 4 * iterations * PEAK_DEPTH * threads
        conn.send(("ok", {"what": f"TDPBUSD loop: {threads} threads x 4 accumulator tiles, {iterations} x "
                                  f"{PEAK_DEPTH} x 4 TDPBUSD, median of {repeat}",
                          "gmacs": macs / seconds / 1e9, "tdpbusd_instructions": asm.count("tdpbusd"),
                          "ghz": macs / seconds / 1e9 / threads / TDPBUSD_MACS_PER_CYCLE}))
    except BaseException as e:  # report, never hang the parent
        conn.send(("error", f"{type(e).__name__}: {e}"))


# --- one shape ----------------------------------------------------------------------------------------------
def shape_model(spec: str):
    """(onnx model, inputs, exact output, multiply-adds) of ``MxKxN``."""
    from onnx import TensorProto, helper, numpy_helper

    m, k, n = (int(x) for x in spec.split("x"))
    rng = np.random.default_rng(0)
    weight = rng.integers(-128, 128, (k, n)).astype(np.int8)
    scale = rng.uniform(1e-3, 2e-3, n).astype(np.float32)
    nodes = [helper.make_node("MatMulInteger", ["a", "w"], ["acc"]),
             helper.make_node("Cast", ["acc"], ["wide"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["wide", "scale"], ["y"])]
    graph = helper.make_graph(nodes, "int8_gemm", [helper.make_tensor_value_info("a", TensorProto.UINT8, [m, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
                              [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(scale, "scale")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    a = rng.integers(0, 256, (m, k)).astype(np.uint8)
    exact = (a.astype(np.int32) @ weight.astype(np.int32)).astype(np.float32) * scale
    return model, {"a": a}, exact, m * k * n


def _pins(variant: str) -> dict:
    """The schedule pins of a ``--variants`` entry: a rule's name, or
    ``RxV``, the ``vnni`` rule's register block."""
    if variant.replace("x", "").isdigit():
        rows, vectors = (int(x) for x in variant.split("x"))
        return {"rule": "vnni", "params": {"rows": rows, "vectors": vectors}}
    return {"rule": variant}


def shape_row(spec: str, target: str, threads: int, repeat: int, variants: list[str], work: Path) -> dict:
    """One shape: braze (default build, its control, pinned variants) and
    onnxruntime, each timed alone, one rotation."""
    import onnx

    from braze.compiler import compile as braze_compile
    from braze.measure import BRAZE, ORT, run_onnxruntime
    from braze.timing import Engine, time_alone

    model, inputs, exact, macs = shape_model(spec)
    onnx_path = work / f"{spec}.onnx"
    onnx.save(model, onnx_path)
    builds = {BRAZE: None, **{f"braze {v}": v for v in variants}}
    engines, kernels, exact_ok = [], {}, {}
    for label, variant in builds.items():
        art = braze_compile(str(onnx_path), target=target, threads=threads, cache_dir=None,
                            schedules=None if variant is None else {"k0": _pins(variant)})
        exact_ok[label] = bool(np.array_equal(art.run(inputs)["y"], exact))
        kernels[label] = [(k["name"], k.get("schedule"), k.get("schedule_params")) for k in art.kernels]
        path = work / f"{spec}-{label.replace(' ', '-')}.braze"
        art.save(str(path))
        engines.append(Engine(BRAZE, str(path), label))
        if variant is None:
            engines.append(Engine(BRAZE, str(path), "braze#2"))
    engines.append(Engine(ORT, str(onnx_path)))
    exact_ok[ORT] = bool(np.array_equal(run_onnxruntime(model, inputs, threads)["y"], exact))
    timing = time_alone(engines, inputs, threads, phases=10, runs=max(1, -(-repeat // 10)), warmup=2, processes=2)
    ms = {e.name: timing.engines[e.name].median_ms for e in engines}
    ratios = {"braze / onnxruntime": timing.ratio(BRAZE, ORT).to_dict()}
    ratios.update({f"braze {v} / braze": timing.ratio(f"braze {v}", BRAZE).to_dict() for v in variants})
    return {"name": spec, "macs": macs, "ms": ms, "ratios": ratios, "control": timing.ratio(BRAZE, "braze#2").to_dict(),
            "gmacs": {n: macs / t / 1e6 for n, t in ms.items()}, "kernels": kernels, "exact": exact_ok,
            "quartiles_ms": {n: timing.engines[n].to_dict() for n in ms}, "phases": timing.method()}


# --- the report ---------------------------------------------------------------------------------------
def _range(r: dict) -> str:
    return f"{r['ratio']:.2f} ({r['ratio_min']:.2f}-{r['ratio_max']:.2f})"


def markdown(report: dict) -> str:
    peak, amx = report["peak"], report.get("amx_peak")
    top = peak["gmacs"] if peak else None
    tiles = amx["gmacs"] if amx else None
    head = []
    if peak:
        head += [f"VNNI peak: {top:.0f} GMAC/s ({peak['what']}; the highest of {len(peak['runs'])} runs: "
                 + ", ".join(f"{g:.0f}" for g in peak["runs"]) + f"; implies {peak['ghz']:.2f} GHz at "
                 f"{peak['ports']} VPDPBUSD ports of {4 * peak['lanes']} multiply-adds)", ""]
    if amx:
        head += [f"AMX-INT8 peak: {tiles:.0f} GMAC/s ({amx['what']}; the highest of {len(amx['runs'])} runs: "
                 + ", ".join(f"{g:.0f}" for g in amx["runs"]) + f"; implies {amx['ghz']:.2f} GHz at "
                 f"{TDPBUSD_MACS_PER_CYCLE} multiply-adds a cycle a core, one TDPBUSD every 16 cycles)", ""]
    if report["target"] != "cpu":
        head += [f"braze builds for `{report['target']}`; onnxruntime runs the kernels it picks for this host's "
                 "ISA.", ""]
    columns = ["shape", "engine", "ms", "GMAC/s", "% of VNNI peak", *(["% of AMX-INT8 peak"] if tiles else []),
               "time / onnxruntime's (min-max)", "schedule"]
    lines = head + ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in report["rows"]:
        if "error" in r:
            lines.append(f"| {r['name']} | failed: {r['error']} |" + " |" * (len(columns) - 2))
            continue
        for name, ms in r["ms"].items():
            g = r["gmacs"][name]
            share = f"{100 * g / top:.0f}%" if top else "-"
            if tiles:
                share += f" | {100 * g / tiles:.0f}%"
            if name == "braze":
                ratio = _range(r["ratios"]["braze / onnxruntime"])
            elif name == "braze#2":
                ratio = f"control: {_range(r['control'])} of braze's"
            elif f"{name} / braze" in r["ratios"]:
                ratio = f"{_range(r['ratios'][f'{name} / braze'])} of braze's"
            else:
                ratio = "1"
            sched = ", ".join(f"{s} {p}" for _, s, p in r["kernels"].get(name.split("#")[0], [])) or "MLAS"
            flag = "" if r["exact"].get(name.split("#")[0], True) else " **not exact**"
            lines.append(f"| {r['name']} | {name} | {ms:.3f} | {g:.0f} | {share} | {ratio} | {sched} |{flag}")
        if top and r["gmacs"]["onnxruntime"] > top:
            lines += ["", f"onnxruntime ran {r['name']} above the VPDPBUSD peak: not a VNNI kernel (MLAS has "
                          "AMX-INT8 kernels, TDPBUSD, and this CPU has AMX)."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="cpu", help="braze target (cpu, cpu-avx2, cpu-avx512; default cpu)")
    ap.add_argument("--threads", type=int, default=2, help="threads for the peak and every engine (default 2)")
    ap.add_argument("--shapes", default=",".join(SHAPES), help=f"MxKxN, comma-separated (default {','.join(SHAPES)})")
    ap.add_argument("--variants", default="", help="rules (vnni), or vnni register blocks RxV (rows x vectors), to "
                    "time beside the default build")
    ap.add_argument("--repeat", type=int, default=100, help="timed calls per engine and shape (default 100)")
    ap.add_argument("--out", type=Path, help="folder for the results file (default: benchmarks/results/<cpu>-<isa>/)")
    args = ap.parse_args()
    os.environ["TVM_NUM_THREADS"] = str(args.threads)
    os.environ.pop("BRAZE_CACHE_DIR", None)

    from braze.codegen.schedules.amx_int8 import has_amx_int8
    from braze.codegen.schedules.vnni import has_vnni
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

    def tracker(what: str, worker, available):
        """A function that runs ``worker``'s loop once more (where the
        target has its instruction) and gives its peak so far (the highest run)."""
        runs: list[float] = []

        def more() -> dict | None:
            if not available(target):
                return None
            run = vnni_peak(args.target, args.threads, worker=worker, what=what)
            runs.append(run["gmacs"])
            say(f"{what} loop {run['gmacs']:.0f} GMAC/s")
            best = max(runs)
            clock = {"ghz": run["ghz"] * best / run["gmacs"]} if "ghz" in run else {}
            return {**run, "gmacs": best, **clock, "runs": list(runs)}

        return more

    peaks = (tracker("VNNI", _peak_worker, has_vnni), tracker("AMX-INT8", _amx_peak_worker, has_amx_int8))

    import results_io

    report = results_io.result(
        "int8-gemm", "int8 GEMM (MatMulInteger + Cast + Mul): braze's int8 schedules against onnxruntime", [],
        threads=args.threads, target=args.target, timing=results_io.time_alone(),
        control="braze against a second worker of the same build (braze#2)", peak=None, amx_peak=None)
    variants = [v for v in args.variants.split(",") if v]

    def write() -> Path:
        return results_io.write(report, args.out)

    with tempfile.TemporaryDirectory() as work:
        for spec in args.shapes.split(","):
            report["peak"], report["amx_peak"] = (more() for more in peaks)
            say(spec)
            try:
                row = shape_row(spec, args.target, args.threads, args.repeat, variants, Path(work))
            except Exception as e:  # noqa: BLE001 -- one shape failing must not lose the others
                row = {"name": spec, "ratios": {}, "control": None,
                       "error": f"{type(e).__name__}: {e}".splitlines()[0]}
            report["rows"].append(row)
            write()
    report["peak"], report["amx_peak"] = (more() for more in peaks)
    print(f"wrote {write()}\n\n" + markdown(report))
    return 0 if all(all(r.get("exact", {}).values()) and "error" not in r for r in report["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
