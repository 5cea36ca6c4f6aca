"""Commands that fuse, plan and build: compile, explain, kernels, schedule, tune."""

from __future__ import annotations

import json
import os
import sys
import time

from .. import interrupts
from ..errors import InputError
from .common import (_progress, _write_text, atomic, build_options, CHECK_FAILED, Command, compile_from_args,
                     compile_options, fusion_from_args, gear_bindings, gear_options, layout_from_args, positive_int,
                     precision_from_args, process_started)


def cmd_compile(args) -> int:
    from ..runtime.artifact import check_output_path

    check_output_path(os.path.abspath(args.output))  # before a long compile, not after
    artifact = compile_from_args(args)
    interrupts.stop_if_received()
    path = artifact.save(args.output)
    m = artifact.manifest
    seconds = time.time() - process_started()
    if args.json:
        print(json.dumps({"artifact": str(path), "kernels": len(m["kernels"]), "compile_seconds": round(seconds, 3),
                          "target": m["target"]["name"], "level": m["level"],
                          "inputs": m["inputs"], "outputs": m["outputs"],
                          "gears": [g["name"] for g in artifact.gears] if artifact.gears else None,
                          "fusion": {k: (m["fusion"] or {}).get(k) for k in ("ops_before", "kernels")}}, indent=2))
    elif artifact.gears:
        calls = sum(len(g["kernels"]) for g in artifact.gears)
        print(f"wrote {path}: {len(artifact.gears)} gears ({', '.join(g['name'] for g in artifact.gears)}), "
              f"{len(m['kernels'])} kernels built for their {calls} ({calls - len(m['kernels'])} shared), "
              f"compiled in {seconds:.1f}s")
    else:
        print(f"wrote {path}: {len(m['kernels'])} kernels, compiled in {seconds:.1f}s")
    if args.fusion_result:
        from ..passes.fusion.explain import fusion_result

        result = fusion_result(m.get("fusion"), m["model"])
        with atomic(args.fusion_result, "w") as f:
            json.dump(result, f, indent=1)
        print(f"wrote {args.fusion_result}: match_times and effect_times of "
              f"{len(result[m['model']]['graph_fusion'])} rules")
    if m.get("estimate"):
        print(f"estimated {m['estimate']['total_us']:.2f} us on {m['estimate']['target']} (roofline; docs/targets.md)")
    return 0


def _compile_arguments(s) -> None:
    build_options(s)
    s.add_argument("-o", "--output", required=True, help="artifact folder, e.g. model.braze")
    s.add_argument("--fusion-result", metavar="FILE.json",
                   help="also write per-rule match_times/effect_times, as the Ascend graph engine's fusion_result.json")
    s.add_argument("--json", action="store_true",
                   help='print a summary: {"artifact", "kernels", "compile_seconds", "target", "level", "inputs", '
                        '"outputs", "gears", "fusion"}')


def cmd_explain(args) -> int:
    from ..compiler import fuse_only

    bindings = gear_bindings(args)
    if len(bindings) > 1:  # a report per gear
        if args.dot or args.html:
            raise InputError("--dot and --html draw one shape: give it with --input-shape")
        reports = {name: fuse_only(args.model, args.level, fusion_from_args(args), shapes, args.target,
                                   precision_from_args(args), layout_from_args(args))[1]
                   for name, shapes in bindings}
        if args.json:
            print(json.dumps({"gears": {n: r.to_dict() for n, r in reports.items()}}, indent=2))
        else:
            print("\n\n".join(f"gear {n}\n{r.table()}" for n, r in reports.items()))
        return 0
    module, report = fuse_only(args.model, args.level, fusion_from_args(args), bindings[0][1], args.target,
                               precision_from_args(args), layout_from_args(args))
    if args.dot or args.html:
        from ..passes.fusion import draw

        if args.dot:
            _write_text(args.dot, draw.to_dot(module))
            import shutil

            if shutil.which("dot") is None:
                print(f"note: {args.dot} is Graphviz DOT, and Graphviz's `dot` is not installed here to render it "
                      "(`dot -Tsvg`); --html draws the graph with nothing to install", file=sys.stderr)
        if args.html:
            from ..codegen.kernel import partition

            names = [k.name for k in partition(module.main)]  # as the artifact and `braze profile` name them
            _write_text(args.html, draw.to_html(module, report, _profile_times(args.profile), names))
    from ..passes.layout_blocks import layout_summary, summary_line

    layout = layout_summary(module)
    if args.json:
        print(json.dumps({**report.to_dict(), "layout": layout}, indent=2))
    else:
        print(report.table())
        if summary_line(layout):
            print("\n  " + summary_line(layout))
    return 0


def _explain_arguments(s) -> None:
    compile_options(s)
    gear_options(s, pad=False)
    s.add_argument("--json", action="store_true", help="the record as JSON (stable keys)")
    s.add_argument("--dot", metavar="FILE", help="write the fused graph as Graphviz DOT (render it with Graphviz's "
                                                 "dot; --html needs nothing installed)")
    s.add_argument("--html", metavar="FILE",
                   help="write the fused graph as a self-contained HTML page: an SVG of the kernels and their data "
                        "flow, each kernel's ops, nodes and rule on hover")
    s.add_argument("--profile", metavar="PROFILE.json",
                   help="with --html: `braze profile --json` of an artifact built with the same options; each "
                        "kernel's time goes in its tooltip")


