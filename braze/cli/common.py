"""What the commands share: IR files, atomic writes, progress, Ctrl-C, and the
options several commands take."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable

from .. import interrupts


@dataclass(frozen=True)
class Command:
    """One subcommand: its name and one-line help, the function that adds its
    arguments to its parser, and the one that runs it (``run(args) -> exit status``)."""

    name: str
    help: str
    arguments: Callable
    run: Callable



def weights_path(ir_path: str) -> str:
    """``model.mlir`` -> ``model.weights.npz`` (the weights file beside IR text)."""
    root, ext = os.path.splitext(ir_path)
    return (root if ext == ".mlir" else ir_path) + ".weights.npz"


def write_ir(module, out: str | None) -> None:
    """IR text to ``out`` (with its weights beside it) or to stdout."""
    from ..ir import print_module, save_blobs

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
    from ..errors import ModelLoadError
    from ..ir import load_blobs, parse_module, verify

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


#: The exit status of a check that ran and failed (verify's accuracy,
#: bench's controls, demo's numerics, schedule's timing): apart from 1 (an
#: error) and 2 (a usage error, argparse's), so that a script can tell them apart.
CHECK_FAILED = 3


def _progress(enabled: bool):
    """Progress lines on stderr, with the time since the process started;
    while TVM builds the kernels, a progress bar on a terminal (tqdm), or a
    line every tenth of them elsewhere."""
    start = process_started()

    def say(message: str) -> None:
        interrupts.stop_if_received()
        if enabled:
            print(f"[{time.time() - start:6.1f}s] {message}", file=sys.stderr, flush=True)

    say.kernels = _KernelProgress(say) if enabled else None
    return say


class _KernelProgress:
    """The kernel build, counted (codegen.compiled.build_functions)."""

    def __init__(self, say):
        self.say, self.bar, self.total, self.done = say, None, 0, 0

    def start(self, total: int) -> None:
        self.total, self.done = total, 0
        if sys.stderr.isatty():
            import shutil

            from tqdm import tqdm

            width = shutil.get_terminal_size((80, 24)).columns or 80  # a terminal may report 0 columns
            self.bar = tqdm(total=total, unit="kernel", desc="building", file=sys.stderr, leave=False,
                            ncols=min(width, 100))

    def advance(self) -> None:
        interrupts.stop_if_received()
        self.done += 1
        if self.bar is not None:
            self.bar.update(1)
        elif self.total and self.done * 10 // self.total != (self.done - 1) * 10 // self.total:
            self.say(f"built {min(self.done, self.total)}/{self.total} kernels")

    def finish(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def process_started() -> float:
    """When this process started (``time.time()`` seconds): the CLI's clocks
    count from there, interpreter and imports included."""
    import psutil

    return psutil.Process().create_time()


def fusion_from_args(args) -> dict:
    """The fusion controls given on the command line (FusionOptions fields)."""
    def items(values):
        return tuple(x.strip() for v in values or [] for x in v.split(",") if x.strip())

    return {"no_fuse": items(args.no_fuse), "only_fuse": items(args.only_fuse),
            "skip_nodes": items(args.skip_nodes), "scope": args.scope or "", "switch": items(args.switch),
            "rules": args.rules or "", "max_group_size": args.max_group_size or 0,
            "memory_limit": args.memory_limit or 0, "tile_limit": args.tile_limit or 0,
            "strict_rules": bool(getattr(args, "strict_rules", False))}


def precision_from_args(args) -> dict:
    """The precision options given on the command line (compiler.precision_options)."""
    from ..pipeline import precision_options

    return precision_options(getattr(args, "precision_mode", None), getattr(args, "modify_mixlist", None),
                             getattr(args, "keep_dtype", None))


def compile_from_args(args):
    from ..compiler import compile as braze_compile

    return braze_compile(args.model, target=args.target, level=args.level, fusion=fusion_from_args(args),
                         input_shapes=args.input_shape, threads=getattr(args, "threads", None),
                         progress=_progress(not args.quiet), schedules=schedules_from_args(args),
                         tuning_db=getattr(args, "tuning_db", None),
                         dynamic_batch=getattr(args, "dynamic_batch", None),
                         dynamic_dims=getattr(args, "dynamic_dims", None), gears=getattr(args, "gears", None),
                         pad_batch=bool(getattr(args, "pad_batch", False)),
                         precision_mode=getattr(args, "precision_mode", None),
                         modify_mixlist=getattr(args, "modify_mixlist", None),
                         keep_dtype=getattr(args, "keep_dtype", None), layout=layout_from_args(args))


def layout_from_args(args) -> str:
    """--layout (pipeline.LAYOUTS), blocked when the command has no such option."""
    return getattr(args, "layout", None) or "blocked"


def schedules_from_args(args) -> dict | None:
    """Pinned schedules: --schedule-file PINS.json, then each --schedule NAME=RULE[:k=v,...]."""
    from ..codegen.pins import parse_pin, read_pins

    pins = dict(read_pins(args.schedule_file)) if getattr(args, "schedule_file", None) else {}
    for text in getattr(args, "schedule", None) or []:
        name, pin = parse_pin(text)
        pins[name] = pin
    return pins or None


def _write_text(path: str, text: str) -> None:
    with atomic(path, "w") as f:
        f.write(text)


def _inputs_for(args, specs):
    from ..measure import load_inputs, random_inputs

    return load_inputs(args.inputs) if args.inputs else random_inputs(specs, 0, getattr(args, "random", "normal"))


def gear_inputs(artifact, name: str | None) -> list[dict]:
    """The input specs of the gear named ``name`` (``--gear``; the first
    gear when None), or the artifact's inputs when it has no gears."""
    from ..errors import InputError

    if not artifact.gears:
        if name is not None:
            raise InputError(f"--gear {name}: this artifact has no gears (it was compiled for one shape)")
        return artifact.inputs
    if name is None:
        return artifact.gears[0]["inputs"]
    for gear in artifact.gears:
        if gear["name"] == name:
            return gear["inputs"]
    raise InputError(f"--gear {name}: no such gear (the gears: {', '.join(g['name'] for g in artifact.gears)})")


