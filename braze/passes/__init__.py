"""Passes over the IR and the pipeline machinery. Imports neither onnx nor tvm."""

from .manager import Pass, PassManager, available_passes, parse_pass, register_pass
from .rewrite import Pattern, Rewriter, apply_patterns, pattern

__all__ = ["Pass", "PassManager", "Pattern", "Rewriter", "apply_patterns", "available_passes",
           "parse_pass", "pattern", "register_pass"]
