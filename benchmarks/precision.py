"""Precision modes against float32: accuracy, kernels, weight bytes, latency.

    python benchmarks/precision.py MODEL.onnx [MODEL.onnx ...] [--modes allow_mix_precision,allow_mix_precision_bf16]
                                   [--samples 100] [--threads 2] [--repeat 10] [--phases 5] [--out DIR]
                                   [--target cpu-avx2]

For each model and mode, beside the float32 compile of the same model:

- **error**: the worst output error against float32 onnxruntime (relative to
  max(1, |output|max), as ``braze verify``) over ``--samples`` random inputs,
  and, for outputs whose last axis holds scores, top-1 agreement;
- **kernels**: the mode's kernel count and float32's;
- **weights**: the bytes of the artifact's lib.so (weights and code) over
  float32's;
- **latency**: the mode's artifact and the float32 one run the same inputs in
  one process, one after the other in alternating phases (both braze, one
  thread pool, so neither runs while the other does); the ratio is the
  median of the mode's times over the median of float32's, with the lowest
  and highest per-phase ratio as the spread. A control row times the float32
  artifact against a second load of itself (1.00 within the noise);
- **onnxruntime's own float16 build** (its converter, inputs and outputs kept
  float32), on the same random inputs: what float16 costs the model anyway.

``--target`` builds both for a named CPU target (default ``cpu``, the host):
``cpu-avx2`` on an AVX-512 host measures a host without native 16-bit
arithmetic (no AVX512-BF16, no AMX: every 16-bit kernel computes in float32),
as benchmarks/performance.py measures the other ISA.

Writes benchmarks/results/<cpu>-<isa>/precision.json (``-TARGET`` added for
a target other than ``cpu``; ``--out DIR`` elsewhere) and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import braze  # noqa: E402
from braze.tools.precision import top1_agreement  # noqa: E402
from gears import _fmt, _phase_times, _ratio  # noqa: E402


def _lib_bytes(artifact, folder: str) -> int:
    return os.path.getsize(os.path.join(artifact.save(folder), "lib.so"))


def onnxruntime_fp16(model: str, samples: int) -> dict | None:
    """onnxruntime's own float16 build of the model (its converter, inputs and
    outputs kept float32) on the same random inputs: the yardstick for what
    float16 costs this model. None when the converter is not installed."""
    try:
        import numpy as np
        import onnx
        import onnxruntime as ort
        from onnxruntime.transformers.float16 import convert_float_to_float16
    except ImportError:
        return None
    from braze.measure import compare, random_inputs, run_onnxruntime

    proto = convert_float_to_float16(onnx.load(model), keep_io_types=True)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    specs = braze.compile(model).inputs
    names = [o.name for o in sess.get_outputs()]
    worst, agree = 0.0, {}
    for seed in range(1, samples + 1):
        inputs = random_inputs(specs, seed)
        ref = run_onnxruntime(model, inputs)
        got = dict(zip(names, sess.run(names, inputs)))
        worst = max(worst, max(e.max_rel for e in compare(got, ref)))
        for name, expected in ref.items():
            if expected.ndim == 2 and expected.shape[-1] > 1:
                agree[name] = agree.get(name, 0) + int((np.argmax(got[name], -1) == np.argmax(expected, -1)).all())
    return {"worst_error": worst, "top1": {k: v / samples for k, v in agree.items()}}


def measure(model: str, modes: list[str], samples: int, threads: int, repeat: int, phases: int,
            target: str = "cpu") -> tuple[list[dict], dict | None]:
    """A row per mode, and onnxruntime's own float16 build's figures."""
    from braze.measure import random_inputs

    name = os.path.splitext(os.path.basename(model))[0]
    tmp = tempfile.mkdtemp(prefix="braze-precision-")
    plain = braze.compile(model, threads=threads, target=target)
    plain_bytes = _lib_bytes(plain, os.path.join(tmp, "f32"))
    inputs = random_inputs(plain.inputs)
    rows = []
    for mode in modes:
        artifact = braze.compile(model, threads=threads, precision_mode=mode, target=target)
        agreement = top1_agreement(artifact, model, artifact.inputs, samples)
        ratio, low, high = _phase_times(artifact, plain, inputs, repeat, phases)
        rows.append({"name": name, "mode": mode, "ratios": {"mode / float32": _ratio(ratio, low, high)},
                     "dtype": artifact.manifest["precision"]["dtype"], "worst_error": agreement.worst_error,
                     "top1": {k: v / samples for k, v in agreement.agree.items()},
                     "kernels": len(artifact.kernels), "f32_kernels": len(plain.kernels),
                     "bytes_ratio": round(_lib_bytes(artifact, os.path.join(tmp, mode)) / plain_bytes, 3),
                     "f32_lib_bytes": plain_bytes})
        print(json.dumps(rows[-1]), flush=True)
    control = _ratio(*_phase_times(plain, braze.compile(model, threads=threads, target=target), inputs, repeat, phases))
    for row in rows:
        row["control"] = control
    return rows, onnxruntime_fp16(model, samples)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="+")
    p.add_argument("--modes", default="allow_mix_precision,allow_mix_precision_bf16")
    p.add_argument("--samples", type=int, default=100)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--phases", type=int, default=5)
    p.add_argument("--out", help="folder for the results file (default: benchmarks/results/<cpu>-<isa>/)")
    p.add_argument("--target", default="cpu", help="a named CPU target both builds are for (default: the host)")
    args = p.parse_args(argv)
    import results_io

    rows, fp16 = [], {}
    for model in args.models:
        found, fp16[os.path.splitext(os.path.basename(model))[0]] = measure(
            model, args.modes.split(","), args.samples, args.threads, args.repeat, args.phases, args.target)
        rows += found
    doc = results_io.result(
        "precision", f"precision modes against the float32 build: error over {args.samples} random inputs, kernels, "
        "lib.so bytes, latency", rows, threads=args.threads, target=args.target,
        timing=f"both artifacts in one process, {args.phases} alternating phases of {args.repeat} calls each; "
               "the ratio of the medians, and the range of the per-phase ratios",
        control="the float32 artifact against a second compile of itself", samples=args.samples,
        onnxruntime_fp16=fp16)
    lines = ["| model | mode | worst error (vs float32 onnxruntime) | top-1 agreement | kernels (f32) "
             "| lib.so / f32 | latency / f32 (spread) |", "|---|---|---|---|---|---|---|"]
    for row in rows:
        top1 = ", ".join(f"{100 * v:.0f}%" for v in row["top1"].values()) or "-"
        lines.append(f"| {row['name']} | {row['mode']} | {row['worst_error']:.2e} | {top1} | "
                     f"{row['kernels']} ({row['f32_kernels']}) | {row['bytes_ratio']:.2f} | "
                     f"{_fmt(row['ratios']['mode / float32'])} |")
    for name, ort16 in fp16.items():
        if ort16:
            top1 = ", ".join(f"{100 * v:.0f}%" for v in ort16["top1"].values()) or "-"
            lines.append(f"| {name} | onnxruntime's own float16 build | {ort16['worst_error']:.2e} | {top1} | | | |")
        control = next(r["control"] for r in rows if r["name"] == name)
        lines.append(f"| {name} | control (f32 / f32) | | | | | {_fmt(control)} |")
    print(f"wrote {results_io.write(doc, args.out)}\n\n" + "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
