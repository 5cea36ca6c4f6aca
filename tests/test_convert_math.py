"""Numerics of the math converters: reference interpreter vs onnxruntime."""

import pytest

from onnx_check import check_against_ort

HEAD = '<ir_version: 8, opset_import: ["" : 17]>'


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul"])
def test_binary_broadcast(op):
    check_against_ort(f"{HEAD} g (float[2,3,4] a, float[3,1] b) => (float[2,3,4] y) {{ y = {op}(a, b) }}")


@pytest.mark.parametrize("op", ["Relu", "Exp"])
def test_unary(op):
    check_against_ort(f"{HEAD} g (float[2,3] x) => (float[2,3] y) {{ y = {op}(x) }}")
