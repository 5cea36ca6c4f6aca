"""ONNX frontend: the only package that imports onnx."""

from .importer import import_model, import_onnx, load_model, parse_shape_bindings
from .registry import supported_op_types


def onnx_version() -> str:
    import onnx

    return onnx.__version__

__all__ = ["import_model", "import_onnx", "load_model", "parse_shape_bindings", "onnx_version", "supported_op_types"]