def gear_option(s) -> None:
    s.add_argument("--gear", metavar="NAME", help="with gears: the gear whose shapes random inputs take, "
                   "e.g. batch=4 or B=1,S=32 (default: the first)")


def demo_model_path(name: str) -> str:
    from ..errors import ModelLoadError

    here = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", f"{name}.onnx")
    if not os.path.exists(here):
        choices = sorted(f[:-5] for f in os.listdir(os.path.dirname(here)) if f.endswith(".onnx"))
        raise ModelLoadError(f"no embedded model '{name}' (choices: {', '.join(choices)})")
    return here


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


def compile_options(s, default_level=2, model_help="ONNX file", model_optional=False):
    s.add_argument("model", help=model_help, nargs="?" if model_optional else None)
    s.add_argument("--target", default="cpu",
                   help="a built-in target (`braze targets`) or a descriptor file (default: cpu, the host)")
    s.add_argument("--level", type=int, default=default_level, choices=range(0, 4),
                   help=f"fusion level 0-3 (default {default_level})")
    s.add_argument("--input-shape", action="append", metavar="NAME=1x3x224x224",
                   help="bind a graph input's dynamic dimensions (repeatable)")
    s.add_argument("--override-shape", action="store_true",
                   help="let --input-shape change dimensions the model fixes")
    s.add_argument("--threads", type=positive_int, help="CPU threads (default: all cores)")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    s.add_argument("--layout", choices=("blocked", "plain"), default="blocked",
                   help="blocked (default): conv chains in the blocked channel layout (NCHWc) on CPU targets at "
                        "levels 1-3; plain: every tensor in the model's own layout (docs/passes.md, \"layout\")")
    p = s.add_argument_group("precision (docs/usage.md, \"Precision modes\")")
    p.add_argument("--precision-mode", metavar="MODE",
                   help="ATC's modes: allow_mix_precision (fp16), allow_mix_precision_bf16, force_fp16, "
                        "must_keep_origin_dtype, ... (default: the target's; float32 except Ascend-like)")
    p.add_argument("--modify-mixlist", metavar="MIXLIST.json",
                   help="ATC's JSON moving ONNX op types between the white, black and gray lists")
    p.add_argument("--keep-dtype", metavar="FILE",
                   help="node names (or OpType::Relu), one per line, that keep float32")
    f = s.add_argument_group("fusion controls (docs/fusion.md)")
    f.add_argument("--no-fuse", action="append", metavar="TYPES", help="op types that never join a group, e.g. Slice,Concat")
    f.add_argument("--only-fuse", action="append", metavar="TYPES", help="only these op types may join groups")
    f.add_argument("--skip-nodes", action="append", metavar="NAMES", help="ONNX node names kept out of fusion")
    f.add_argument("--scope", help="fuse only inside: a glob, re:REGEX, index:A-B or between:A..B")
    f.add_argument("--switch", action="append", metavar="SPEC", help="rule switches: ALL=on,attention=off or a JSON file")
    f.add_argument("--rules", metavar="RULES.json", help="manual fusion rules (pattern rules, explicit groups)")
    f.add_argument("--strict-rules", "--strict", action="store_true", dest="strict_rules",
                   help="a control or manual rule that matches nothing (an unknown op type, node or scope) is an "
                        "error, not a warning")
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


