"""The ``braze`` command.

Every subcommand is a function ``cmd_NAME(args)`` registered in ``COMMANDS``
with its argument setup; errors a user can cause are ``BrazeError`` and print
as one ``error:`` line with exit status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time
import warnings
from collections import Counter

from .version import __version__
from .errors import BrazeError, BrazeWarning, InputError, first_line


# --- shared helpers ----------------------------------------------------------------------
def weights_path(ir_path: str) -> str:
    """``model.mlir`` -> ``model.weights.npz`` (the weights file beside IR text)."""
    root, ext = os.path.splitext(ir_path)
    return (root if ext == ".mlir" else ir_path) + ".weights.npz"


def write_ir(module, out: str | None) -> None:
    """IR text to ``out`` (with its weights beside it) or to stdout."""
    from .ir import print_module, save_blobs

    text = print_module(module)
    if out in (None, "-"):
        sys.stdout.write(text)
        return
    with atomic(out, "w") as f:
        f.write(text)
        if module.blobs:
            save_blobs(module.blobs, weights_path(out))


@contextlib.contextmanager
def atomic(path: str, mode: str):
    """A file opened as ``PATH.tmp`` and renamed to ``path`` once written;
    removed if writing fails, so that no partial output is ever left."""
    tmp = f"{path}.tmp"
    try:
        with open(tmp, mode) as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def read_ir(path: str | None, weights: str | None):
    """A verified module from IR text (a file or stdin) and its weights, if any."""
    from .errors import ModelLoadError
    from .ir import load_blobs, parse_module, verify

    if path in (None, "-"):
        text, name = sys.stdin.read(), "<stdin>"
    else:
        try:
            with open(path) as f:
                text, name = f.read(), path
        except OSError as e:
            raise ModelLoadError(f"{path}: cannot read ({e.strerror})") from None
        except UnicodeDecodeError:
            raise ModelLoadError(f"{path}: not IR text (binary data)") from None
    if weights is None and name != "<stdin>" and os.path.exists(weights_path(name)):
        weights = weights_path(name)
    blobs = load_blobs(weights) if weights else None
    return verify(parse_module(text, name, blobs))


# --- commands ------------------------------------------------------------------------------
def cmd_import(args) -> int:
    from .frontend import import_onnx

    module = import_onnx(args.model, args.input_shape)
    if args.pipeline:
        from .passes import PassManager

        PassManager.parse(args.pipeline).run(module)
    write_ir(module, args.output)
    return 0


def cmd_opt(args) -> int:
    from .frontend.registry import supported_op_types
    from .passes import PassManager

    supported_op_types()  # the ONNX op types a manual rule in the pipeline may name
    pm = PassManager.parse(args.pipeline, print_ir_after_all=args.print_ir_after_all, out=sys.stderr)
    module = read_ir(args.input, args.weights)
    pm.run(module)
    if args.timing:
        sys.stderr.write(pm.timing_report() + "\n")
    write_ir(module, args.output)
    return 0


def cmd_ops(args) -> int:
    from .frontend import supported_op_types
    from .ir import all_ops

    onnx_ops, ir_ops = supported_op_types(), all_ops()
    if args.markdown:
        from .frontend.registry import onnx_table_markdown
        from .ir.doc import op_table_markdown

        print(op_table_markdown() + "\n\n" + onnx_table_markdown())
        return 0
    if args.json:
        print(json.dumps({"onnx": onnx_ops, "ir": list(ir_ops)}, indent=2))
        return 0
    print(f"ONNX op types ({len(onnx_ops)}):")
    print("  " + " ".join(onnx_ops))
    print(f"\nIR ops ({len(ir_ops)}):")
    for name, opdef in ir_ops.items():
        print(f"  {name:<24} {opdef.kind.value:<10} ({', '.join(opdef.operands)})")
    return 0


def cmd_targets(args) -> int:
    from .targets import get_target, show

    if args.show:
        target = get_target(args.show)
        print(json.dumps(target.descriptor(), indent=2) if args.json else show.describe(target))
    else:
        print(json.dumps(show.listing(), indent=2) if args.json else show.table())
    return 0


def cmd_passes(args) -> int:
    from .passes import available_passes

    for name, cls in available_passes().items():
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        print(f"  {name:<14} {doc}")
    return 0


def _progress(enabled: bool):
    """Progress lines on stderr, with the time since the start."""
    start = time.perf_counter()

    def say(message: str) -> None:
        _stop_if_interrupted()
        if enabled:
            print(f"[{time.perf_counter() - start:6.1f}s] {message}", file=sys.stderr, flush=True)

    return say


# Ctrl-C inside TVM's C++ code can come back as a RuntimeError (a failed kernel
# build, which fusion rolls back and goes on from): remember it, and stop at the
# next step, never writing an output.
_interrupted = False


def _on_sigint(signum, frame):
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def _stop_if_interrupted() -> None:
    if _interrupted:
        raise KeyboardInterrupt


def fusion_from_args(args) -> dict:
    """The fusion controls given on the command line (FusionOptions fields)."""
    def items(values):
        return tuple(x.strip() for v in values or [] for x in v.split(",") if x.strip())

    return {"no_fuse": items(args.no_fuse), "only_fuse": items(args.only_fuse),
            "skip_nodes": items(args.skip_nodes), "scope": args.scope or "", "switch": items(args.switch),
            "rules": args.rules or "", "max_group_size": args.max_group_size or 0,
            "memory_limit": args.memory_limit or 0, "tile_limit": args.tile_limit or 0,
            "strict_rules": bool(getattr(args, "strict_rules", False))}


def compile_from_args(args):
    from .compiler import compile as braze_compile

    return braze_compile(args.model, target=args.target, level=args.level, fusion=fusion_from_args(args),
                         input_shapes=args.input_shape, threads=getattr(args, "threads", None),
                         progress=_progress(not args.quiet), schedules=schedules_from_args(args),
                         tuning_db=getattr(args, "tuning_db", None))


def schedules_from_args(args) -> dict | None:
    """Pinned schedules: --schedule-file PINS.json, then each --schedule NAME=RULE[:k=v,...]."""
    from .codegen.pins import parse_pin, read_pins

    pins = dict(read_pins(args.schedule_file)) if getattr(args, "schedule_file", None) else {}
    for text in getattr(args, "schedule", None) or []:
        name, pin = parse_pin(text)
        pins[name] = pin
    return pins or None


def cmd_explain(args) -> int:
    from .compiler import fuse_only

    module, report = fuse_only(args.model, args.level, fusion_from_args(args), args.input_shape, args.target)
    if args.dot or args.html:
        from .passes.fusion import draw

        if args.dot:
            _write_text(args.dot, draw.to_dot(module))
        if args.html:
            _write_text(args.html, draw.to_html(module, report))
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.table())
    return 0


def _write_text(path: str, text: str) -> None:
    with atomic(path, "w") as f:
        f.write(text)


def cmd_compile(args) -> int:
    from .runtime.artifact import check_output_path

    check_output_path(os.path.abspath(args.output))  # before a long compile, not after
    artifact = compile_from_args(args)
    _stop_if_interrupted()
    path = artifact.save(args.output)
    m = artifact.manifest
    print(f"wrote {path}: {len(m['kernels'])} kernels, compiled in {m['compile_seconds']:.1f}s")
    if args.fusion_result:
        from .passes.fusion.explain import fusion_result

        result = fusion_result(m.get("fusion"), m["model"])
        with atomic(args.fusion_result, "w") as f:
            json.dump(result, f, indent=1)
        print(f"wrote {args.fusion_result}: match_times and effect_times of "
              f"{len(result[m['model']]['graph_fusion'])} rules")
    if m.get("estimate"):
        print(f"estimated {m['estimate']['total_us']:.2f} us on {m['estimate']['target']} (roofline; docs/targets.md)")
    return 0


def _inputs_for(args, specs):
    from .measure import load_inputs, random_inputs

    return load_inputs(args.inputs) if args.inputs else random_inputs(specs)


def cmd_run(args) -> int:
    import numpy as np

    from .measure import load_inputs
    from .runtime import load

    artifact = load(args.artifact, spin=args.spin)
    outputs = artifact.run(load_inputs(args.inputs))
    if args.output:
        out = args.output if args.output.endswith(".npz") else args.output + ".npz"
        with atomic(out, "wb") as f:
            np.savez(f, **outputs)
        print(f"wrote {out}: {', '.join(outputs)}")
    else:
        for name, value in outputs.items():
            print(f"{name}: {value.dtype}{list(value.shape)}  min {value.min():.6g}  max {value.max():.6g}")
    return 0


def cmd_verify(args) -> int:
    from .measure import compare, run_onnxruntime

    artifact = compile_from_args(args)
    inputs = _inputs_for(args, artifact.inputs)
    rows = compare(artifact.run(inputs), run_onnxruntime(args.model, inputs))
    groups = _verify_groups(args, inputs) if args.per_group else []
    ok = all(r.max_rel <= args.tolerance for r in rows + groups)
    if args.json:
        data = {"ok": ok, "tolerance": args.tolerance, "outputs": [r.to_dict() for r in rows]}
        if args.per_group:
            data["groups"] = [g.to_dict() for g in groups]
        print(json.dumps(data, indent=2))
        return 0 if ok else 2
    print(f"{'output':<24} {'max abs':>12} {'max rel':>12}")
    for r in rows:
        print(f"{r.name:<24} {r.max_abs:12.3e} {r.max_rel:12.3e}{'' if r.max_rel <= args.tolerance else '  FAIL'}")
    if args.per_group:
        print(f"\n{'fused group (vs the same ops unfused)':<48} {'max abs':>12} {'max rel':>12}")
        for g in groups:
            print(f"{g.name:<48} {g.max_abs:12.3e} {g.max_rel:12.3e}{'' if g.max_rel <= args.tolerance else '  DRIFTS'}")
    print(f"{'ok' if ok else 'FAILED'}: tolerance {args.tolerance:g} relative to each output's scale")
    return 0 if ok else 2


def _verify_groups(args, inputs):
    from .compiler import fuse_only
    from .measure import verify_groups

    module, _ = fuse_only(args.model, args.level, fusion_from_args(args), args.input_shape, args.target)
    return verify_groups(module, inputs, args.target)


def cmd_bench(args) -> int:
    import tempfile

    from .measure import bench
    from .runtime import load
    from .threads import spin_count

    if args.spin is not None:
        spin_count(args.spin)  # a typo fails now, not after a long compile
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
    r = bench(path, onnx_path, _inputs_for(args, artifact.inputs), threads, repeat=args.repeat,
              phases=args.phases, self_check=args.self_check, spin=args.spin, processes=args.processes)
    print(json.dumps(r.to_dict(), indent=2) if args.json else r.table())
    return 0 if r.controls_ok else 2


def cmd_tune(args) -> int:
    from .tools.tune import tune

    say = _progress(not args.quiet)
    kernels = tuple(x.strip() for v in args.kernels or [] for x in v.split(",") if x.strip())
    try:
        report = tune(args.model, args.db, level=args.level, trials=args.trials, kernels=kernels,
                      everything=args.all, fusion=fusion_from_args(args), input_shapes=args.input_shape,
                      target=args.target, threads=args.threads, progress=lambda p: say(p.line()), say=say)
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


def cmd_profile(args) -> int:
    from .measure import profile
    from .runtime import load

    artifact = load(args.artifact)
    inputs = _inputs_for(args, artifact.inputs)
    theirs, unmatched = (_onnxruntime_profile(args, artifact, inputs) if args.onnx else (None, []))
    other = sum(ms for _, _, ms in unmatched)  # onnxruntime's time in nodes matched to no kernel
    rows = profile(artifact, inputs, repeat=args.repeat)
    kinds = {k["name"]: k for k in artifact.kernels}
    total = sum(t for _, t in rows) or 1e-12
    if args.json:
        kernels = [{"kernel": n, "ms": t, "ops": kinds[n]["ops"], "nodes": kinds[n]["nodes"],
                    **({"onnxruntime_ms": theirs.get(n)} if theirs is not None else {})} for n, t in rows]
        if theirs is None:
            print(json.dumps(kernels, indent=2))
        else:
            print(json.dumps({"kernels": kernels, "braze_ms": total,
                              "onnxruntime_ms": sum(theirs.values()) + other,
                              "onnxruntime_unmatched": [{"node": n, "op": op, "ms": ms} for n, op, ms in unmatched]},
                             indent=2))
        return 0
    if theirs is None:
        print(f"{'ms':>9} {'share':>6}  kernel")
    else:
        print(f"{'ms':>9} {'share':>6} {'ort ms':>8} {'ratio':>6}  kernel")
    for name, t in sorted(rows, key=lambda r: -r[1])[: args.top]:
        ort_cols = ""
        if theirs is not None:
            ms = theirs.get(name)
            ort_cols = f" {ms:8.3f} {t / ms:6.2f}" if ms else f" {'-':>8} {'-':>6}"
        print(f"{t:9.3f} {100 * t / total:5.1f}%{ort_cols}  {name}  [{', '.join(kinds[name]['ops'])}]")
    print(f"{total:9.3f} 100.0%  total over {len(rows)} kernels")
    if theirs is not None:
        print(f"onnxruntime: {sum(theirs.values()) + other:.3f} ms over its nodes; {other:.3f} ms in nodes "
              f"matched to no kernel" + (": " + ", ".join(f"{n} ({op}) {ms:.3f}" for n, op, ms in
                                                         sorted(unmatched, key=lambda r: -r[2])[:5])
                                         if unmatched else ""))
    return 0


def _onnxruntime_profile(args, artifact, inputs):
    """onnxruntime's per-node times on the same inputs and threads, per braze kernel."""
    import onnx

    from .measure import attribute_nodes, profile_onnxruntime
    from .threads import current_threads

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


