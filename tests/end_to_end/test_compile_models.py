"""Real models compiled to TVM kernels match onnxruntime (level 0: one kernel per op)."""

import numpy as np
import onnx
import pytest

from braze.compiler import compile as braze_compile
from models import DATA, LIGHT_DIR, TINY, assert_close, tiny
from onnx_check import run_ort


@pytest.mark.parametrize("name", TINY)
def test_tiny_model(name):
    artifact = braze_compile(str(tiny(name)), level=0)
    feeds = dict(np.load(DATA / f"{name}.inputs.npz"))
    assert_close(artifact.run(feeds), dict(np.load(DATA / f"{name}.ref.npz")))


@pytest.mark.parametrize("name", ["light_squeezenet", "light_shufflenet"])
def test_light_model(name):
    model = onnx.load(LIGHT_DIR / f"{name}.onnx")
    artifact = braze_compile(model, level=0)
    spec = artifact.inputs[0]
    x = np.random.default_rng(0).standard_normal(spec["shape"]).astype(spec["dtype"])
    assert_close(artifact.run({spec["name"]: x}), run_ort(model, {spec["name"]: x}))

