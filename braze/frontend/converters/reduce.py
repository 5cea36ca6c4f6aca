"""ONNX reduce converters."""

from ..registry import converter  # noqa: F401