def cmd_kernels(args) -> int:
    from .tools.experiment import kernels, kernels_table

    found = kernels(args.model, args.level, fusion_from_args(args), args.input_shape, args.target, args.threads)
    if args.sort != "order":
        found = sorted(found, key=lambda k: -getattr(k, args.sort))
    if args.json:
        print(json.dumps([k.to_dict() for k in found], indent=2))
    else:
        print(kernels_table(found))
    return 0


def cmd_schedule(args) -> int:
    from .tools.experiment import schedule_variants
    from .codegen.pins import parse_params, write_pins

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
                                  tolerance=args.tolerance, progress=_progress(not args.quiet))
    if args.pin and experiment.fastest:
        write_pins(args.pin, experiment.pins())
    if args.json:
        print(json.dumps(experiment.to_dict(), indent=2))
    else:
        print(experiment.table())
        if args.pin and experiment.fastest:
            print(f"wrote {args.pin}: {experiment.kernel.name} -> {experiment.fastest.label}")
    return 0 if experiment.fastest else 2


def cmd_demo(args) -> int:
    """Compile an embedded model, check it against onnxruntime, time both."""
    import tempfile

    import numpy as np

    from .compiler import compile as braze_compile
    from .measure import bench, compare, run_onnxruntime

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
    return 0 if ok else 2


