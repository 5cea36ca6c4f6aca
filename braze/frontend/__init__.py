"""ONNX frontend: the only package that imports onnx."""

from .importer import import_onnx, load_model, parse_shape_bindings
from .registry import supported_op_types

__all__ = ["import_onnx", "load_model", "parse_shape_bindings", "supported_op_types"]
