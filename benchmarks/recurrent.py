"""Recurrences: LSTM and GRU models, braze against onnxruntime.

    python benchmarks/recurrent.py [--threads 2] [--repeat 40] [--out DIR]

Builds the models with onnx.helper (constant weights, as an exporter writes
them; no download): a speech-style 2-layer LSTM (80 features, hidden 256,
50 steps, batch 1, a linear head), a 1-layer GRU of the same size, and a
bidirectional LSTM of hidden 128. Compiles each at level 2, checks its
outputs against onnxruntime, and times braze, onnxruntime and onnxruntime
again (the control), each engine alone (braze.timing.time_alone). Writes
benchmarks/results/<cpu>-<isa>/recurrent.json (benchmarks/report.py renders
it) and prints its table.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def recurrent_model(kind: str, layers: int, features: int, hidden: int, steps: int, bidirectional: bool = False,
                    seed: int = 0) -> onnx.ModelProto:
    """``layers`` stacked recurrences over x [steps, 1, features], then a
    linear head of 32 outputs on every step."""
    rng = np.random.default_rng(seed)
    gates = {"GRU": 3, "LSTM": 4}[kind]
    dirs = 2 if bidirectional else 1
    nodes, inits, x, width = [], [], "x", features
    for layer in range(layers):
        scale = 1 / np.sqrt(hidden)
        for name, shape in ((f"W{layer}", (dirs, gates * hidden, width)), (f"R{layer}", (dirs, gates * hidden, hidden)),
                            (f"B{layer}", (dirs, 2 * gates * hidden))):
            inits.append(numpy_helper.from_array((rng.uniform(-scale, scale, shape)).astype(np.float32), name))
        attrs = {"direction": "bidirectional"} if bidirectional else {}
        nodes.append(helper.make_node(kind, [x, f"W{layer}", f"R{layer}", f"B{layer}"], [f"y{layer}"],
                                      hidden_size=hidden, **attrs))
        nodes.append(helper.make_node("Transpose", [f"y{layer}"], [f"t{layer}"], perm=[0, 2, 1, 3]))
        nodes.append(helper.make_node("Reshape", [f"t{layer}", "flat"], [f"h{layer}"]))
        x, width = f"h{layer}", dirs * hidden
    inits.append(numpy_helper.from_array(np.array([steps, 1, width], np.int64), "flat"))
    inits.append(numpy_helper.from_array(rng.standard_normal((width, 32)).astype(np.float32) * 0.1, "head"))
    nodes.append(helper.make_node("MatMul", [x, "head"], ["y"]))
    graph = helper.make_graph(nodes, f"{kind.lower()}{layers}", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [steps, 1, features])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [steps, 1, 32])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


MODELS = {
    "lstm-2x256-s50": lambda: recurrent_model("LSTM", 2, 80, 256, 50),
    "gru-1x256-s50": lambda: recurrent_model("GRU", 1, 80, 256, 50),
    "bilstm-1x128-s50": lambda: recurrent_model("LSTM", 1, 80, 128, 50, bidirectional=True),
}


def model_row(name: str, threads: int, repeat: int, work: Path) -> dict:
    import onnxruntime as ort

    from braze.compiler import compile as braze_compile
    from braze.measure import ORT
    from braze.timing import Engine, time_alone

    model = MODELS[name]()
    path = work / f"{name}.onnx"
    onnx.save(model, str(path))
    inputs = {"x": np.random.default_rng(1).standard_normal((50, 1, 80)).astype(np.float32)}
    artifact = braze_compile(str(path), level=2, threads=threads, cache_dir=None)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    want = ort.InferenceSession(str(path), options).run(None, inputs)[0]
    max_abs_diff = float(np.abs(artifact.run(inputs)["y"] - want).max())
    artifact.save(str(work / f"{name}.braze"))
    engines = [Engine("braze", str(work / f"{name}.braze"), "braze"), Engine(ORT, str(path), "onnxruntime"),
               Engine(ORT, str(path), "onnxruntime#2")]
    timing = time_alone(engines, inputs, threads, phases=10, runs=max(1, -(-repeat // 10)), warmup=2, processes=2)
    return {"name": name, "ms": {e.name: timing.engines[e.name].median_ms for e in engines},
            "ratios": {"braze / onnxruntime": timing.ratio("braze", "onnxruntime").to_dict()},
            "control": timing.ratio("onnxruntime", "onnxruntime#2").to_dict(),
            "kernels": len(artifact.kernels), "compile_seconds": artifact.manifest["compile_seconds"],
            "max_abs_diff": max_abs_diff}


def main() -> int:
    import report
    import results_io

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=40)
    ap.add_argument("--out", type=Path, help="folder for recurrent.json (default: benchmarks/results/<cpu>-<isa>/)")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            rows.append(model_row(name, args.threads, args.repeat, Path(tmp)))
            print(json.dumps(rows[-1]), flush=True)
    doc = results_io.result(
        "recurrent", "recurrent models (onnx.helper, batch 1, 50 steps): braze level 2 vs onnxruntime", rows,
        threads=args.threads, timing=results_io.time_alone(),
        control="onnxruntime against itself")
    print(f"wrote {results_io.write(doc, args.out)}\n\n" + "\n".join(report.table(doc)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