def demo_model_path(name: str) -> str:
    from .errors import ModelLoadError

    here = os.path.join(os.path.dirname(__file__), "data", f"{name}.onnx")
    if not os.path.exists(here):
        choices = sorted(f[:-5] for f in os.listdir(os.path.dirname(here)) if f.endswith(".onnx"))
        raise ModelLoadError(f"no embedded model '{name}' (choices: {', '.join(choices)})")
    return here


# --- argument parsing ------------------------------------------------------------------------
def positive_int(text: str) -> int:
    """An argparse type: a count of at least 1 (threads, repeats)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got '{text}'")
    return value


def spin_option(s, what: str = "how long TVM's idle threads spin after each kernel") -> None:
    s.add_argument("--spin", metavar="off|short|long|N",
                   help=f"{what}: short (default) goes quiet within a millisecond of a run's end; long is "
                        "TVM's own 300000 iterations, lowest latency for back-to-back runs, a busy core "
                        "per thread for 0.1-0.3 s after each run (docs/usage.md)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="braze", description="A fusion compiler for ONNX models.")
    p.add_argument("--version", action="version", version=f"braze {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("import", help="ONNX model -> IR text")
    s.add_argument("model", help="ONNX file")
    s.add_argument("-o", "--output", help="IR text file (weights go beside it as NAME.weights.npz); default stdout")
    s.add_argument("--input-shape", action="append", metavar="NAME=1x3x224x224",
                   help="bind a graph input's shape (repeatable)")
    s.add_argument("-p", "--pipeline", help="passes to run after importing, e.g. canonicalize,cse,dce")
    s.set_defaults(fn=cmd_import)

    s = sub.add_parser("opt", help="run a pass pipeline over IR text (like mlir-opt)")
    s.add_argument("input", nargs="?", help="IR text file; default stdin")
    s.add_argument("-p", "--pipeline", default="",
                   help="e.g. 'canonicalize,cse,dce' (default: none, the IR is parsed, verified and printed back)")
    s.add_argument("-o", "--output", help="output IR file (weights beside it); default stdout")
    s.add_argument("--weights", help="weights file (default: INPUT.weights.npz when it exists)")
    s.add_argument("--print-ir-after-all", action="store_true", help="print the IR after each pass to stderr")
    s.add_argument("--timing", action="store_true", help="print time per pass to stderr")
    s.set_defaults(fn=cmd_opt)

    def compile_options(s, default_level=2, model_help="ONNX file"):
        s.add_argument("model", help=model_help)
        s.add_argument("--target", default="cpu",
                       help="a built-in target (`braze targets`) or a descriptor file (default: cpu, the host)")
        s.add_argument("--level", type=int, default=default_level, choices=range(0, 4),
                       help=f"fusion level 0-3 (default {default_level})")
        s.add_argument("--input-shape", action="append", metavar="NAME=1x3x224x224",
                       help="bind a graph input's shape (repeatable)")
        s.add_argument("--threads", type=positive_int, help="CPU threads (default: all cores)")
        s.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
        f = s.add_argument_group("fusion controls (docs/fusion.md)")
        f.add_argument("--no-fuse", action="append", metavar="TYPES", help="op types that never join a group, e.g. Slice,Concat")
        f.add_argument("--only-fuse", action="append", metavar="TYPES", help="only these op types may join groups")
        f.add_argument("--skip-nodes", action="append", metavar="NAMES", help="ONNX node names kept out of fusion")
        f.add_argument("--scope", help="fuse only inside: a glob, re:REGEX, index:A-B or between:A..B")
        f.add_argument("--switch", action="append", metavar="SPEC", help="rule switches: ALL=on,attention=off or a JSON file")
        f.add_argument("--rules", metavar="RULES.json", help="manual fusion rules (pattern rules, explicit groups)")
        f.add_argument("--strict-rules", action="store_true",
                       help="a manual rule that can never apply (unknown op type or node) is an error, not a warning")
        f.add_argument("--max-group-size", type=int, help="at most this many ops per group")
        f.add_argument("--memory-limit", type=int, metavar="BYTES", help="largest working set of a group")
        f.add_argument("--tile-limit", type=int, metavar="BYTES",
                       help="largest working tile of a group (default: an NPU target's unified buffer)")

    def schedule_pins(s):
        g = s.add_argument_group("pinned schedules (docs/performance.md)")
        g.add_argument("--schedule", action="append", metavar="KERNEL=RULE[:k=v,...]",
                       help="build a kernel with this schedule, e.g. k10=gemm:tile_m=4,tile_n=32 (repeatable)")
        g.add_argument("--schedule-file", metavar="PINS.json", help="pinned schedules, e.g. from braze schedule --pin")

    def tuning_db_option(s):
        s.add_argument("--tuning-db", metavar="DIR",
                       help="tuned schedules from `braze tune`: kernels with a record use them (docs/performance.md)")

    s = sub.add_parser("compile", help="ONNX model -> artifact folder")
    compile_options(s)
    schedule_pins(s)
    tuning_db_option(s)
    s.add_argument("-o", "--output", required=True, help="artifact folder, e.g. model.braze")
    s.add_argument("--fusion-result", metavar="FILE.json",
                   help="also write per-rule match_times/effect_times, as the Ascend graph engine's fusion_result.json")
    s.set_defaults(fn=cmd_compile)

    s = sub.add_parser("run", help="run an artifact on inputs from an .npz")
    s.add_argument("artifact")
    s.add_argument("--inputs", required=True, help=".npz with one array per input name")
    s.add_argument("-o", "--output", help="write the outputs to this .npz")
    spin_option(s)
    s.set_defaults(fn=cmd_run)

    s = sub.add_parser("verify", help="compile and compare with onnxruntime")
    compile_options(s)
    schedule_pins(s)
    tuning_db_option(s)
    s.add_argument("--inputs", help=".npz of inputs (default: random)")
    s.add_argument("--tolerance", type=float, default=1e-4, help="max error relative to max(1, |output|max)")
    s.add_argument("--per-group", action="store_true",
                   help="also check each fused kernel against the same ops unfused, naming any that drifts")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_verify)

    s = sub.add_parser("bench", help="braze vs onnxruntime latency, same inputs and threads")
    compile_options(s)
    schedule_pins(s)
    tuning_db_option(s)
    s.add_argument("--onnx", help="with an artifact as MODEL: the ONNX model to compare with")
    s.add_argument("--inputs", help=".npz of inputs (default: random)")
    s.add_argument("--repeat", type=positive_int, default=50,
                   help="timed runs per engine, spread over the phases (default 50)")
    s.add_argument("--phases", type=positive_int, default=10,
                   help="alternating phases per engine, each after every worker went idle (default 10)")
    s.add_argument("--processes", type=positive_int, default=3,
                   help="fresh worker processes per engine, one after the other, sharing the phases (default 3)")
    s.add_argument("--self-check", action="store_true",
                   help="also time each engine against a second worker of itself: the controls must give "
                        "1.00 +- 0.10 (exit status 2 if not)")
    spin_option(s, "braze's idle spin while benchmarking")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_bench)

    s = sub.add_parser("explain", help="what fusion does to a model, and why (no build)")
    compile_options(s)
    s.add_argument("--json", action="store_true", help="the record as JSON (stable keys)")
    s.add_argument("--dot", metavar="FILE", help="write the fused graph as Graphviz DOT")
    s.add_argument("--html", metavar="FILE", help="write the fused graph as a self-contained HTML page")
    s.set_defaults(fn=cmd_explain)

    s = sub.add_parser("kernels", help="the kernels of a model or artifact: ops, shapes, schedule, FLOPs")
    compile_options(s, model_help="ONNX file (fused and planned, not built) or artifact folder")
    s.add_argument("--sort", choices=("order", "flops", "bytes"), default="order",
                   help="list order (default: execution order)")
    s.add_argument("--json", action="store_true", help="a list of {name, ops, kind, anchor, inputs, outputs, "
                   "schedule, schedule_params, flops, bytes, ...}")
    s.set_defaults(fn=cmd_kernels)

    s = sub.add_parser("schedule", help="build one kernel alone under several schedules; check and time each")
    compile_options(s)
    s.add_argument("--kernel", required=True, help="kernel name from `braze kernels` (or kN for the N-th)")
    s.add_argument("--rule", help="schedule rule to try (gemm, pointwise, conv2d, winograd, depthwise, generic)")
    s.add_argument("--param", action="append", metavar="NAME=VALUE", help="rule parameter, e.g. tile_m=8 (repeatable)")
    s.add_argument("--fn", dest="schedule_fn", metavar="FILE.py:FUNC",
                   help="your schedule function FUNC(sch, kernel, target)")
    s.add_argument("--variants", type=int, default=5, metavar="N",
                   help="without --rule/--param/--fn: the default, N-2 alternative tilings and generic (default 5)")
    s.add_argument("--repeat", type=positive_int, default=10, help="timed repeats per variant; the median is shown")
    s.add_argument("--tolerance", type=float, default=1e-4, help="max error relative to max(1, |reference|)")
    s.add_argument("--pin", metavar="PINS.json", help="write the fastest correct variant as a pins file")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_schedule)

    s = sub.add_parser("tune", help="tune a model's kernels with meta_schedule into a database (slow)")
    compile_options(s)
    s.add_argument("--db", required=True, metavar="DIR", help="tuning database folder (created; resumed if present)")
    s.add_argument("--trials", type=int, default=64,
                   help="measured candidates per kernel workload, counting those already in DIR (default 64)")
    s.add_argument("--kernels", action="append", metavar="NAMES",
                   help="tune only these kernels (names from `braze kernels`, or ONNX node names)")
    s.add_argument("--all", action="store_true", help="also tune elementwise/injective kernels")
    s.add_argument("--json", action="store_true", help="the summary as JSON")
    s.set_defaults(fn=cmd_tune)

    s = sub.add_parser("profile", help="time per kernel of an artifact")
    s.add_argument("artifact")
    s.add_argument("--inputs", help=".npz of inputs (default: random)")
    s.add_argument("--repeat", type=positive_int, default=5)
    s.add_argument("--top", type=int, default=25, help="show the N slowest kernels")
    s.add_argument("--onnx", metavar="MODEL.onnx",
                   help="also profile onnxruntime on the same inputs and threads, and give each kernel "
                        "the time of its ONNX nodes there")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_profile)

    s = sub.add_parser("ops", help="supported ONNX op types and IR ops")
    s.add_argument("--json", action="store_true", help='{"onnx": [...], "ir": [...]}')
    s.add_argument("--markdown", action="store_true", help="the IR op reference table of docs/ir.md")
    s.set_defaults(fn=cmd_ops)

    s = sub.add_parser("targets", help="the target descriptors (docs/targets.md)")
    s.add_argument("--show", metavar="NAME", help="one target, field by field: a built-in name or a file")
    s.add_argument("--json", action="store_true",
                   help="the list as JSON; with --show, the descriptor in the format --target FILE reads")
    s.set_defaults(fn=cmd_targets)

    s = sub.add_parser("passes", help="list the registered passes")
    s.set_defaults(fn=cmd_passes)

    s = sub.add_parser("demo", help="compile, verify and benchmark a model shipped with braze")
    s.add_argument("--model", default="mobilenetv2-tiny", help="embedded model: mobilenetv2-tiny, bert-tiny, vit-tiny")
    s.add_argument("--level", type=int, default=2, choices=range(0, 4), help="fusion level (default 2)")
    s.add_argument("--threads", type=positive_int, help="CPU threads (default: all cores)")
    s.add_argument("--repeat", type=positive_int, default=50, help="timed runs per engine (default 50)")
    s.set_defaults(fn=cmd_demo)
    return p


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """braze's own warnings as one line on stderr; others as Python prints them."""
    if issubclass(category, BrazeWarning):
        print(f"warning: {message}", file=sys.stderr)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def main(argv: list[str] | None = None) -> int:
    global _interrupted
    _interrupted = False  # a Ctrl-C of an earlier main() in this process is not this one's
    args = build_parser().parse_args(argv)
    warnings.showwarning = _show_warning
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)
    try:
        return args.fn(args)
    except BrazeError as e:
        if _interrupted:
            print("interrupted", file=sys.stderr)
            return 130
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as e:  # a path given on the command line cannot be read or written
        if e.filename is None:
            raise
        name = str(e.filename).removesuffix(".tmp")  # outputs are written as NAME.tmp, then renamed
        print(f"error: {name}: {e.strerror or e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
