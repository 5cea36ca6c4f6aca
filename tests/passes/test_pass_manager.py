"""Pipeline strings, options, verification between passes, IR dumps, timing."""

import io
from dataclasses import dataclass
from typing import ClassVar

import pytest

from braze.errors import PassError
from braze.ir import parse_module
from braze.passes import Pass, PassManager, available_passes, parse_pass
from braze.passes.manager import PASSES, register_pass

TEXT = """func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32> {name = "y"}) {
  %0 = "math.relu"(%x) : (tensor<2xf32>) -> tensor<2xf32>
  %1 = "math.relu"(%x) : (tensor<2xf32>) -> tensor<2xf32>
  "func.return"(%0) : (tensor<2xf32>) -> ()
}
"""


@register_pass
@dataclass(frozen=True)
class _Opts(Pass):
    """A pass with one option of each kind, for these tests."""

    name: ClassVar[str] = "test-options"
    level: int = 2
    ratio: float = 0.5
    strict: bool = False
    scope: str = ""
    no_fuse: tuple[str, ...] = ()

    def run(self, module):
        return False


@register_pass
@dataclass(frozen=True)
class _Breaks(Pass):
    """Leaves the IR broken: the manager must notice."""

    name: ClassVar[str] = "test-break"

    def run(self, module):
        module.main.body.ops[0].results[0].type = module.main.body.ops[0].results[0].type.with_shape((3,))
        return True


@pytest.mark.parametrize("pipeline", [
    "canonicalize,cse,dce",
    "test-options{level=3 no-fuse=Slice,Concat}",
    'test-options{ratio=0.25 strict=true scope=encoder.layer.[0-5]},dce',
    'test-options{scope="a b"}',
])
def test_pipeline_string_round_trips(pipeline):
    assert str(PassManager.parse(pipeline)) == pipeline


def test_options_are_typed():
    p = parse_pass("test-options{level=3 ratio=1e-3 strict no-fuse=Slice,Concat}")
    assert p == _Opts(level=3, ratio=1e-3, strict=True, no_fuse=("Slice", "Concat"))
    assert str(PassManager([p, available_passes()["dce"]()])) == "test-options{level=3 ratio=0.001 strict=true no-fuse=Slice,Concat},dce"


@pytest.mark.parametrize("pipeline, message", [
    ("nonsense", "unknown pass 'nonsense'"),
    ("test-options{levle=3}", "has no option 'levle'"),
    ("test-options{level=high}", "option 'level' expects int, got 'high'"),
    ("test-options{level=3", "unbalanced braces"),
    ("canonicalize{fold=maybe}", "expects bool"),
])
def test_bad_pipelines_are_typed_errors(pipeline, message):
    with pytest.raises(PassError, match=message.replace("{", r"\{").replace("[", r"\[")):
        PassManager.parse(pipeline)


def test_verification_between_passes_names_the_pass():
    with pytest.raises(PassError, match="after pass 'test-break'"):
        PassManager.parse("test-break").run(parse_module(TEXT))


def test_print_ir_after_all_and_timing():
    out = io.StringIO()
    pm = PassManager.parse("cse,dce", print_ir_after_all=True, out=out)
    pm.run(parse_module(TEXT))
    dump = out.getvalue()
    assert "// -----// IR Dump After CSE (cse) //----- //" in dump
    assert "// -----// IR Dump After DeadCodeElimination (dce) //----- //" in dump
    assert [name for name, _, _ in pm.timings] == ["cse", "dce"]
    assert "total" in pm.timing_report()


def test_builtin_passes_are_registered():
    assert {"canonicalize", "cse", "dce"} <= set(available_passes())
    assert PASSES["test-options"] is _Opts
