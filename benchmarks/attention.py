"""Attention alone: braze's flash kernel against the same attention as
separate kernels, and against onnxruntime's own Attention kernel.

For each sequence length, three engines on the same q, k, v (``[1, S, H * 64]``)
and threads, each timed alone in its own worker processes (braze.timing, as
`braze bench`), in one rotation:

  flash     an opset-23 ``Attention`` node, compiled by braze (one kernel,
            the ``flash`` schedule)
  stages    the same attention as opset-17 exports write it (Reshape,
            Transpose, MatMul, scale, Softmax, MatMul, Transpose, Reshape),
            compiled at level 2: the scores go through memory between kernels
  onnxruntime  onnxruntime on the opset-23 model (its Attention kernel)

and reports medians, per-phase ranges, ratios, GFLOP/s (4 * H * S^2 * 64)
with their share of the FMA peak (benchmarks/gemm.py's FMA loop), and the
flash kernel's workspace (every buffer it allocates) beside the S x S
scores the stages write. ``--self-check`` adds the flash engine against
itself (the method's control, 1.00).

    python benchmarks/attention.py [--seqs 128,512,1500,4096] [--heads 6] [--threads 2] [--target cpu]

With ``--models DIR --names a,b`` it times whole models instead: each
``DIR/NAME.onnx`` compiled at every ``--levels`` level and onnxruntime on
the same file, all in one rotation per model, checked against
``NAME.ref.npz`` (inputs from ``NAME.inputs.npz``), with each level's ratio
to level 2 and to onnxruntime (``--self-check``: onnxruntime against itself).

Writes benchmarks/results/<cpu>-<isa>/attention-kernel.json, or
attention-models.json with ``--models`` (``-TARGET`` added for a target
other than ``cpu``; ``--out DIR`` elsewhere), and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

HEAD = 64


def models(seq: int, heads: int):
    """(flash model, stages model) for one sequence length."""
    from onnx import TensorProto, helper, numpy_helper

    hidden = heads * HEAD
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, seq, hidden]) for n in "qkv"]
    out = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], q_num_heads=heads, kv_num_heads=heads)
    flash = helper.make_model(helper.make_graph([node], "flash", ins, out),
                              opset_imports=[helper.make_opsetid("", 23)])
    consts = {"split": np.array([1, seq, heads, HEAD], np.int64), "merge": np.array([1, seq, hidden], np.int64),
              "scale": np.array(HEAD ** -0.5, np.float32)}
    nodes = [helper.make_node("Reshape", [n, "split"], [f"{n}4"]) for n in "qkv"]
    nodes += [helper.make_node("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
              helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
              helper.make_node("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
              helper.make_node("MatMul", ["qh", "kt"], ["s"]),
              helper.make_node("Mul", ["s", "scale"], ["ss"]),
              helper.make_node("Softmax", ["ss"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "vh"], ["o"]),
              helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["ot", "merge"], ["y"])]
    graph = helper.make_graph(nodes, "stages", ins, out, [numpy_helper.from_array(v, k) for k, v in consts.items()])
    stages = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return flash, stages


def workspace_bytes(artifact_kernel_params: dict, seq: int, heads: int, target) -> int:
    """Bytes the flash kernel allocates (K^T, V, per-task state and tiles)."""
    from braze.codegen.kernel import partition
    from braze.codegen.schedules import flash
    from braze.frontend import import_onnx

    module = import_onnx(models(seq, heads)[0])
    funcs = module.funcs
    kernel = partition(next(iter(funcs.values())) if isinstance(funcs, dict) else funcs[0])[0]
    script = flash.primfunc(kernel.ops[0], kernel, target, artifact_kernel_params).script()
    shapes = re.findall(r"alloc_buffer\(\(([\d, ]+)\)", script)
    return sum(4 * int(np.prod([int(d) for d in s.split(",") if d.strip()])) for s in shapes)


def row(seq: int, heads: int, threads: int, repeat: int, work: Path, self_check: bool, target: str = "cpu") -> dict:
    import onnx

    from braze.compiler import compile as braze_compile
    from braze.measure import ORT, compare, run_onnxruntime
    from braze.targets import get_target
    from braze.timing import Engine, time_alone

    flash_model, stages_model = models(seq, heads)
    rng = np.random.default_rng(0)
    inputs = {n: rng.standard_normal((1, seq, heads * HEAD)).astype(np.float32) for n in "qkv"}
    paths = {}
    for name, model in (("flash", flash_model), ("stages", stages_model)):
        onnx_path = work / f"{name}-{seq}.onnx"
        onnx.save(model, onnx_path)
        artifact = braze_compile(str(onnx_path), target=target, level=2, threads=threads, cache_dir=None)
        worst = max(e.max_rel for e in compare(artifact.run(inputs), run_onnxruntime(model, inputs, threads)))
        assert worst <= 1e-4, f"{name} at {seq} tokens: max rel err {worst}"
        artifact.save(str(work / f"{name}-{seq}.braze"))
        paths[name] = (str(onnx_path), artifact)
    (kernel,) = paths["flash"][1].kernels
    params = next(iter(kernel["schedule_params"].values()))
    engines = [Engine("braze", str(work / f"flash-{seq}.braze"), "flash"),
               Engine("braze", str(work / f"stages-{seq}.braze"), "stages"),
               Engine(ORT, paths["flash"][0], "onnxruntime")]
    if self_check:
        engines.append(Engine("braze", str(work / f"flash-{seq}.braze"), "flash#2"))
    timing = time_alone(engines, inputs, threads, phases=10, runs=max(1, -(-repeat // 10)), warmup=2, processes=2)
    flop = 4 * heads * seq * seq * HEAD
    ms = {e.label: timing.engines[e.label].median_ms for e in engines}
    return {"name": f"{seq} tokens", "seq": seq, "heads": heads, "flop": flop, "ms": ms,
            "ratios": {"flash / stages": timing.ratio("flash", "stages").to_dict(),
                       "flash / onnxruntime": timing.ratio("flash", "onnxruntime").to_dict()},
            "control": timing.ratio("flash", "flash#2").to_dict() if self_check else None,
            "gflops": {k: flop / v / 1e6 for k, v in ms.items()}, "flash_params": params,
            "stage_kernels": len(paths["stages"][1].kernels),
            "flash_workspace_bytes": workspace_bytes(params, seq, heads, get_target(target, threads=threads)),
            "scores_bytes": heads * seq * seq * 4}


def model_row(onnx_path: Path, levels: list[int], threads: int, repeat: int, work: Path, self_check: bool,
              target: str = "cpu") -> list[dict]:
    """One model at several levels and onnxruntime, one rotation: a row per level."""
    from braze.compiler import compile as braze_compile
    from braze.measure import ORT, compare
    from braze.timing import Engine, time_alone

    name = onnx_path.stem
    inputs = dict(np.load(onnx_path.with_name(f"{name}.inputs.npz")))
    ref = dict(np.load(onnx_path.with_name(f"{name}.ref.npz")))
    engines, rows = [], []
    for level in levels:
        artifact = braze_compile(str(onnx_path), target=target, level=level, threads=threads, cache_dir=None)
        worst = max(e.max_rel for e in compare(artifact.run(inputs), ref))
        path = work / f"{name}-l{level}.braze"
        artifact.save(str(path))
        rows.append({"name": name, "level": level, "kernels": len(artifact.kernels), "max_rel": worst,
                     "flash_kernels": sum(k.get("schedule") == "flash" for k in artifact.kernels)})
        engines.append(Engine("braze", str(path), f"level{level}"))
        del artifact
    engines.append(Engine(ORT, str(onnx_path), "onnxruntime"))
    if self_check:
        engines.append(Engine(ORT, str(onnx_path), "onnxruntime#2"))
    timing = time_alone(engines, inputs, threads, phases=10, runs=max(1, -(-repeat // 10)), warmup=2, processes=2)
    control = timing.ratio("onnxruntime", "onnxruntime#2").to_dict() if self_check else None
    for row in rows:
        engine = f"level{row['level']}"
        row["ms"] = {"braze": timing.engines[engine].median_ms, "onnxruntime": timing.engines["onnxruntime"].median_ms}
        row["ratios"] = {"braze / onnxruntime": timing.ratio(engine, "onnxruntime").to_dict()}
        if 2 in levels:
            row["ratios"]["braze / level 2"] = timing.ratio(engine, "level2").to_dict()
        row["control"] = control
    return rows


def fma_peak_gflops(threads: int, target: str = "cpu") -> float | None:
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        from gemm import fma_peak

        return fma_peak(target, threads)["gflops"]
    except Exception as e:  # noqa: BLE001 -- the peak is context, not the result
        print(f"FMA peak not measured: {e}", file=sys.stderr)
        return None


def markdown(doc: dict) -> str:
    """The kernel table, with milliseconds, GFLOP/s and workspace beside the ratios."""
    peak = doc.get("fma_peak_gflops")
    lines = ["| tokens | flash ms | stages ms | onnxruntime ms | flash / stages | flash / onnxruntime "
             "| flash GFLOP/s (% FMA peak) | flash workspace | S x S scores |", "|---|---|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        g = r["gflops"]["flash"]
        share = f" ({100 * g / peak:.0f}%)" if peak else ""
        lines.append(f"| {r['seq']} | {r['ms']['flash']:.2f} | {r['ms']['stages']:.2f} | {r['ms']['onnxruntime']:.2f} "
                     f"| {r['ratios']['flash / stages']['ratio']:.2f} | {r['ratios']['flash / onnxruntime']['ratio']:.2f} "
                     f"| {g:.0f}{share} | {r['flash_workspace_bytes'] / 2**20:.1f} MiB | {r['scores_bytes'] / 2**20:.1f} MiB |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seqs", default="128,512,1500,4096", help="comma-separated sequence lengths")
    ap.add_argument("--heads", type=int, default=6, help="heads of 64 (default 6: Whisper-tiny's)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--target", default="cpu", help="braze's target (cpu, cpu-avx2, cpu-avx512; default cpu)")
    ap.add_argument("--repeat", type=int, default=30, help="timed calls per engine and length (default 30)")
    ap.add_argument("--self-check", action="store_true", help="add an engine against itself (the control)")
    ap.add_argument("--out", type=Path, help="folder for the results file (default: benchmarks/results/<cpu>-<isa>/)")
    ap.add_argument("--models", type=Path, help="a folder of NAME.onnx, NAME.inputs.npz, NAME.ref.npz")
    ap.add_argument("--names", help="the models of --models to time (comma-separated)")
    ap.add_argument("--levels", default="2,3", help="fusion levels for --models (default 2,3)")
    args = ap.parse_args()
    os.environ.setdefault("TVM_NUM_THREADS", str(args.threads))
    import report
    import results_io

    rows = []
    if args.models:
        levels = [int(x) for x in args.levels.split(",")]
        for name in args.names.split(","):
            with tempfile.TemporaryDirectory() as tmp:
                rows += model_row(args.models / f"{name}.onnx", levels, args.threads, args.repeat, Path(tmp),
                                  args.self_check, args.target)
            print(json.dumps(rows[-1]), flush=True)
        doc = results_io.result(
            "attention-models", f"whole models at fusion levels {args.levels} and onnxruntime, one rotation per model",
            rows, threads=args.threads, target=args.target, timing=results_io.time_alone(),
            control="onnxruntime against itself" if args.self_check else None, heads=args.heads)
        print(f"wrote {results_io.write(doc, args.out)}\n\n" + "\n".join(report.table(doc)))
        return 0
    peak = fma_peak_gflops(args.threads, args.target)
    with tempfile.TemporaryDirectory() as tmp:
        for seq in (int(s) for s in args.seqs.split(",")):
            rows.append(row(seq, args.heads, args.threads, args.repeat, Path(tmp), args.self_check, args.target))
            print(json.dumps(rows[-1]), flush=True)
    doc = results_io.result(
        "attention-kernel", f"attention alone ({args.heads} heads x {HEAD}): the flash kernel against the same "
        "attention as separate kernels at level 2 (stages) and onnxruntime's Attention", rows,
        threads=args.threads, target=args.target, timing=results_io.time_alone(),
        control="the flash kernel against a second worker of the same build (flash#2)" if args.self_check else None,
        heads=args.heads, fma_peak_gflops=peak)
    print(f"wrote {results_io.write(doc, args.out)}\n\n" + markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
