"""Commands that run artifacts and compare with onnxruntime: run, verify, bench, profile, demo."""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections import Counter

from ..errors import BrazeError, InputError, RuntimeOptionError, first_line
from ..version import __version__
from .common import (_inputs_for, _progress, atomic, build_options, CHECK_FAILED, Command, compile_from_args,
                     demo_model_path, fusion_from_args, gear_inputs, gear_option, layout_from_args, positive_int,
                     precision_from_args, spin_option)
from .remote import bench_over_rpc, profile_over_rpc, rpc_options, run_over_rpc, tracker_from_args


def cmd_run(args) -> int:
    import numpy as np

    from ..measure import load_inputs
    from ..runtime import load

    tracker = tracker_from_args(args)
    latency = None
    if tracker:
        if args.repeat:
            raise RuntimeOptionError("--repeat times a local run; with --rpc use braze bench or profile")
        outputs = run_over_rpc(args, tracker)
    else:
        artifact = load(args.artifact, spin=args.spin)
        inputs = load_inputs(args.inputs)
        outputs = artifact.run(inputs)
        if args.repeat:
            times = sorted(1e3 * t for t in artifact.time_run(inputs, repeat=args.repeat, warmup=args.warmup))
            latency = {"median_ms": statistics.median(times), "min_ms": times[0],
                       "p90_ms": times[min(len(times) - 1, int(0.9 * len(times)))], "runs": len(times),
                       "warmup": args.warmup, "threads": artifact.manifest.get("threads")}
    if args.output:
        out = args.output if args.output.endswith(".npz") else args.output + ".npz"
        with atomic(out, "wb") as f:
            np.savez(f, **outputs)
        if not args.json:
            print(f"wrote {out}: {', '.join(outputs)}")
    if args.json:
        print(json.dumps({"outputs": [{"name": n, "shape": list(v.shape), "dtype": str(v.dtype)}
                                      for n, v in outputs.items()], "latency": latency}, indent=2))
        return 0
    if not args.output:
        for name, value in outputs.items():
            print(f"{name}: {value.dtype}{list(value.shape)}  min {value.min():.6g}  max {value.max():.6g}")
    if latency:
        print(f"latency: median {latency['median_ms']:.3f} ms, p90 {latency['p90_ms']:.3f} ms, min "
              f"{latency['min_ms']:.3f} ms over {latency['runs']} runs (after {latency['warmup']} warm-up runs)")
    return 0


def _run_arguments(s) -> None:
    s.add_argument("artifact", help="the artifact folder (braze compile -o)")
    s.add_argument("--inputs", required=True, help=".npz with one array per input name")
    s.add_argument("-o", "--output", help="write the outputs to this .npz")
    s.add_argument("--repeat", type=int, default=0, metavar="N",
                   help="then time N more runs and print their latency (median, p90, min)")
    s.add_argument("--warmup", type=int, default=2, metavar="K", help="untimed runs before those (default 2)")
    s.add_argument("--json", action="store_true",
                   help='print {"outputs": [{"name", "shape", "dtype"}], "latency": {...} or null}')
    spin_option(s)
    rpc_options(s)


def cmd_verify(args) -> int:
    from ..measure import compare, parse_distribution, run_onnxruntime
    from ..tools.reports import VerifyReport

    parse_distribution(args.random)  # a bad --random fails before the compile
    artifact = compile_from_args(args)
    if artifact.gears and (args.per_group or args.suggest_keep):
        raise InputError("--per-group and --suggest-keep check one shape; compile it with --input-shape for "
                         "the gear to check")
    tolerance_dtype = (artifact.manifest.get("precision") or {}).get("dtype", "f32")
    tolerance = args.tolerance if args.tolerance is not None else _mode_tolerance(artifact)

    def check(inputs) -> VerifyReport:
        against = "float32" if tolerance_dtype != "f32" else "the same ops unfused"
        return VerifyReport(compare(artifact.run(inputs), run_onnxruntime(args.model, inputs)), tolerance,
                            _verify_groups(args, inputs) if args.per_group else None, against)

    if not artifact.gears or args.inputs:
        inputs = _inputs_for(args, artifact.inputs)
        gear = artifact.gear_for(inputs)
        reports = {gear["name"] if gear else "": check(inputs)}
    else:  # every gear, on random inputs of its shapes
        reports = {gear["name"]: check(_inputs_for(args, gear["inputs"])) for gear in artifact.gears}
    extra = {}
    if args.samples:
        extra["agreement"] = _agreement(args, artifact)
    if args.suggest_keep:
        extra["suggest_keep"] = _suggest_keep(args, inputs, tolerance)
    if args.json:
        data = reports[""].to_dict() if "" in reports else {"gears": {n: r.to_dict() for n, r in reports.items()}}
        data.update({k: v.to_dict() if hasattr(v, "to_dict") else v for k, v in extra.items()})
        print(json.dumps(data, indent=2))
    else:
        print("\n\n".join((f"gear {name}\n" if name else "") + r.table() for name, r in reports.items()))
        for v in extra.values():
            print("\n" + v.table())
    return 0 if all(r.ok for r in reports.values()) else CHECK_FAILED


