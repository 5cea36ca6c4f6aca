"""Schedule rules' typed parameters (``Param`` in codegen/schedules/rule.py):
every rule declares them, pins are checked against the declaration before
anything is built, and ``braze schedule --rule NAME`` prints it."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from braze.cli import main
from braze.codegen.pins import check_pin
from braze.codegen.schedules import RULES, plan
from braze.codegen.schedules.doc import params_text
from braze.codegen.schedules.rule import PRIORITY, Param
from braze.errors import ScheduleError
from braze.targets import get_target
from braze.tools.listing import fused
from braze.codegen.kernel import partition

TARGET = "cpu-avx512"


def _conv_model(tmp_path, c=16, k=32, size=28, kernel=3):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((k, c, kernel, kernel)).astype(np.float32), "W")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "W"], ["y"], pads=[kernel // 2] * 4)], "conv",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    path = tmp_path / "conv.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _kernel(path, layout="plain"):
    return partition(fused(str(path), 2, None, None, TARGET, None, layout).main)[0]


def test_every_rule_declares_its_parameters_once():
    """Every rule is in PRIORITY and declares what its defaults give; each
    declaration says its meaning and default, and names are unique."""
    assert [name for name, _ in PRIORITY] == list(RULES)
    for rule in RULES.values():
        names = [p.name for p in rule.params]
        assert len(names) == len(set(names)), rule.name
        for p in rule.params:
            assert isinstance(p, Param) and p.meaning and p.default != "", (rule.name, p.name)
            if isinstance(p.default, int):
                assert p.allows(p.default), (rule.name, p.name)


def test_param_allows_its_values_range_and_off():
    order = Param("order", "loop order", 1, values=(1, 2))
    chain = Param("chain", "rows", "model", off=True)
    assert order.allows(2) and not order.allows(3) and not order.allows(True) and not order.allows("2")
    assert order.allowed() == "1 or 2"
    assert chain.allows(0) and chain.allows(7) and not chain.allows(-1)
    assert chain.allowed() == "an integer >= 1 (0: off)"
    assert Param("blocks", "b", 1, high=4).allowed() == "1 to 4"
    assert Param("t", "t", 4).tries(4) == [2, 8]  # half and double by default


def test_conv2d_order_3_is_a_typed_error_before_any_build(tmp_path):
    kernel = _kernel(_conv_model(tmp_path))
    target = get_target(TARGET)
    assert plan(kernel, target)[0].rule.name == "conv2d"
    with pytest.raises(ScheduleError, match="conv2d's order takes 1 or 2, got 3"):
        check_pin(kernel, target, {"rule": "conv2d", "params": {"order": 3}})
    with pytest.raises(ScheduleError, match="conv2d's order takes 1 or 2"):
        plan(kernel, target, {"rule": "conv2d", "params": {"order": 3}})
    assert check_pin(kernel, target, {"rule": "conv2d", "params": {"order": 2, "block_c": 0}})


def test_apply_gets_every_declared_parameter(tmp_path):
    """A constant default the rule's defaults leave out is filled in (0 where 0 is off)."""
    rule = RULES["blocked"]
    assert rule.complete({"tile_k": 1, "tile_w": 7, "order": 2, "pad": 2}) == \
        {"tile_k": 1, "tile_w": 7, "order": 2, "pad": 2, "block_c": 0, "chain": 0}
    assert RULES["depthwise"].complete({"tile_w": 8}) == {"tile_w": 8, "form": 1, "unroll": 4}


def test_packed_layout_params_come_from_the_declaration():
    assert RULES["gemm"].packed_by == ("tile_n",)
    assert RULES["winograd"].packed_by == ("tile", "tile_k")
    assert RULES["blocked"].packed_by == ()


def test_grid_is_declared_for_every_rule(tmp_path):
    """A grid needs no function of its own: each parameter's declared grid,
    with the rule's register tiles where it has them."""
    kernel = _kernel(_conv_model(tmp_path))
    target = get_target(TARGET)
    [c] = plan(kernel, target)
    grid = c.rule.grid(kernel.ops[c.index], target, c.params)
    assert grid and c.params not in grid
    assert {**c.params, "order": 3 - c.params["order"]} in grid
    assert all(set(g) == set(c.params) for g in grid)


def test_cli_prints_a_rule_from_its_declaration(capsys):
    assert main(["schedule", "--rule", "conv2d"]) == 0
    out = capsys.readouterr().out
    assert out == params_text(RULES["conv2d"]) + "\n"
    for text in ("order: 1: channel blocks outside", "values:  1 or 2", "grid:    1, 2", "(fixes the packed layout)",
                 "block_c:", "(0 turns it off)"):
        assert text in out
    assert main(["schedule", "--rule", "amx"]) == 0 and "no parameters" in capsys.readouterr().out
    assert main(["schedule", "--rule", "fancy"]) == 1
    assert "unknown schedule rule 'fancy'" in capsys.readouterr().err
    assert main(["schedule"]) == 1 and "--rule NAME alone" in capsys.readouterr().err


def test_cache_tests_count_real_element_bytes():
    """One machine model: a 16-bit tensor takes 2 bytes an element, a widened copy 4."""
    from braze.codegen.schedules.machine import block_c, element_bytes, in_half_l2, nbytes, rows_outside
    from braze.ir.types import TensorType

    target = SimpleNamespace(l2_bytes=1 << 20, l1d_bytes=32 << 10)
    w16, w32 = TensorType((512, 512, 1, 1), "f16"), TensorType((512, 512, 1, 1), "f32")
    assert element_bytes(w16) == 2 and nbytes(w16) == 512 * 512 * 2 and nbytes(w16, widened=True) == nbytes(w32)
    assert in_half_l2(nbytes(w16), target) and not in_half_l2(nbytes(w32) + 1, target)
    assert rows_outside(100, 200, target) == 2 and rows_outside(200, 100, target) == 1
    assert rows_outside((1 << 19) + 1, 1 << 30, target) == 1
    # K blocks: whole input blocks up to 64 channels; under half of that, the fewest up to 128; order 2: none
    assert block_c(256, 16, 1024, 1, target) == 64
    assert block_c(784, 16, 1024, 1, target) == 112
    assert block_c(256, 16, 1024, 2, target) == 256