def _profile_times(path) -> dict | None:
    """Kernel name -> ms from ``braze profile --json``'s file, or None."""
    if not path:
        return None
    try:
        with open(path) as f:
            data = json.load(f)
        return {k["kernel"]: k["ms"] for k in data["kernels"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{path}: not the JSON of braze profile --json ({e})") from None


def cmd_kernels(args) -> int:
    from ..tools.experiment import kernels, kernels_table

    listings = {}
    for name, shapes in gear_bindings(args):
        found = kernels(args.model, args.level, fusion_from_args(args), shapes, args.target, args.threads,
                        precision_from_args(args), layout_from_args(args))
        if args.sort != "order":
            found = sorted(found, key=lambda k: -getattr(k, args.sort))
        listings[name] = found
    if None in listings:  # one shape
        found = listings[None]
        print(json.dumps([k.to_dict() for k in found], indent=2) if args.json else kernels_table(found))
    elif args.json:
        print(json.dumps({"gears": {n: [k.to_dict() for k in found] for n, found in listings.items()}}, indent=2))
    else:
        print("\n\n".join(f"gear {n}\n{kernels_table(found)}" for n, found in listings.items()))
    return 0


def _kernels_arguments(s) -> None:
    compile_options(s, model_help="ONNX file (fused and planned, not built) or artifact folder")
    gear_options(s, pad=False)
    s.add_argument("--sort", choices=("order", "flops", "bytes"), default="order",
                   help="list order (default: execution order)")
    s.add_argument("--json", action="store_true", help="a list of {name, ops, kind, anchor, inputs, outputs, "
                   "schedule, schedule_params, flops, bytes, ...}")


def cmd_schedule(args) -> int:
    from ..codegen.pins import parse_params, write_pins
    from ..tools.experiment import schedule_variants

    if args.model is None:
        return _print_rule(args)
    if args.kernel is None:
        raise InputError("braze schedule MODEL needs --kernel NAME (`braze kernels MODEL` lists them)")

    variants = None
    if args.rule or args.param or args.schedule_fn:
        variants = []
        if args.rule or args.param:
            variants.append({"rule": args.rule, "params": parse_params(args.param)})
        if args.schedule_fn:
            variants.append({"function": args.schedule_fn})
    experiment = schedule_variants(args.model, args.kernel, variants, count=args.variants, level=args.level,
                                  fusion=fusion_from_args(args), input_shapes=args.input_shape,
                                  target=args.target, threads=args.threads, repeat=args.repeat,
                                  tolerance=_schedule_tolerance(args), progress=_progress(not args.quiet),
                                  precision=precision_from_args(args), layout=layout_from_args(args))
    if args.pin and experiment.fastest:
        write_pins(args.pin, experiment.pins())
    if args.json:
        print(json.dumps(experiment.to_dict(), indent=2))
    else:
        print(experiment.table())
        if args.pin and experiment.fastest:
            print(f"wrote {args.pin}: {experiment.kernel.name} -> {experiment.fastest.label}")
    return 0 if experiment.fastest else CHECK_FAILED


def _print_rule(args) -> int:
    """``braze schedule --rule NAME``: the rule's parameters, from its declaration."""
    from ..codegen.schedules import RULES
    from ..codegen.schedules.doc import params_text

    if args.rule is None or args.param or args.schedule_fn or args.kernel:
        raise InputError("braze schedule needs MODEL --kernel NAME (to try schedules), "
                         "or --rule NAME alone (to print that rule's parameters)")
    if args.rule not in RULES:
        raise InputError(f"unknown schedule rule '{args.rule}' (rules: {', '.join(RULES)})")
    print(params_text(RULES[args.rule]))
    return 0


def _schedule_tolerance(args) -> float:
    """--tolerance, else the precision mode's (a 16-bit kernel's variants
    round their results to 16 bits, each its own way), else 1e-4."""
    if args.tolerance is not None:
        return args.tolerance
    from ..passes.precision import MODES, TOLERANCES

    low = MODES.get(getattr(args, "precision_mode", None) or "", (None, None))[1]
    return TOLERANCES.get(low, 1e-4)


def _schedule_arguments(s) -> None:
    compile_options(s, model_optional=True)
    s.add_argument("--kernel", help="kernel name from `braze kernels` (or kN for the N-th)")
    s.add_argument("--rule", help="schedule rule to try (`generic`, or a rule of docs/schedules.md); "
                                  "without MODEL: print the rule's parameters")
    s.add_argument("--param", action="append", metavar="NAME=VALUE", help="rule parameter, e.g. tile_m=8 (repeatable)")
    s.add_argument("--fn", dest="schedule_fn", metavar="FILE.py:FUNC",
                   help="your schedule function FUNC(sch, kernel, target)")
    s.add_argument("--variants", type=int, default=5, metavar="N",
                   help="without --rule/--param/--fn: the default, N-2 alternative tilings and generic (default 5)")
    s.add_argument("--repeat", type=positive_int, default=10, help="timed repeats per variant; the median is shown")
    s.add_argument("--tolerance", type=float, default=None,
                   help="max error relative to max(1, |reference|) (default 1e-4; a 16-bit --precision-mode's "
                        "own tolerance, docs/usage.md)")
    s.add_argument("--pin", metavar="PINS.json", help="write the fastest correct variant as a pins file")
    s.add_argument("--json", action="store_true", help="print the variants and their timings as JSON")


def cmd_tune(args) -> int:
    from ..tools.tune import tune

    if args.merge:
        return _merge(args)
    if not args.model or not args.db:
        raise InputError("braze tune needs MODEL and --db DIR (or --merge DB1 DB2 ... -o DB)")
    if bool(args.rpc) != bool(args.key):
        raise InputError("--rpc HOST:PORT and --key KEY go together: the tracker and its servers' device key")
    say = _progress(not args.quiet)
    kernels = tuple(x.strip() for v in args.kernels or [] for x in v.split(",") if x.strip())
    try:
        report = tune(args.model, args.db, level=args.level, trials=args.trials, kernels=kernels,
                      everything=args.all, fusion=fusion_from_args(args), input_shapes=args.input_shape,
                      target=args.target, threads=args.threads, progress=lambda p: say(p.line()), say=say,
                      rpc=args.rpc, key=args.key, builders=args.builders, resume=args.resume,
                      layout=layout_from_args(args))
    except KeyboardInterrupt:
        print(f"interrupted: the trials measured so far are kept in {args.db}; "
              "the same command resumes", file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.table())
        print(f"use it: braze compile {args.model} --level {args.level} --tuning-db {args.db} -o OUT.braze")
    return 0


def _merge(args) -> int:
    from ..codegen.tuning_merge import merge_databases

    if not args.output:
        raise InputError("--merge DB1 DB2 ... needs -o DB: the merged database folder")
    report = merge_databases(args.merge, args.output)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.line())
    return 0


def _tune_arguments(s) -> None:
    compile_options(s, model_optional=True)
    s.set_defaults(target=None)  # with --rpc: the servers' CPU; else the host's ("cpu")
    s.add_argument("--db", metavar="DIR", help="tuning database folder (created; resumed if present)")
    s.add_argument("--resume", action="store_true",
                   help="continue DIR (it must exist), saying how many workloads already have their trials")
    r = s.add_argument_group("tuning on other machines (docs/performance.md, \"Tuning on many machines\")")
    r.add_argument("--rpc", metavar="HOST:PORT", help="a TVM RPC tracker: candidates are measured on its servers")
    r.add_argument("--key", help="with --rpc: the device key the servers registered under")
    r.add_argument("--builders", type=positive_int, default=1, metavar="N",
                   help="build candidates in N local processes (default 1: in this process)")
    m = s.add_argument_group("merging databases")
    m.add_argument("--merge", nargs="+", metavar="DB", help="combine these databases, the fastest record of "
                   "each workload per machine, into -o DB")
    m.add_argument("-o", "--output", metavar="DB", help="with --merge: the database folder to write")
    s.add_argument("--trials", type=int, default=64,
                   help="measured candidates per kernel workload, counting those already in DIR (default 64)")
    s.add_argument("--kernels", action="append", metavar="NAMES",
                   help="tune only these kernels (names from `braze kernels`, or ONNX node names)")
    s.add_argument("--all", action="store_true", help="also tune elementwise/injective kernels")
    s.add_argument("--json", action="store_true", help="the summary as JSON")


def _quantize_arguments(s) -> None:
    s.add_argument("model", help="the float ONNX model")
    s.add_argument("--calibration", required=True, metavar="INPUTS.npz",
                   help="calibration inputs: one array per graph input, samples along the leading dim")
    s.add_argument("-o", "--output", required=True, metavar="OUT.onnx", help="the int8 QDQ model to write")
    s.add_argument("--per-tensor", action="store_true", help="one weight scale per tensor (default: per channel)")


def cmd_quantize(args) -> int:
    from ..tools.quantize import quantize

    out = quantize(args.model, args.calibration, args.output, per_channel=not args.per_tensor)
    print(f"wrote {out} (int8 QDQ: onnxruntime's static quantizer, "
          f"{'per-tensor' if args.per_tensor else 'per-channel'} weights)")
    return 0


COMMANDS = [
    Command("compile", "ONNX model -> artifact folder", _compile_arguments, cmd_compile),
    Command("quantize", "float ONNX model -> int8 QDQ model, calibrated by onnxruntime's quantizer",
            _quantize_arguments, cmd_quantize),
    Command("explain", "what fusion does to a model, and why (no build)", _explain_arguments, cmd_explain),
    Command("kernels", "the kernels of a model or artifact: ops, shapes, schedule, FLOPs", _kernels_arguments, cmd_kernels),
    Command("schedule", "build one kernel alone under several schedules; check and time each", _schedule_arguments, cmd_schedule),
    Command("tune", "tune a model's kernels with meta_schedule into a database (slow)", _tune_arguments, cmd_tune),
]
