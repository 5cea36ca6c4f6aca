"""Fixtures of the frontend tests."""

import pytest

from quant_models import quantized_static, small_cnn


@pytest.fixture(scope="module")
def static_cnn(tmp_path_factory):
    """The CNN quantized by quantize_static: QDQ, int8 weights per channel."""
    from onnxruntime.quantization import QuantFormat

    return quantized_static(small_cnn(), tmp_path_factory.mktemp("quant"), "qdq.onnx", quant_format=QuantFormat.QDQ)
