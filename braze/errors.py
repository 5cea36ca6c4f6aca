"""Typed errors: everything a user can get wrong raises one of these.

Each error says what went wrong, names the culprit (file, ONNX node, op,
input, pass) and, where there is one, what to do about it. The CLI prints
``error: <message>`` and exits non-zero; it never shows a traceback for a
``BrazeError``.
"""

from __future__ import annotations


class BrazeError(Exception):
    """The base of every error braze raises on purpose (docs/errors.md lists
    them all). Catch it to handle any of them::

        try:
            braze.compile("model.onnx")
        except braze.BrazeError as e:
            print(f"error: {e}")
    """


class ModelLoadError(BrazeError):
    """A model file is missing, unreadable, truncated or not ONNX."""


class OnnxImportError(BrazeError):
    """An ONNX graph cannot be imported (a node, a shape, an attribute)."""


class UnsupportedOpError(OnnxImportError):
    """One or more ONNX op types have no converter.

    ``ops`` maps each unsupported op type to the node names that use it.
    """

    def __init__(self, ops: dict[str, list[str]]):
        self.ops = ops
        lines = []
        for op_type in sorted(ops):
            names = ops[op_type]
            shown = ", ".join(names[:5]) + (f", ... ({len(names)} nodes)" if len(names) > 5 else "")
            lines.append(f"  {op_type}: {shown}")
        super().__init__(
            f"{len(ops)} unsupported ONNX op type(s):\n" + "\n".join(lines)
            + "\n`braze ops` lists the supported op types."
        )


class DynamicShapeError(OnnxImportError):
    """A dimension is not known at compile time.

    ``inputs`` names the graph inputs whose run-time values braze would need
    at compile time (a Reshape's shape, a Slice's starts fed by an input);
    empty when an input's own dimension is dynamic.
    """

    def __init__(self, message: str, inputs=()):
        super().__init__(message)
        self.inputs = tuple(inputs)


class ParseError(BrazeError):
    """IR text is malformed. Carries the 1-based line and column."""

    def __init__(self, message: str, line: int, column: int, filename: str = "<text>"):
        self.line, self.column, self.filename = line, column, filename
        self.reason = message
        super().__init__(f"{filename}:{line}:{column}: {message}")


class VerifyError(BrazeError):
    """An IR module breaks an op's contract (types, attributes, operands)."""


class PassError(BrazeError):
    """An unknown pass, a malformed pipeline, or a bad pass option."""


class FusionRuleError(BrazeError):
    """A fusion rule, rules file or rule switch is invalid; names the rule and file."""


class BrazeWarning(UserWarning):
    """Something braze did differently from what was asked, and why (the
    command line prints it as ``warning: ...``)."""


class FusionRuleWarning(BrazeWarning):
    """A manual fusion rule that can never apply (an unknown op type, a node
    not in the graph); ``strict_rules`` makes it a ``FusionRuleError``."""


class CodegenError(BrazeError):
    """A kernel cannot be lowered or built by TVM."""


class ReferenceRuntimeError(BrazeError):
    """onnxruntime, the reference braze checks and times against, cannot
    load or run the model (``verify``, ``bench``, ``profile --onnx``)."""


class ArtifactError(BrazeError):
    """An artifact is missing, corrupt, or was built for another version or target."""


class InputError(BrazeError):
    """Inputs given at run time do not match the model's (name, shape, dtype)."""


class RuntimeOptionError(BrazeError):
    """A run-time option (threads, spin) is malformed, or asks for a change that
    TVM's runtime can no longer make in this process."""


class TargetError(BrazeError):
    """A target descriptor is unknown, unreadable or invalid; names the file and field."""


class ScheduleError(BrazeError):
    """A schedule choice is invalid: an unknown kernel or rule, a rule that does
    not fit the kernel, a bad parameter, a pins file or schedule function that
    cannot be read. (Not TVM's ``s_tir.ScheduleError``.)"""


class PrecisionError(BrazeError):
    """A precision mode, mixlist or keep-dtype file braze cannot use: an
    unknown mode, a mixlist that is not ATC's JSON, a node name that names
    no node of the model."""


class TuningError(BrazeError):
    """A tuning database is missing or corrupt, or a tuning run cannot start
    (an unknown kernel, a target this machine cannot measure)."""


class RemoteError(BrazeError):
    """A remote machine cannot be used: the RPC tracker cannot be reached
    or is not one, it has no server for the device key, or a server went
    away. Names the tracker's address and the key, and what the tracker has."""


def last_line(e: BaseException) -> str:
    """The last non-empty line of an exception's message (TVM's errors end
    with the one that says what went wrong, after a traceback); the type's
    name when there is none."""
    lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
    return lines[-1] if lines else type(e).__name__


def first_line(e: BaseException) -> str:
    """The first line of an exception's message (onnxruntime's and Python's
    say what went wrong first); the type's name when there is none."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
