"""The ``braze`` command.

Each subcommand is a ``Command`` (common.py): its name, help line, the
function that adds its arguments and the one that runs it, listed in the
``COMMANDS`` of its module (ir.py: import, opt, ops, targets, passes;
build.py: compile, quantize, explain, kernels, schedule, tune; run.py: run, verify,
bench, profile, demo). ``main`` builds the parser from ``COMMANDS`` in the
order below. Errors a user can cause are ``BrazeError`` and print as one
``error:`` line with exit status 1; braze's warnings print as one
``warning:`` line.
"""

from __future__ import annotations

import argparse
import sys
import warnings

from ..errors import BrazeError, BrazeWarning
from ..version import __version__
from . import build, ir, run
from .. import interrupts
from .common import demo_model_path

__all__ = ["COMMANDS", "build_parser", "demo_model_path", "main"]

_ALL = {c.name: c for c in (*ir.COMMANDS, *build.COMMANDS, *run.COMMANDS)}
#: The order ``braze --help`` lists the subcommands in.
COMMANDS = [_ALL[name] for name in ("import", "opt", "compile", "quantize", "run", "verify", "bench", "explain",
                                    "kernels", "schedule", "tune", "profile", "info", "ops", "targets", "passes",
                                    "demo")]
assert len(COMMANDS) == len(_ALL), "a command is missing from COMMANDS' order"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="braze", description="A fusion compiler for ONNX models.")
    p.add_argument("--version", action="version", version=f"braze {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        s = sub.add_parser(command.name, help=command.help)
        command.arguments(s)
        s.set_defaults(fn=command.run)
    return p


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """braze's own warnings as one line on stderr; others as Python prints them."""
    if issubclass(category, BrazeWarning):
        print(f"warning: {message}", file=sys.stderr)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "override_shape", False):  # every command reads args.input_shape: the flag travels with it
        from ..frontend import parse_shape_bindings

        args.input_shape = parse_shape_bindings(args.input_shape, override=True)
    warnings.showwarning = _show_warning
    interrupts.install()  # and forget a Ctrl-C of an earlier main() in this process
    try:
        return args.fn(args)
    except BrazeError as e:
        if interrupts.received():
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
