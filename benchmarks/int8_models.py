"""Quantized models: braze int8 against onnxruntime int8 and braze float32.

    python benchmarks/int8_models.py ~/.cache/braze-models --models resnet18,resnet50,bert-base \
        [--threads 2] [--repeat 40] [--target cpu] [--out benchmarks/results/HOST/]

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
int8-models.json and int8-models.md.
"""
from __future__ import annotations

import argparse
import json
import subprocess
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
    engines, row = [], {"model": name, "quantization": "static QDQ" if name.startswith(CNNS) else "dynamic"}
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
    engines += [Engine(ORT, str(int8_path), "ort-int8"), Engine(ORT, str(int8_path), "ort-int8#2")]
    timing = time_alone(engines, inputs, threads, phases=10, runs=max(1, -(-repeat // 10)), warmup=2, processes=2)
    row["ms"] = {e.name: timing.engines[e.name].median_ms for e in engines}
    row["int8_vs_ort_int8"] = timing.ratio("braze-int8", "ort-int8").to_dict()
    row["int8_vs_f32"] = timing.ratio("braze-int8", "braze-f32").to_dict()
    row["control"] = timing.ratio("ort-int8", "ort-int8#2").to_dict()
    return row


def markdown(report: dict) -> str:
    def r(x: dict) -> str:
        return f"{x['ratio']:.2f} ({x['ratio_min']:.2f}-{x['ratio_max']:.2f})"

    host = report["host"]
    lines = [f"# Quantized models ({host['cpu']}, {host['isa']}, LLVM `{host['llvm_cpu']}`, "
             f"{report['threads']} threads, commit `{report['commit']}`)", "",
             f"Method: {report['method']}", "",
             "| model | quantization | braze int8 / ORT int8 | braze int8 / braze f32 | control | max abs diff | "
             "rules |", "|---|---|---|---|---|---|---|"]
    for row in report["models"]:
        lines.append(f"| {row['model']} | {row['quantization']} | {r(row['int8_vs_ort_int8'])} | "
                     f"{r(row['int8_vs_f32'])} | {r(row['control'])} | {row['max_abs_diff']:.3g} | "
                     f"{', '.join(row['int8_rules'])} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    from braze.targets.detect import describe_host

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cache", type=Path, help="folder with NAME.onnx and NAME.inputs.npz")
    ap.add_argument("--models", default="resnet18,resnet50,bert-base")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=40)
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--out", type=Path, default=Path("int8-out"))
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    report = {"what": "int8 models: braze level 2 int8 vs onnxruntime int8 and braze level 2 float32",
              "host": describe_host(), "commit": commit, "threads": args.threads, "target": args.target,
              "method": "each engine timed alone in its own worker processes (braze.timing.time_alone), 10 "
                        "alternating phases over 2 process generations, medians and per-phase ratio ranges; "
                        "control: onnxruntime int8 against itself",
              "models": []}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            row = model_row(args.cache / f"{name}.onnx", args.threads, args.repeat, Path(tmp), args.target)
            print(json.dumps(row), flush=True)
            report["models"].append(row)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "int8-models.json").write_text(json.dumps(report, indent=1, default=str))
    (args.out / "int8-models.md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
