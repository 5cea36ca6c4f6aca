"""ONNX elementwise, activation, comparison and logic converters."""

from __future__ import annotations

from ..registry import converter

BINARY = {"Add": "math.add", "Sub": "math.sub", "Mul": "math.mul"}
UNARY = {"Relu": "math.relu", "Exp": "math.exp"}


def _binary(op: str):
    def convert(ctx, A, B):
        return ctx.op(op, [A, B])
    return convert


def _unary(op: str):
    def convert(ctx, X):
        return ctx.op(op, [X])
    return convert


for _onnx, _ir in BINARY.items():
    converter(_onnx)(_binary(_ir))
for _onnx, _ir in UNARY.items():
    converter(_onnx)(_unary(_ir))
