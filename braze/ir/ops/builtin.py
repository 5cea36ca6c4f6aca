"""Structural ops: constants, function return, fused groups."""

from __future__ import annotations

from ...errors import VerifyError
from ..registry import AttrSpec, Int, Kind, OpDef, Str, register
from ..types import DenseElements


@register
class Const(OpDef):
    """A constant tensor. ``value`` is ``dense_resource<handle>`` (data in
    the module's blob store) or small inline ``dense<...>`` data; the result
    type is written out in the text and not inferred."""

    name = "const"
    kind = Kind.OPAQUE
    operands = ()
    attrs = {"value": AttrSpec("dense")}
    explicit_result_types = True

    def infer(self, **attrs):  # the type is declared, never inferred
        raise VerifyError("const takes its type from the declaration")

    def check_value(self, value, ty) -> None:
        if isinstance(value, DenseElements) and not value.splat and len(value.values) != ty.size:
            raise VerifyError(f"dense<...> holds {len(value.values)} values but {ty} needs {ty.size}")


@register
class Return(OpDef):
    """``func.return``: the function's results, in order."""

    name = "func.return"
    operands = ("results*",)
    terminator = True

    def infer(self, *types):
        return []


@register
class Yield(OpDef):
    """``fuse.yield``: the results of a fused group's region."""

    name = "fuse.yield"
    operands = ("results*",)
    terminator = True

    def infer(self, *types):
        return []


@register
class Group(OpDef):
    """``fuse.group``: ops fused into one kernel. Its operands become the
    region's block arguments; its results are what the region yields."""

    name = "fuse.group"
    operands = ("inputs*",)
    attrs = {"name": Str(), "rule": Str(""), "level": Int(0)}
    has_regions = True
    explicit_result_types = True

    def infer(self, *types, **attrs):
        raise VerifyError("fuse.group takes its types from its region")
