"""Real models: import, print -> parse -> print identity, canonicalize, numerics."""

import numpy as np
import pytest

from braze.frontend import import_onnx
from braze.ir import parse_module, print_module, verify
from braze.ir.interpret import interpret
from braze.passes import PassManager
from models import DATA, LIGHT, TINY, light, tiny

SHAPE_OPS = {"tensor.shape"}


def roundtrip(module):
    text = print_module(module)
    again = verify(parse_module(text, blobs=module.blobs))
    assert print_module(again) == text
    return again


def canonical(module):
    PassManager.parse("canonicalize,cse,dce").run(module)
    names = {op.name for op in module.walk()}
    assert not names & SHAPE_OPS, f"shape computations left: {names & SHAPE_OPS}"
    roundtrip(module)
    return module


@pytest.mark.parametrize("name", TINY)
def test_tiny_model_imports_and_round_trips(name):
    module = import_onnx(tiny(name))
    roundtrip(module)
    canonical(module)


@pytest.mark.parametrize("name", TINY)
def test_tiny_model_numerics_match_onnxruntime_reference(name):
    module = canonical(import_onnx(tiny(name)))
    feeds = dict(np.load(DATA / f"{name}.inputs.npz"))
    ref = dict(np.load(DATA / f"{name}.ref.npz"))
    ours = interpret(module, feeds)
    for key, expected in ref.items():
        scale = max(1.0, float(np.abs(expected).max()))
        assert np.abs(ours[key] - expected).max() <= 1e-4 * scale, key


@pytest.mark.parametrize("name", LIGHT)
def test_light_model_imports_and_round_trips(name):
    module = import_onnx(light(name))
    roundtrip(module)
    canonical(module)
