"""braze at two checkouts, A and B, on the same models: does a change move speed?

    python benchmarks/ab.py --base /tmp/base [DIR] --models bert-base,resnet50 --level 2 --threads 2

``--base`` is another checkout of braze (e.g. ``git worktree add /tmp/base
COMMIT``); B is this checkout. Each model (DIR, default
~/.cache/braze-models, holds NAME.onnx and NAME.inputs.npz) is compiled by
each checkout in a process of its own, then four engines are timed, each
alone (braze.timing.time_alone): braze A, braze B, onnxruntime and a second
onnxruntime worker (the control, which must read 1.00). The artifacts run on
this checkout's runtime: their kernels are what differs.

Writes benchmarks/results/<cpu>-<isa>/ab.json (``--out DIR`` elsewhere):
per model the ratios B / A, A / onnxruntime and B / onnxruntime.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import results_io  # noqa: E402

COMPILE = """
import sys
from braze.compiler import compile as braze_compile
onnx, out, level, threads = sys.argv[1:]
braze_compile(onnx, level=int(level), threads=int(threads)).save(out)
"""


def build(tree: Path, onnx: Path, out: Path, level: int, threads: int) -> None:
    """Compile ``onnx`` with the braze of checkout ``tree`` (its own process and compile cache)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "BRAZE_CACHE_DIR": str(out.parent / f"cache-{tree.name}")}
    done = subprocess.run([sys.executable, "-c", COMPILE, str(onnx), str(out), str(level), str(threads)],
                          env=env, cwd=tree, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: compiling {onnx.name} failed:\n{done.stderr[-2000:]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path, nargs="?", default=Path.home() / ".cache" / "braze-models")
    ap.add_argument("--base", type=Path, required=True, help="the other checkout of braze (A)")
    ap.add_argument("--models", required=True, help="comma-separated model names in the folder")
    ap.add_argument("--base-label", help="what to call A (default: its git commit)")
    ap.add_argument("--level", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--phases", type=int, default=10)
    ap.add_argument("--out", type=Path, help="results folder (default: this host's under benchmarks/results)")
    args = ap.parse_args()

    from braze.timing import Engine, time_alone

    here = Path(__file__).resolve().parent.parent
    base_commit = args.base_label or subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=args.base,
                                                    capture_output=True, text=True).stdout.strip() or str(args.base)
    labels = (f"braze {base_commit}", "braze")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            onnx = args.folder / f"{name}.onnx"
            inputs = dict(np.load(args.folder / f"{name}.inputs.npz"))
            paths = []
            for tree, tag in ((args.base.resolve(), "a"), (here, "b")):
                paths.append(Path(tmp) / tag / f"{name}.braze")
                paths[-1].parent.mkdir(exist_ok=True)
                build(tree, onnx, paths[-1], args.level, args.threads)
            engines = [Engine("braze", str(paths[0]), "a"), Engine("braze", str(paths[1]), "b"),
                       Engine("onnxruntime", str(onnx), "ort"), Engine("onnxruntime", str(onnx), "ort#2")]
            timing = time_alone(engines, inputs, args.threads, phases=args.phases)

            def ratio(x, y):
                r = timing.ratio(x, y)
                return results_io.ratio(round(r.value, 3), round(r.low, 3), round(r.high, 3))

            row = {"name": name, "level": args.level,
                   "ratios": {f"{labels[1]} / {labels[0]}": ratio("b", "a"),
                              f"{labels[0]} / onnxruntime": ratio("a", "ort"),
                              f"{labels[1]} / onnxruntime": ratio("b", "ort")},
                   "control": ratio("ort", "ort#2"),
                   "ms": {labels[0]: timing.engines["a"].median_ms, labels[1]: timing.engines["b"].median_ms,
                          "onnxruntime": timing.engines["ort"].median_ms}}
            rows.append(row)
            print(name, {k: v["ratio"] for k, v in row["ratios"].items()}, "control", row["control"]["ratio"],
                  flush=True)
            doc = results_io.result("ab", f"braze at {base_commit} (A) against this checkout (B) and onnxruntime",
                                    rows, threads=args.threads, timing=results_io.time_alone(args.phases, 3),
                                    control="onnxruntime against a second onnxruntime worker", base=base_commit)
            results_io.write(doc, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