def _mode_tolerance(artifact) -> float:
    """The default tolerance: float32's, or the precision mode's (docs/usage.md)."""
    from ..passes.precision import TOLERANCES

    return TOLERANCES[(artifact.manifest.get("precision") or {}).get("dtype", "f32")]


def _agreement(args, artifact):
    from ..tools.precision import top1_agreement

    return top1_agreement(artifact, args.model, artifact.inputs, args.samples, args.random)


def _suggest_keep(args, inputs, tolerance):
    """The greedy keep-dtype walk; the file is written when it succeeds."""
    from ..compiler import compile as braze_compile
    from ..compiler import fuse_only
    from ..measure import run_onnxruntime
    from ..passes.precision import read_keep
    from ..tools.precision import suggest_keep

    def options(keep):
        return dict(args.__dict__, keep_dtype=keep)

    def build(keep):
        return braze_compile(args.model, target=args.target, level=args.level, fusion=fusion_from_args(args),
                             input_shapes=args.input_shape, threads=args.threads,
                             precision_mode=args.precision_mode, modify_mixlist=args.modify_mixlist,
                             keep_dtype=keep, layout=layout_from_args(args))

    def fuse(keep):
        precision = precision_from_args(argparse.Namespace(**options(keep)))
        return fuse_only(args.model, args.level, fusion_from_args(args), args.input_shape, args.target,
                         precision, layout_from_args(args))[0]

    found = suggest_keep(args.model, inputs, run_onnxruntime(args.model, inputs), tolerance, build, fuse,
                         keep=list(read_keep(args.keep_dtype)), target=args.target)
    if found.ok:
        with atomic(args.suggest_keep, "w") as f:
            f.write(found.text())
    return found


def _verify_arguments(s) -> None:
    build_options(s)
    s.add_argument("--inputs", help=".npz of inputs (default: random)")
    s.add_argument("--random", default="normal", metavar="DIST",
                   help="random inputs' float values: normal (N(0, 1), the default) or uniform:LO,HI, e.g. "
                        "uniform:0,1 for a model that takes images scaled to [0, 1]")
    s.add_argument("--tolerance", type=float,
                   help="max error relative to max(1, |output|max) (default: 1e-4; in a 16-bit precision mode "
                        "the mode's, docs/usage.md)")
    s.add_argument("--per-group", action="store_true",
                   help="also check each fused kernel against the same ops unfused (in a 16-bit precision mode: "
                        "against float32), worst first, naming the ONNX nodes")
    s.add_argument("--suggest-keep", metavar="FILE",
                   help="with a 16-bit precision mode: find nodes to keep in float32 until the outputs are within "
                        "the tolerance, and write them as a --keep-dtype file")
    s.add_argument("--samples", type=positive_int, metavar="N",
                   help="also run N random inputs: the worst error, and top-1 agreement of class-score outputs")
    s.add_argument("--json", action="store_true",
                   help='print {"ok", "tolerance", "outputs": [...], "groups": [...]} (docs/usage.md)')


