"""The ``braze`` command.

Every subcommand is a function ``cmd_NAME(args)`` registered in ``COMMANDS``
with its argument setup; errors a user can cause are ``BrazeError`` and print
as one ``error:`` line with exit status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter

from . import __version__
from .errors import BrazeError


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
    tmp = f"{out}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    if module.blobs:
        save_blobs(module.blobs, weights_path(out))
    os.replace(tmp, out)


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


def op_counts(module) -> Counter:
    return Counter(op.name for op in module.main.body.ops if op.name not in ("const", "func.return"))


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
    from .passes import PassManager

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
        from .ir.doc import op_table_markdown

        print(op_table_markdown())
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


def cmd_passes(args) -> int:
    from .passes import available_passes

    for name, cls in available_passes().items():
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        print(f"  {name:<14} {doc}")
    return 0


def cmd_demo(args) -> int:
    from .frontend import import_onnx
    from .passes import PassManager

    path = demo_model_path(args.model)
    print(f"braze {__version__} demo: {os.path.basename(path)} (shipped with braze)\n")
    module = import_onnx(path)
    before = op_counts(module)
    pm = PassManager.parse("canonicalize,cse,dce")
    pm.run(module)
    after = op_counts(module)
    print(f"imported {sum(before.values())} ops; after {pm}: {sum(after.values())} ops")
    width = max(len(k) for k in before | after)
    for name in sorted(before | after):
        print(f"  {name:<{width}}  {before[name]:>4} -> {after[name]:>4}")
    print("\npass timings:\n" + pm.timing_report())
    return 0


def demo_model_path(name: str) -> str:
    from .errors import ModelLoadError

    here = os.path.join(os.path.dirname(__file__), "data", f"{name}.onnx")
    if not os.path.exists(here):
        choices = sorted(f[:-5] for f in os.listdir(os.path.dirname(here)) if f.endswith(".onnx"))
        raise ModelLoadError(f"no embedded model '{name}' (choices: {', '.join(choices)})")
    return here


# --- argument parsing ------------------------------------------------------------------------
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
    s.add_argument("-p", "--pipeline", required=True, help="e.g. 'canonicalize,cse,dce'")
    s.add_argument("-o", "--output", help="output IR file (weights beside it); default stdout")
    s.add_argument("--weights", help="weights file (default: INPUT.weights.npz when it exists)")
    s.add_argument("--print-ir-after-all", action="store_true", help="print the IR after each pass to stderr")
    s.add_argument("--timing", action="store_true", help="print time per pass to stderr")
    s.set_defaults(fn=cmd_opt)

    s = sub.add_parser("ops", help="supported ONNX op types and IR ops")
    s.add_argument("--json", action="store_true", help='{"onnx": [...], "ir": [...]}')
    s.add_argument("--markdown", action="store_true", help="the IR op reference table of docs/ir.md")
    s.set_defaults(fn=cmd_ops)

    s = sub.add_parser("passes", help="list the registered passes")
    s.set_defaults(fn=cmd_passes)

    s = sub.add_parser("demo", help="run braze on a model shipped with it")
    s.add_argument("--model", default="mobilenetv2-tiny", help="embedded model name")
    s.set_defaults(fn=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except BrazeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
