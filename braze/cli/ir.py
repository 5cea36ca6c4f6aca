"""Commands over the IR and the registries: import, opt, ops, targets, passes, info."""

from __future__ import annotations

import json
import sys

from .common import Command, read_ir, write_ir


def cmd_import(args) -> int:
    from ..frontend import import_onnx

    module = import_onnx(args.model, args.input_shape)
    if args.pipeline:
        from ..passes import PassManager

        PassManager.parse(args.pipeline).run(module)
    write_ir(module, args.output)
    return 0


def _import_arguments(s) -> None:
    s.add_argument("model", help="ONNX file")
    s.add_argument("-o", "--output", help="IR text file (weights go beside it as NAME.weights.npz); default stdout")
    s.add_argument("--input-shape", action="append", metavar="NAME=1x3x224x224",
                   help="bind a graph input's dynamic dimensions (repeatable)")
    s.add_argument("--override-shape", action="store_true",
                   help="let --input-shape change dimensions the model fixes")
    s.add_argument("-p", "--pipeline", help="passes to run after importing, e.g. canonicalize,cse,dce")


def cmd_opt(args) -> int:
    from ..frontend.registry import supported_op_types
    from ..passes import PassManager

    supported_op_types()  # the ONNX op types a manual rule in the pipeline may name
    pm = PassManager.parse(args.pipeline, print_ir_after_all=args.print_ir_after_all, out=sys.stderr)
    module = read_ir(args.input, args.weights)
    pm.run(module)
    if args.timing:
        sys.stderr.write(pm.timing_report() + "\n")
    write_ir(module, args.output)
    return 0


def _opt_arguments(s) -> None:
    s.add_argument("input", nargs="?", help="IR text file; default stdin")
    s.add_argument("-p", "--pipeline", default="",
                   help="e.g. 'canonicalize,cse,dce' (default: none, the IR is parsed, verified and printed back)")
    s.add_argument("-o", "--output", help="output IR file (weights beside it); default stdout")
    s.add_argument("--weights", help="weights file (default: INPUT.weights.npz when it exists)")
    s.add_argument("--print-ir-after-all", action="store_true", help="print the IR after each pass to stderr")
    s.add_argument("--timing", action="store_true", help="print time per pass to stderr")


def cmd_ops(args) -> int:
    from ..frontend import supported_op_types
    from ..ir import all_ops

    onnx_ops, ir_ops = supported_op_types(), all_ops()
    if args.markdown:
        from ..frontend.registry import onnx_table_markdown
        from ..ir.doc import op_table_markdown

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


def _ops_arguments(s) -> None:
    s.add_argument("--json", action="store_true", help='{"onnx": [...], "ir": [...]}')
    s.add_argument("--markdown", action="store_true", help="the IR op reference table of docs/ir.md")


def cmd_targets(args) -> int:
    from ..targets import get_target, show

    if args.show:
        target = get_target(args.show)
        print(json.dumps(target.descriptor(), indent=2) if args.json else show.describe(target))
    else:
        print(json.dumps(show.listing(), indent=2) if args.json else show.table())
    return 0


def _targets_arguments(s) -> None:
    s.add_argument("--show", metavar="NAME", help="one target, field by field: a built-in name or a file")
    s.add_argument("--json", action="store_true",
                   help="the list as JSON; with --show, the descriptor in the format --target FILE reads")


def cmd_passes(args) -> int:
    import dataclasses

    from ..passes import available_passes

    rows = []
    for name, cls in available_passes().items():
        doc = " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())
        options = {f.name.replace("_", "-"): f.default for f in dataclasses.fields(cls)
                   if f.default is not dataclasses.MISSING} if dataclasses.is_dataclass(cls) else {}
        rows.append({"name": name, "summary": doc, "options": options})
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        print(f"  {r['name']:<{width}}  {r['summary']}")
    return 0


def _passes_arguments(s) -> None:
    s.add_argument("--json", action="store_true", help='print [{"name", "summary", "options": {name: default}}]')


def cmd_info(args) -> int:
    from ..tools.info import describe, table

    info = describe(args.file)
    print(json.dumps(info, indent=2, default=str) if args.json else table(info))
    return 0


def _info_arguments(s) -> None:
    s.add_argument("file", help="an ONNX model or an artifact folder")
    s.add_argument("--json", action="store_true", help="print the facts as JSON")


COMMANDS = [
    Command("import", "ONNX model -> IR text", _import_arguments, cmd_import),
    Command("opt", "run a pass pipeline over IR text (like mlir-opt)", _opt_arguments, cmd_opt),
    Command("ops", "supported ONNX op types and IR ops", _ops_arguments, cmd_ops),
    Command("targets", "the target descriptors (docs/targets.md)", _targets_arguments, cmd_targets),
    Command("passes", "list the registered passes", _passes_arguments, cmd_passes),
    Command("info", "what an ONNX model or an artifact holds: inputs, outputs, ops, FLOPs, parameters",
            _info_arguments, cmd_info),
]