def cmd_bench(args) -> int:
    import tempfile

    from ..measure import bench
    from ..runtime import load
    from ..threads import spin_count

    if args.spin is not None:
        spin_count(args.spin)  # a typo fails now, not after a long compile
    tracker = tracker_from_args(args)
    if tracker:
        return bench_over_rpc(args, tracker, _inputs_for)
    if args.model.endswith(".onnx"):
        artifact = compile_from_args(args)
        tmp = tempfile.mkdtemp(prefix="braze-bench-")
        path, onnx_path = artifact.save(os.path.join(tmp, "model.braze")), args.model
    else:
        artifact, path = load(args.model), args.model
        onnx_path = args.onnx
        if not onnx_path:
            raise BrazeError("benchmarking an artifact needs the ONNX model to compare with: --onnx MODEL.onnx")
    threads = args.threads or os.cpu_count()
    r = bench(path, onnx_path, _inputs_for(args, gear_inputs(artifact, args.gear)), threads, repeat=args.repeat,
              phases=args.phases, self_check=args.self_check, spin=args.spin, processes=args.processes)
    print(json.dumps(r.to_dict(), indent=2) if args.json else r.table())
    return 0 if r.controls_ok else CHECK_FAILED


def _bench_arguments(s) -> None:
    build_options(s)
    rpc_options(s)
    s.add_argument("--onnx", help="with an artifact as MODEL: the ONNX model to compare with")
    s.add_argument("--inputs", help=".npz of inputs (default: random)")
    gear_option(s)
    s.add_argument("--repeat", type=positive_int, default=50,
                   help="timed runs per engine, spread over the phases (default 50)")
    s.add_argument("--phases", type=positive_int, default=10,
                   help="alternating phases per engine, each after every worker went idle (default 10)")
    s.add_argument("--processes", type=positive_int, default=3,
                   help="fresh worker processes per engine, one after the other, sharing the phases (default 3)")
    s.add_argument("--self-check", action="store_true",
                   help="also time each engine against a second worker of itself: the controls must give "
                        "1.00 +- 0.10 (exit status 3 if not)")
    spin_option(s, "braze's idle spin while benchmarking")
    s.add_argument("--json", action="store_true",
                   help='print the timings as JSON (docs/usage.md, "bench")')


def cmd_profile(args) -> int:
    from ..measure import profile
    from ..runtime import load
    from ..tools.reports import ProfileReport

    tracker = tracker_from_args(args)
    if tracker:
        return profile_over_rpc(args, tracker, _inputs_for)
    artifact = load(args.artifact)
    inputs = _inputs_for(args, gear_inputs(artifact, args.gear))
    theirs, unmatched = (_onnxruntime_profile(args, artifact, inputs) if args.onnx else (None, []))
    runs = max(args.repeat, 10)
    whole = statistics.median(artifact.time_run(inputs, repeat=runs)) * 1e3
    report = ProfileReport(profile(artifact, inputs, repeat=args.repeat), {k["name"]: k for k in artifact.kernels},
                           theirs, unmatched, whole, runs)
    if args.trace:
        with atomic(args.trace, "w") as f:
            json.dump(report.trace(), f)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.table(args.top))
    return 0


def _profile_arguments(s) -> None:
    s.add_argument("artifact")
    rpc_options(s)
    s.add_argument("--inputs", help=".npz of inputs (default: random)")
    s.add_argument("--repeat", type=positive_int, default=5,
                   help="runs to take each kernel's median over (default 5; the end-to-end time takes at least 10)")
    gear_option(s)
    s.add_argument("--top", type=int, default=25, help="show the N slowest kernels")
    s.add_argument("--trace", metavar="FILE.json",
                   help="write the kernels' times as a Chrome trace (chrome://tracing, ui.perfetto.dev)")
    s.add_argument("--onnx", metavar="MODEL.onnx",
                   help="also profile onnxruntime on the same inputs and threads, and give each kernel "
                        "the time of its ONNX nodes there")
    s.add_argument("--json", action="store_true",
                   help='print {"kernels": [...], "braze_ms", "end_to_end_ms", "runs", ...} (docs/usage.md)')