def build_options(s) -> None:
    """What a command that builds takes: the compile options, gears, pinned schedules, a tuning database."""
    compile_options(s)
    gear_options(s)
    schedule_pins(s)
    tuning_db_option(s)


def gear_bindings(args) -> list[tuple[str | None, object]]:
    """``[(gear name, input shapes), ...]`` for the gear options given (one
    per gear), else ``[(None, --input-shape's bindings)]``: what the
    commands that plan without building (explain, kernels) report on."""
    spec = {"dynamic_batch": getattr(args, "dynamic_batch", None),
            "dynamic_dims": getattr(args, "dynamic_dims", None), "gears": getattr(args, "gears", None)}
    if all(v is None for v in spec.values()):
        return [(None, args.input_shape)]
    from ..errors import DynamicShapeError
    from ..frontend.gears import gear_shapes, parse_gears
    from ..frontend.importer import load_model

    if args.input_shape:
        raise DynamicShapeError("--input-shape binds one shape; with gears, the gears bind the dynamic dimensions")
    if os.path.isdir(args.model):
        raise DynamicShapeError(f"{args.model}: gear options plan an ONNX model; an artifact lists its gears' "
                                "kernels in its manifest (manifest.json, gears[].kernels)")
    proto = load_model(args.model)
    return [(g.name, gear_shapes(proto, g)) for g in parse_gears(proto, **spec)]


def gear_options(s, pad: bool = True) -> None:
    g = s.add_argument_group("dynamic shapes: gears (docs/usage.md, \"Dynamic shapes\"); one of")
    g.add_argument("--dynamic-batch", metavar="1,2,4,8", help="one gear per value of every input's leading dimension")
    g.add_argument("--dynamic-dims", metavar="B=1,4;S=32,64",
                   help="named dynamic dimensions; one gear per combination of the values")
    g.add_argument("--gears", metavar="B=1,S=32;B=4,S=128", help="the combinations themselves")
    if not pad:
        return
    g.add_argument("--pad-batch", action="store_true",
                   help="with --dynamic-batch: run a batch between gears on the next larger gear, padded, and "
                        "slice the padding off the outputs (refused, with the reason, unless braze proves the "
                        "model keeps samples apart)")
