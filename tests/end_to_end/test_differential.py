"""Differential testing: random small ONNX graphs (tests/support/random_graphs.py),
compiled by braze at fusion levels 0 to 3, each compared with onnxruntime.

The run is fixed (``derandomize``: the same graphs every time) and small
enough for CI; ``BRAZE_DIFF_EXAMPLES=200`` draws that many graphs per test
instead, and ``BRAZE_DIFF_SEED=N`` draws other graphs than CI's. A failure is
shrunk by hypothesis to a minimal graph, printed as ONNX text, and saved to
``tests/regressions/`` (or ``BRAZE_DIFF_SAVE``), where
``test_saved_regressions`` runs it from then on (docs/testing.md).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from hypothesis import HealthCheck, given, note, seed, settings
from hypothesis import strategies as st

from braze.compiler import compile as braze_compile
from onnx_check import random_inputs, run_ort
from random_graphs import models, shapes

LEVELS = (0, 1, 2, 3)
TOLERANCE = 1e-4  # `braze verify`'s: max error <= 1e-4 * max(1, max|reference|), per output
REGRESSIONS = Path(__file__).parents[1] / "regressions"
EXAMPLES = int(os.environ.get("BRAZE_DIFF_EXAMPLES", "0"))
onnxruntime.set_default_logger_severity(3)  # random graphs may leave a weight unused: not worth a warning

diff_settings = settings(
    max_examples=EXAMPLES or 10,
    derandomize="BRAZE_DIFF_SEED" not in os.environ,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
other_seed = seed(int(os.environ["BRAZE_DIFF_SEED"])) if "BRAZE_DIFF_SEED" in os.environ else (lambda f: f)


def check_levels(model: onnx.ModelProto, feeds=None, expected=None, levels=LEVELS) -> None:
    """braze at every level gives onnxruntime's outputs: names, shapes, dtypes, values."""
    feeds = random_inputs(model) if feeds is None else feeds
    expected = run_ort(model, feeds) if expected is None else expected
    for level in levels:
        got = braze_compile(model, level=level).run(feeds)
        assert sorted(got) == sorted(expected), f"level {level}: outputs {sorted(got)} vs {sorted(expected)}"
        for name, ref in expected.items():
            where = f"level {level}, output {name}"
            assert got[name].shape == ref.shape, f"{where}: shape {got[name].shape} vs {ref.shape}"
            assert got[name].dtype == ref.dtype, f"{where}: dtype {got[name].dtype} vs {ref.dtype}"
            scale = max(1.0, float(np.max(np.abs(ref), initial=0.0, where=np.isfinite(ref))))
            np.testing.assert_allclose(got[name], ref, rtol=TOLERANCE, atol=TOLERANCE * scale, err_msg=where)


def differential(model: onnx.ModelProto) -> None:
    """check_levels, and on the final (shrunk) failure save the graph as a regression."""
    note(onnx.printer.to_text(model))
    feeds = random_inputs(model)
    expected = run_ort(model, feeds)  # (a graph onnxruntime refuses is the generator's bug: not saved)
    try:
        check_levels(model, feeds, expected)
    except Exception:
        if _is_final_run():
            path = save_regression(model)
            note(f"saved as {path}: test_saved_regressions now runs it")
        raise


def _is_final_run() -> bool:
    """Hypothesis replays the minimal failing example last, with is_final set."""
    try:
        from hypothesis.control import current_build_context

        return current_build_context().is_final
    except Exception:  # an internal API: without it, save every failing example
        return True


def save_regression(model: onnx.ModelProto) -> Path:
    folder = Path(os.environ.get("BRAZE_DIFF_SAVE") or REGRESSIONS)
    folder.mkdir(parents=True, exist_ok=True)
    data = model.SerializeToString()
    path = folder / f"diff-{hashlib.sha256(data).hexdigest()[:10]}.onnx"
    path.write_bytes(data)
    return path


# --- the random graphs, by family (each family gets its share of the CI budget) ----------------------------
@diff_settings
@other_seed
@given(models(("elementwise", "broadcast"), max_ops=4))
def test_elementwise_and_broadcasting(model):
    differential(model)


@diff_settings
@other_seed
@given(models(("matmul", "broadcast", "elementwise", "norm"), max_ops=3))
def test_matmul_and_normalization(model):
    differential(model)


@diff_settings
@other_seed
@given(models(("conv", "pool", "elementwise", "broadcast"), max_ops=3, input_shapes=shapes(3, 4, 5)))
def test_conv_and_pooling(model):
    differential(model)


@diff_settings
@other_seed
@given(models(("reduce", "movement", "elementwise"), max_ops=3))
def test_reductions_and_data_movement(model):
    differential(model)


@diff_settings
@other_seed
@given(models(("other", "elementwise"), max_ops=3, input_shapes=st.one_of(shapes(), shapes(4, 4, 5))))
def test_other_ops(model):
    """CumSum, TopK, Einsum, GatherElements, Mod, Dropout, Resize, DepthToSpace, SpaceToDepth, LRN."""
    differential(model)


@diff_settings
@other_seed
@given(models(max_ops=5, input_shapes=st.one_of(shapes(), shapes(4, 4, 4))))
def test_any_ops(model):
    differential(model)


# --- every graph that once failed ----------------------------------------------------------------------
@pytest.mark.parametrize("path", sorted(REGRESSIONS.glob("*.onnx")), ids=lambda p: p.stem)
def test_saved_regressions(path):
    check_levels(onnx.load(path))
