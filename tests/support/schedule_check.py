"""What the schedule tests share: the target they build for, whether this
host runs its code, random weights, and a compile checked against onnxruntime.

They build for the host (``cpu``), or for the target that
``BRAZE_TEST_TARGET`` names (``cpu-avx2``, ``cpu-avx512``; docs/testing.md,
"Forcing an ISA")."""

from __future__ import annotations

import os

import numpy as np

from braze.compiler import compile as braze_compile
from onnx_check import run_ort

RNG = np.random.default_rng(7)

#: the target every schedule test builds for
TARGET = os.environ.get("BRAZE_TEST_TARGET", "cpu")


def build_target():
    """TARGET as a braze Target."""
    from braze.targets import get_target

    return get_target(TARGET)


def runs_here() -> bool:
    """Whether this host can run code built for TARGET."""
    from braze.targets.isa import missing, requirements

    return missing(requirements(build_target())) is None


def check_numerics(model, level=2, schedules=None, rtol=1e-4, atol=1e-4):
    """``model`` compiled for TARGET and, where this host runs it, checked
    against onnxruntime on N(0, 1) inputs; the artifact."""
    feeds = {i.name: RNG.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
             for i in model.graph.input}
    art = braze_compile(model, target=TARGET, level=level, schedules=schedules)
    if not runs_here():  # built (every kernel scheduled and compiled); not runnable on this CPU
        return art
    got = art.run(feeds)
    for name, expected in run_ort(model, feeds).items():
        np.testing.assert_allclose(got[name], expected, rtol=rtol, atol=atol, err_msg=name)
    return art


def weight(*shape):
    """A random weight of ``shape``, scaled by its fan-in."""
    return (RNG.standard_normal(shape) / np.sqrt(np.prod(shape[1:]) or 1)).astype(np.float32)
