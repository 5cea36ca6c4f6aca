"""ONNX nn converters."""

from ..registry import converter  # noqa: F401
