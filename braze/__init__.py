"""braze: a fusion compiler for ONNX models, built on Apache TVM.

Public API::

    module = braze.load_onnx("model.onnx", input_shapes={"x": (1, 3, 224, 224)})
    braze.PassManager.parse("canonicalize,cse,dce").run(module)
    print(module)                      # IR text
    braze.kernels("model.onnx")        # the kernels: ops, shapes, schedule, FLOPs
    braze.schedule_variants("model.onnx", "k10")   # one kernel under several schedules, timed
"""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import BrazeError  # noqa: E402


def load_onnx(model, input_shapes=None):
    """Import an ONNX model (path, bytes or ModelProto) into an IR Module.

    ``input_shapes`` binds dynamic input dimensions: ``{"x": (1, 3, 224, 224)}``
    or ``["x=1x3x224x224"]``.
    """
    from .frontend import import_onnx

    return import_onnx(model, input_shapes)


def parse_ir(text: str, weights: str | None = None):
    """Parse and verify IR text; ``weights`` is a ``.weights.npz`` file."""
    from .ir import load_blobs, parse_module, verify

    return verify(parse_module(text, blobs=load_blobs(weights) if weights else None))


def __getattr__(name):  # lazy, so that `import braze` stays light
    if name == "PassManager":
        from .passes import PassManager

        return PassManager
    if name in ("kernels", "schedule_variants"):  # schedule experiments (docs/performance.md)
        from .codegen import experiment

        return getattr(experiment, name)
    raise AttributeError(name)


__all__ = ["BrazeError", "PassManager", "kernels", "load_onnx", "parse_ir", "schedule_variants"]
