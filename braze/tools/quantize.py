"""``braze quantize``: a float ONNX model to an int8 QDQ model, by
onnxruntime's static quantizer (``onnxruntime.quantization.quantize_static``:
QDQ format, per-channel signed int8 weights, unsigned int8 activations),
calibrated on the user's inputs. braze has no calibrator of its own; this is
a front over onnxruntime's for users who start from a float model.

Calibration inputs: an ``.npz`` with one array per graph input. An array
whose leading dim is a multiple of the input's batch dim holds that many
samples (a batch of 1 from ``[8, 3, 224, 224]`` gives 8 samples).
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
import onnx

from ..errors import InputError, ModelLoadError
from ..measure import load_inputs


def samples(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """The calibration samples: each graph input's array cut along its leading dim into the model's batch."""
    initializers = {i.name for i in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in initializers]
    missing = [i.name for i in graph_inputs if i.name not in inputs]
    if missing:
        raise InputError(f"the calibration file lacks graph inputs {missing} (it has {sorted(inputs)})")
    counts = set()
    for i in graph_inputs:
        dims = i.type.tensor_type.shape.dim
        batch = dims[0].dim_value if dims and dims[0].dim_value > 0 else 1
        lead = inputs[i.name].shape[0] if inputs[i.name].ndim else 1
        if lead % batch:
            raise InputError(f"calibration input '{i.name}' has {lead} rows, not a multiple of the model's "
                             f"batch of {batch}")
        counts.add(lead // batch)
    if len(counts) != 1:
        raise InputError(f"calibration inputs hold different numbers of samples: {sorted(counts)}")
    n = counts.pop()
    out = []
    for s in range(n):
        sample = {}
        for i in graph_inputs:
            a = inputs[i.name]
            rows = a.shape[0] // n
            sample[i.name] = a[s * rows:(s + 1) * rows]
        out.append(sample)
    return out


def quantize(model_path: str, calibration: str, out: str, per_channel: bool = True) -> str:
    """Write ``out``, the int8 QDQ form of ``model_path`` calibrated on ``calibration`` (.npz); returns ``out``."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    try:
        model = onnx.load(model_path)
    except Exception as e:  # noqa: BLE001 -- onnx raises several types for a bad file
        raise ModelLoadError(f"cannot read {model_path} as an ONNX model: {e}") from None
    data = samples(model, load_inputs(calibration))

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter(data)

        def get_next(self):
            return next(self.items, None)

    folder = os.path.dirname(os.path.abspath(out)) or "."
    fd, tmp = tempfile.mkstemp(suffix=".onnx", dir=folder)
    os.close(fd)
    try:
        quantize_static(model_path, tmp, Reader(), quant_format=QuantFormat.QDQ, per_channel=per_channel,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        os.replace(tmp, out)  # never a half-written model at ``out``
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return out