def cmd_demo(args) -> int:
    """Compile an embedded model, check it against onnxruntime, time both."""
    import tempfile

    import numpy as np

    from ..compiler import compile as braze_compile
    from ..measure import bench, compare, run_onnxruntime

    path = demo_model_path(args.model)
    print(f"braze {__version__} demo: {os.path.basename(path)} (shipped with braze), level {args.level}\n")
    artifact = braze_compile(path, level=args.level, threads=args.threads, progress=_progress(True))
    kinds = Counter(k["kind"] for k in artifact.kernels)
    print(f"\n{len(artifact.kernels)} kernels ({', '.join(f'{n} {k}' for k, n in kinds.most_common())}), "
          f"compiled in {artifact.manifest['compile_seconds']:.1f}s")
    inputs = dict(np.load(path.replace(".onnx", ".inputs.npz")))
    rows = compare(artifact.run(inputs), run_onnxruntime(path, inputs))
    print(f"\n{'output':<20} {'max abs':>10} {'max rel':>10}   vs onnxruntime")
    for r in rows:
        print(f"{r.name:<20} {r.max_abs:10.2e} {r.max_rel:10.2e}")
    ok = all(r.max_rel <= 1e-4 for r in rows)
    threads = args.threads or os.cpu_count()
    with tempfile.TemporaryDirectory() as tmp:
        saved = artifact.save(os.path.join(tmp, "demo.braze"))
        r = bench(saved, path, inputs, threads, repeat=args.repeat)
    print(f"\nlatency, braze against onnxruntime (as braze bench measures it):\n{r.table()}")
    print("numerics: " + ("ok (max rel error <= 1e-4)" if ok else "FAILED"))
    return 0 if ok else CHECK_FAILED


def _demo_arguments(s) -> None:
    s.add_argument("--model", default="mobilenetv2-tiny", help="embedded model: mobilenetv2-tiny, bert-tiny, vit-tiny")
    s.add_argument("--level", type=int, default=2, choices=range(0, 4), help="fusion level (default 2)")
    s.add_argument("--threads", type=positive_int, help="CPU threads (default: all cores)")
    s.add_argument("--repeat", type=positive_int, default=50, help="timed runs per engine (default 50)")


def _verify_groups(args, inputs):
    """Each group against the same ops unfused; in a 16-bit precision mode,
    each 16-bit group against float32, worst first (tools/precision.py)."""
    from ..compiler import fuse_only
    from ..pipeline import default_precision_mode
    from ..measure import verify_groups
    from ..passes.precision import mode_dtype
    from ..targets import get_target
    from ..tools.precision import precision_groups

    precision = precision_from_args(args)
    module, _ = fuse_only(args.model, args.level, fusion_from_args(args), args.input_shape, args.target, precision,
                          layout_from_args(args))
    if mode_dtype(precision["mode"] or default_precision_mode(get_target(args.target))):
        return precision_groups(module, inputs, args.target)
    return verify_groups(module, inputs, args.target)


def _onnxruntime_profile(args, artifact, inputs):
    """onnxruntime's per-node times on the same inputs and threads, per braze kernel."""
    import onnx

    from ..measure import attribute_nodes, profile_onnxruntime
    from ..threads import current_threads

    try:
        model = onnx.load(args.onnx, load_external_data=False)
    except Exception as e:  # noqa: BLE001 -- onnx's DecodeError, OSError: a typed error naming the file
        raise InputError(f"{args.onnx}: cannot read it as an ONNX model ({e.__class__.__name__}); "
                         "give the .onnx the artifact was compiled from") from None
    try:
        rows = profile_onnxruntime(args.onnx, inputs, current_threads(), repeat=args.repeat)
    except Exception as e:  # noqa: BLE001 -- onnxruntime's own errors (wrong inputs for this model, ...)
        raise InputError(f"{args.onnx}: onnxruntime could not run it on the artifact's inputs ({first_line(e)}); "
                         "give the .onnx the artifact was compiled from") from None
    return attribute_nodes(model, artifact.kernels, rows)


COMMANDS = [
    Command("run", "run an artifact on inputs from an .npz", _run_arguments, cmd_run),
    Command("verify", "compile and compare with onnxruntime", _verify_arguments, cmd_verify),
    Command("bench", "braze vs onnxruntime latency, same inputs and threads", _bench_arguments, cmd_bench),
    Command("profile", "time per kernel of an artifact", _profile_arguments, cmd_profile),
    Command("demo", "compile, verify and benchmark a model shipped with braze", _demo_arguments, cmd_demo),
]
