"""braze: a fusion compiler for ONNX models, built on Apache TVM."""

__version__ = "0.1.0"
