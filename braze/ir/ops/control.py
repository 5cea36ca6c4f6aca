"""Control flow, as MLIR's ``scf`` dialect has it: ops that hold regions.

Each region is one block that ends with ``func.return`` and sees nothing
from outside it: what a branch or a loop body reads from the enclosing
function comes in as an operand and a block argument (a capture). So a
region is a function of its own: passes run on it as on ``@main``, fusion
groups its ops without ever crossing its boundary, and codegen builds it as
a Relax function (a branch of a Relax ``If``, or the body of a loop run by
recursion).

- ``cf.if(cond, captures...)``: two regions, then and else, whose block
  arguments are the captures; both return values of the op's result types.
- ``cf.loop(trip_count, cond, carried..., captures...)``: one region whose
  block arguments are ``(iteration, cond, carried..., captures...)`` and
  which returns ``(cond, carried...)``; the op's results are the carried
  values after the last iteration. It runs while ``iteration <
  trip_count`` and ``cond`` hold (ONNX ``Loop``).
"""

from __future__ import annotations

from ...errors import VerifyError
from ..registry import Int, Kind, OpDef, register


@register
class If(OpDef):
    """``cf.if``: run the then region when ``cond`` (a scalar i1) holds,
    else the else region; the results are what the region ran returns."""

    name = "cf.if"
    kind = Kind.OPAQUE
    operands = ("cond", "captures*")
    has_regions = True
    explicit_result_types = True

    def infer(self, *types, **attrs):
        raise VerifyError("cf.if takes its types from its regions")


@register
class Loop(OpDef):
    """``cf.loop``: ONNX Loop's loop-carried form. ``carried`` is the
    number of loop-carried operands after ``trip_count`` and ``cond``."""

    name = "cf.loop"
    kind = Kind.OPAQUE
    operands = ("trip_count", "cond", "values*")
    attrs = {"carried": Int()}
    has_regions = True
    explicit_result_types = True

    def infer(self, *types, **attrs):
        raise VerifyError("cf.loop takes its types from its operands")
