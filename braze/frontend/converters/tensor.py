"""ONNX tensor converters."""

from ..registry import converter  # noqa: F401
