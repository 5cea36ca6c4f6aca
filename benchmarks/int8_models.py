"""Quantized models: braze int8 against onnxruntime int8 and braze float32.

    python benchmarks/int8_models.py ~/.cache/braze-models --models resnet18,resnet50,bert-base \
        [--threads 2] [--repeat 40] [--target cpu] [--out DIR]

For each float model ``NAME.onnx`` in the cache folder (with its
``NAME.inputs.npz``), the script quantizes it with onnxruntime's own tools
(CNNs: ``quantize_static``, QDQ, per-channel int8 weights, uint8
activations, calibrated on 8 random inputs; transformers:
``quantize_dynamic``, int8 weights), written beside it as
``NAME.int8.onnx``; then compiles the int8 and the float model at level 2
and times four engines, each alone (braze.timing.time_alone): braze int8,
onnxruntime int8, braze float32, and onnxruntime int8 again as the
control. It reports the ratios braze int8 / onnxruntime int8 and braze int8
/ braze float32 (medians of per-phase ratios, with their range), the
outputs' agreement with onnxruntime int8 (max abs difference, in output
quantization steps where the model ends in a dequantize), and writes
benchmarks/results/<cpu>-<isa>/int8-models.json (``-TARGET`` added for a
target other than ``cpu``; benchmarks/report.py renders it).
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

CNNS = ("resnet", "mobilenet", "efficientnet", "vgg", "yolo")


def quantized(float_path: Path, inputs: dict) -> Path:
    """``NAME.int8.onnx`` beside the float model, made once."""
    out = float_path.with_name(f"{float_path.stem}.int8.onnx")
    if out.exists():
        return out
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                          quantize_static)

    if float_path.stem.startswith(CNNS):
        rng = np.random.default_rng(0)

        class Reader(CalibrationDataReader):
            def __init__(self):
                self.feeds = iter([{k: rng.standard_normal(v.shape).astype(v.dtype) for k, v in inputs.items()}
                                   for _ in range(8)])

            def get_next(self):
                return next(self.feeds, None)

        quantize_static(str(float_path), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    else:
        quantize_dynamic(str(float_path), str(out), weight_type=QuantType.QInt8)
    return out


def model_row(float_path: Path, threads: int, repeat: int, work: Path, target: str) -> dict:
    import onnxruntime as ort

    from braze.compiler import compile as braze_compile
    from braze.measure import ORT
    from braze.timing import Engine, time_alone

    name = float_path.stem
    inputs = dict(np.load(float_path.with_name(f"{name}.inputs.npz")))
    int8_path = quantized(float_path, inputs)
    engines, row = [], {"name": name, "quantization": "static QDQ" if name.startswith(CNNS) else "dynamic"}
    for label, path in (("braze-int8", int8_path), ("braze-f32", float_path)):
        artifact = braze_compile(str(path), target=target, level=2, threads=threads, cache_dir=None)
        if label == "braze-int8":
            ours = artifact.run(inputs)
            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            ref = ort.InferenceSession(str(int8_path), options).run(None, inputs)
            row["max_abs_diff"] = max(float(np.abs(ours[k].astype(np.float64) - r).max())
                                      for k, r in zip(ours, ref))
            row["int8_kernels"] = len(artifact.kernels)
            row["int8_rules"] = sorted({k.get("schedule") or "generic" for k in artifact.kernels})
        artifact.save(str(work / f"{name}-{label}.braze"))
        engines.append(Engine("braze", str(work / f"{name}-{label}.braze"), label))
        del artifact
    engines += [Engine(ORT, str(int8_path), "onnxruntime-int8"), Engine(ORT, str(int8_path), "onnxruntime-int8#2")]
    timing = time_alone(engines, inputs, threads, phases=10, runs=max(1, -(-repeat // 10)), warmup=2, processes=2)
    row["ms"] = {e.name: timing.engines[e.name].median_ms for e in engines}
    row["ratios"] = {"braze int8 / onnxruntime int8": timing.ratio("braze-int8", "onnxruntime-int8").to_dict(),
                     "braze int8 / braze f32": timing.ratio("braze-int8", "braze-f32").to_dict()}
    row["control"] = timing.ratio("onnxruntime-int8", "onnxruntime-int8#2").to_dict()
    return row


def main() -> int:
    import report
    import results_io

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cache", type=Path, help="folder with NAME.onnx and NAME.inputs.npz")
    ap.add_argument("--models", default="resnet18,resnet50,bert-base")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=40)
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--out", type=Path, help="folder for the results file (default: benchmarks/results/<cpu>-<isa>/)")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            rows.append(model_row(args.cache / f"{name}.onnx", args.threads, args.repeat, Path(tmp), args.target))
            print(json.dumps(rows[-1]), flush=True)
    doc = results_io.result(
        "int8-models", "int8 models: braze level 2 int8 vs onnxruntime int8 and braze level 2 float32", rows,
        threads=args.threads, target=args.target, timing=results_io.time_alone(),
        control="onnxruntime int8 against itself")
    print(f"wrote {results_io.write(doc, args.out)}\n\n" + "\n".join(report.table(doc)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
