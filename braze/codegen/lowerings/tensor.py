"""Lowerings of the tensor ops."""

from tvm import te, topi  # noqa: F401

from ..registry import lowering  # noqa: F401
