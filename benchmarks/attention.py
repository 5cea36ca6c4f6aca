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
  ort       onnxruntime on the opset-23 model (its Attention kernel)

and reports medians, per-phase ranges, ratios, GFLOP/s (4 * H * S^2 * 64)
with their share of the FMA peak (benchmarks/gemm.py's FMA loop), and the
flash kernel's workspace (every buffer it allocates) beside the S x S
scores the stages write. ``--self-check`` adds the flash engine against
itself (the method's control, 1.00).

    python benchmarks/attention.py [--seqs 128,512,1500,4096] [--heads 6] [--threads 2] [--out attention-out]

With ``--models DIR --names a,b`` it times whole models instead: each
``DIR/NAME.onnx`` compiled at every ``--levels`` level and onnxruntime on
the same file, all in one rotation, checked against ``NAME.ref.npz``
(inputs from ``NAME.inputs.npz``), with each level's ratio to level 2 and
to onnxruntime.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
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
               Engine(ORT, paths["flash"][0], "ort")]
    if self_check:
        engines.append(Engine("braze", str(work / f"flash-{seq}.braze"), "flash#2"))
    timing = time_alone(engines, inputs, threads, phases=10, runs=max(1, -(-repeat // 10)), warmup=2, processes=2)
    flop = 4 * heads * seq * seq * HEAD
    ms = {e.label: timing.engines[e.label].median_ms for e in engines}
    out = {"seq": seq, "heads": heads, "flop": flop, "flash_params": params,
           "stage_kernels": len(paths["stages"][1].kernels), "ms": ms,
           "flash_vs_stages": timing.ratio("flash", "stages").to_dict(),
           "flash_vs_ort": timing.ratio("flash", "ort").to_dict(),
           "gflops": {k: flop / v / 1e6 for k, v in ms.items()},
           "flash_workspace_bytes": workspace_bytes(params, seq, heads, get_target(target, threads=threads)),
           "scores_bytes": heads * seq * seq * 4}
    if self_check:
        out["control"] = timing.ratio("flash", "flash#2").to_dict()
    return out


def model_row(onnx_path: Path, levels: list[int], threads: int, repeat: int, work: Path, self_check: bool,
              target: str = "cpu") -> dict:
    """One model at several levels and onnxruntime, one rotation."""
    from braze.compiler import compile as braze_compile
    from braze.measure import ORT, compare
    from braze.timing import Engine, time_alone

    name = onnx_path.stem
    inputs = dict(np.load(onnx_path.with_name(f"{name}.inputs.npz")))
    ref = dict(np.load(onnx_path.with_name(f"{name}.ref.npz")))
    engines, out = [], {"model": name, "levels": {}}
    for level in levels:
        artifact = braze_compile(str(onnx_path), target=target, level=level, threads=threads, cache_dir=None)
        worst = max(e.max_rel for e in compare(artifact.run(inputs), ref))
        path = work / f"{name}-l{level}.braze"
        artifact.save(str(path))
        out["levels"][level] = {"kernels": len(artifact.kernels), "max_rel": worst,
                                "flash_kernels": sum(k.get("schedule") == "flash" for k in artifact.kernels)}
        engines.append(Engine("braze", str(path), f"level{level}"))
        del artifact
    engines.append(Engine(ORT, str(onnx_path), "ort"))
    if self_check:
        engines.append(Engine(ORT, str(onnx_path), "ort#2"))
    timing = time_alone(engines, inputs, threads, phases=10, runs=max(1, -(-repeat // 10)), warmup=2, processes=2)
    for level in levels:
        entry = out["levels"][level]
        entry["ms"] = timing.engines[f"level{level}"].median_ms
        entry["vs_ort"] = timing.ratio(f"level{level}", "ort").to_dict()
        if 2 in levels:
            entry["vs_level2"] = timing.ratio(f"level{level}", "level2").to_dict()
    out["ort_ms"] = timing.engines["ort"].median_ms
    if self_check:
        out["control"] = timing.ratio("ort", "ort#2").to_dict()
    return out


def models_markdown(report: dict) -> str:
    host = report["host"]
    lines = [f"Models, {report['threads']} threads; {host['cpu']} ({host['llvm_cpu']}, {host['isa']}); "
             f"commit {report['commit']}", "",
             "| model | level | kernels (flash) | max rel err | braze ms | ort ms | / level 2 | / onnxruntime |",
             "|---|---|---|---|---|---|---|---|"]
    for r in report["models"]:
        for level, e in r["levels"].items():
            l2 = e.get("vs_level2")
            l2 = f"{l2['ratio']:.2f} ({l2['ratio_min']:.2f}-{l2['ratio_max']:.2f})" if l2 else "-"
            o = e["vs_ort"]
            lines.append(f"| {r['model']} | {level} | {e['kernels']} ({e['flash_kernels']}) | {e['max_rel']:.1e} "
                         f"| {e['ms']:.1f} | {r['ort_ms']:.1f} | {l2} | {o['ratio']:.2f} ({o['ratio_min']:.2f}-{o['ratio_max']:.2f}) |")
        if "control" in r:
            lines.append(f"| {r['model']} | control: onnxruntime / itself | | | | | | {r['control']['ratio']:.2f} |")
    return "\n".join(lines)


def fma_peak_gflops(threads: int, target: str = "cpu") -> float | None:
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        from gemm import fma_peak

        return fma_peak(target, threads)["gflops"]
    except Exception as e:  # noqa: BLE001 -- the peak is context, not the result
        print(f"FMA peak not measured: {e}", file=sys.stderr)
        return None


def markdown(report: dict) -> str:
    peak = report.get("fma_peak_gflops")
    host = report['host']
    lines = [f"Attention alone, {report['heads']} heads x {HEAD}, {report['threads']} threads, target "
             f"{report.get('target', 'cpu')}; {host['cpu']} ({host['llvm_cpu']}, {host['isa']})",
             f"commit {report['commit']}; FMA peak {peak:.0f} GFLOP/s" if peak else f"commit {report['commit']}", "",
             "| tokens | flash ms | stages ms | ort ms | flash / stages | flash / ort | flash GFLOP/s (% peak) "
             "| flash workspace | S x S scores |", "|---|---|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        g = r["gflops"]["flash"]
        share = f" ({100 * g / peak:.0f}%)" if peak else ""
        lines.append(f"| {r['seq']} | {r['ms']['flash']:.2f} | {r['ms']['stages']:.2f} | {r['ms']['ort']:.2f} "
                     f"| {r['flash_vs_stages']['ratio']:.2f} | {r['flash_vs_ort']['ratio']:.2f} | {g:.0f}{share} "
                     f"| {r['flash_workspace_bytes'] / 2**20:.1f} MiB | {r['scores_bytes'] / 2**20:.1f} MiB |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seqs", default="128,512,1500,4096", help="comma-separated sequence lengths")
    ap.add_argument("--heads", type=int, default=6, help="heads of 64 (default 6: Whisper-tiny's)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--target", default="cpu", help="braze's target (cpu, cpu-avx2, cpu-avx512; default cpu)")
    ap.add_argument("--repeat", type=int, default=30, help="timed calls per engine and length (default 30)")
    ap.add_argument("--self-check", action="store_true", help="add the flash engine against itself")
    ap.add_argument("--out", type=Path, default=Path("attention-out"), help="folder for attention.md/.json")
    ap.add_argument("--models", type=Path, help="a folder of NAME.onnx, NAME.inputs.npz, NAME.ref.npz")
    ap.add_argument("--names", help="the models of --models to time (comma-separated)")
    ap.add_argument("--levels", default="2,3", help="fusion levels for --models (default 2,3)")
    args = ap.parse_args()
    os.environ.setdefault("TVM_NUM_THREADS", str(args.threads))
    from braze.targets.detect import describe_host

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    report = {"host": describe_host(), "commit": commit, "threads": args.threads, "heads": args.heads,
              "target": args.target,
              "method": "each engine timed alone in its own worker processes (braze.timing.time_alone), "
                        "10 alternating phases, medians and per-phase ratio ranges",
              "rows": []}
    if args.models:
        report["models"] = []
        levels = [int(x) for x in args.levels.split(",")]
        for name in args.names.split(","):
            with tempfile.TemporaryDirectory() as tmp:
                report["models"].append(model_row(args.models / f"{name}.onnx", levels, args.threads, args.repeat,
                                                  Path(tmp), args.self_check, args.target))
            print(models_markdown(report).splitlines()[-1], flush=True)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "models.json").write_text(json.dumps(report, indent=1, default=str))
        (args.out / "models.md").write_text(models_markdown(report) + "\n")
        print(models_markdown(report))
        return 0
    report["fma_peak_gflops"] = fma_peak_gflops(args.threads, args.target)
    with tempfile.TemporaryDirectory() as tmp:
        for seq in (int(s) for s in args.seqs.split(",")):
            report["rows"].append(row(seq, args.heads, args.threads, args.repeat, Path(tmp), args.self_check,
                                      args.target))
            print(markdown(report).splitlines()[-1], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "attention.json").write_text(json.dumps(report, indent=1, default=str))
    (args.out / "attention.md").write_text(markdown(report) + "\n")
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
