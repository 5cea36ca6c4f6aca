"""braze: a fusion compiler for ONNX models, built on Apache TVM.

Public API (docs/usage.md)::

    artifact = braze.compile("model.onnx", target="cpu", level=2, fusion={"no_fuse": ["Slice"]})
    artifact.save("model.braze"); artifact = braze.load("model.braze")
    outputs = artifact.run({"x": x})              # {name: numpy array}
    sess = braze.InferenceSession("model.onnx")   # onnxruntime's API: get_inputs(), run(None, feeds)
    braze.Target, braze.get_target("cpu-avx2"), braze.FusionOptions(level=3)

and for the compiler's insides::

    module = braze.load_onnx("model.onnx", input_shapes={"x": (1, 3, 224, 224)})
    braze.PassManager.parse("canonicalize,cse,dce").run(module)
    print(module)                      # IR text
    braze.kernels("model.onnx")        # the kernels: ops, shapes, schedule, FLOPs
    braze.schedule_variants("model.onnx", "k10")   # one kernel under several schedules, timed
"""

from __future__ import annotations

from .version import __version__  # noqa: E402,F401

from .errors import BrazeError  # noqa: E402


def load_onnx(model, input_shapes=None):
    """Import an ONNX model (path, bytes or ModelProto) into an IR Module.

    Args:
        model: the ONNX model.
        input_shapes: binds dynamic input dimensions: ``{"x": (1, 3, 224,
            224)}`` or ``["x=1x3x224x224"]``.

    Returns:
        Module: the IR; ``print(module)`` is its text.

    Raises:
        ModelLoadError, OnnxImportError: as ``braze.compile``.

    Example::

        module = braze.load_onnx("model.onnx")
        braze.PassManager.parse("canonicalize,cse,dce").run(module)
    """
    from .frontend import import_onnx

    return import_onnx(model, input_shapes)


def parse_ir(text: str, weights: str | None = None):
    """Parse and verify IR text.

    Args:
        text: IR text (``braze import`` writes it).
        weights: the ``.weights.npz`` beside it, for its ``dense_resource`` constants.

    Returns:
        Module: the verified IR.

    Raises:
        ParseError: the text does not parse (it names the line and column).
        VerifyError: an op breaks its contract (it names the op).

    Example::

        module = braze.parse_ir(open("model.mlir").read(), "model.weights.npz")
    """
    from .ir import load_blobs, parse_module, verify

    return verify(parse_module(text, blobs=load_blobs(weights) if weights else None))


#: name -> (module, attribute) of the lazily imported public names
_PUBLIC = {"compile": ("compiler", "compile"), "compile_module": ("compiler", "compile_module"),
           "load": ("runtime", "load"), "Artifact": ("runtime.artifact", "Artifact"),
           "Target": ("targets", "Target"), "get_target": ("targets", "get_target"),
           "FusionOptions": ("passes.fusion", "FusionOptions"), "InferenceSession": ("session", "InferenceSession")}


def __getattr__(name):  # lazy, so that `import braze` stays light
    if name in _PUBLIC:
        import importlib

        module, attribute = _PUBLIC[name]
        return getattr(importlib.import_module(f".{module}", __name__), attribute)
    if name == "PassManager":
        from .passes import PassManager

        return PassManager
    if name in ("kernels", "schedule_variants"):  # schedule experiments (docs/performance.md)
        from .tools import experiment

        return getattr(experiment, name)
    raise AttributeError(name)


def __dir__():  # the lazily imported names too
    return sorted(set(globals()) | set(__all__))


__all__ = ["Artifact", "BrazeError", "FusionOptions", "InferenceSession", "PassManager", "Target", "compile",
           "compile_module", "get_target", "kernels", "load", "load_onnx", "parse_ir", "schedule_variants"]
