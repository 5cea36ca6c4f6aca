"""The Python half of prepare.sh: CUDA artifacts, inputs, CPU references and
the folder's manifest.json (docs/targets.md, "Running on a GPU").

Each case is ``cases/NAME-lLEVEL/``: ``artifact/`` (manifest.json, lib.so),
``inputs/I.npy`` in the artifact's input order, ``ref/I.npy`` in its output
order. References are onnxruntime's float32 outputs on the CPU (the shipped
``NAME.ref.npz`` where onnxruntime is missing). A model whose cases would
take the folder past its size budget, or that braze fails to build, is left
out (the manifest says which and why).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "braze" / "data"
sys.path.insert(0, str(ROOT / "benchmarks"))
import results_io  # noqa: E402
SHARED_TINY = Path("/work/shared/models/tiny")  # optional: more tiny models, when present
CACHE_MODELS = ("mobilenetv2", "yolov8n")       # the full-size models taken from the model cache


def find_models(cache: Path, only: list[str] | None) -> list[Path]:
    """The cache's full-size models first (the figures that matter most),
    then the shipped tiny ones (and the shared tiny folder's, if present),
    smallest first: what the size budget leaves out is the last."""
    found: dict[str, Path] = {}
    for name in CACHE_MODELS:
        if (cache / f"{name}.onnx").is_file():
            found[name] = cache / f"{name}.onnx"
    tiny = [p for folder in (SHIPPED, SHARED_TINY) if folder.is_dir() for p in folder.glob("*.onnx")]
    for path in sorted(tiny, key=lambda p: p.stat().st_size):
        found.setdefault(path.stem, path)
    if only:
        missing = [n for n in only if n not in found]
        if missing:
            sys.exit(f"prepare: no model named {', '.join(missing)} (found: {', '.join(found)})")
        return [found[n] for n in only]
    return list(found.values())


def model_inputs(path: Path) -> dict[str, np.ndarray]:
    """NAME.inputs.npz beside the model, else seeded random inputs of the
    graph's shapes (dynamic dimensions as 1)."""
    npz = path.with_suffix(".inputs.npz")
    if npz.is_file():
        return dict(np.load(npz))
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    weights = {i.name for i in graph.initializer}
    rng, feeds = np.random.default_rng(0), {}
    for value in graph.input:
        if value.name in weights:
            continue
        t = value.type.tensor_type
        shape = [d.dim_value if d.dim_value > 0 else 1 for d in t.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
        feeds[value.name] = (rng.integers(0, 2, shape) if dtype.kind in "iub" else rng.random(shape)).astype(dtype)
    return feeds


def references(path: Path, feeds: dict) -> tuple[dict[str, np.ndarray], str]:
    """(outputs by name, where they came from)."""
    try:
        import onnxruntime as ort
    except ImportError:
        ref = path.with_suffix(".ref.npz")
        if not ref.is_file():
            sys.exit(f"prepare: {path.name}: no onnxruntime and no {ref.name} for the CPU reference")
        return dict(np.load(ref)), ref.name
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds))), f"onnxruntime {ort.__version__} (CPU)"


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def build_case(out: Path, path: Path, level: int, target, feeds: dict, refs: dict) -> dict:
    from braze.compiler import compile as braze_compile

    name = f"{path.stem}-l{level}"
    case = out / "cases" / name
    shutil.rmtree(case, ignore_errors=True)
    started = time.perf_counter()
    shapes = {k: tuple(v.shape) for k, v in feeds.items()}
    art = braze_compile(str(path), target=target, level=level, input_shapes=shapes)
    art.save(str(case / "artifact"))
    (case / "artifact" / "model.mlir").unlink(missing_ok=True)  # not needed to run; keeps the folder small
    manifest = json.loads((case / "artifact" / "manifest.json").read_text())
    for sub, specs, values in (("inputs", manifest["inputs"], feeds), ("ref", manifest["outputs"], refs)):
        (case / sub).mkdir(parents=True)
        for i, spec in enumerate(specs):
            np.save(case / sub / f"{i}.npy", np.ascontiguousarray(values[spec["name"]], dtype=spec["dtype"]))
    return {"case": name, "model": path.stem, "level": level, "kernels": len(manifest.get("kernels") or []),
            "inputs": [s["name"] for s in manifest["inputs"]], "outputs": [s["name"] for s in manifest["outputs"]],
            "compile_s": round(time.perf_counter() - started, 1), "bytes": folder_bytes(case)}


def self_check(case: Path, model: Path, folder: Path) -> None:
    """CASE's model built for this CPU in FOLDER, with CASE's inputs and references."""
    from braze.compiler import compile as braze_compile

    shutil.rmtree(folder, ignore_errors=True)
    manifest = json.loads((case / "artifact" / "manifest.json").read_text())
    shapes = {s["name"]: tuple(s["shape"]) for s in manifest["inputs"]}
    braze_compile(str(model), level=manifest["level"], input_shapes=shapes).save(str(folder / "artifact"))
    for sub in ("inputs", "ref"):
        shutil.copytree(case / sub, folder / sub)


def tool_version(cmd: list[str], pattern: str) -> str | None:
    try:
        text = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(pattern, text)
    return m.group(1) if m else None


def versions() -> dict:
    """The results files' versions (benchmarks/results_io.py), with nvcc's."""
    from braze.codegen.gpu import nvcc_path

    found = results_io.versions()
    found["nvcc"] = tool_version([nvcc_path() or "nvcc", "--version"], r"release ([0-9.]+)")
    return found


def write_manifest(out: Path, cases: list[dict], left_out: list[dict], target: str, cudart: str | None) -> dict:
    """manifest.json: what is in the folder and what built it. ``cudart`` is
    the CUDA runtime's version (major.minor): from its file name, else nvcc's
    (the toolkit that ships it)."""
    from braze.targets.detect import describe_host

    found = versions()
    m = re.search(r"\.so\.(\d+\.\d+)", cudart or "")
    found["cudart"] = m.group(1) if m else found["nvcc"]
    files = []
    for p in sorted(out.rglob("*")):
        if p.is_file() and p != out / "manifest.json":
            files.append({"path": str(p.relative_to(out)), "bytes": p.stat().st_size,
                          "sha256": hashlib.sha256(p.read_bytes()).hexdigest()[:16]})
    doc = {"format": "braze-gpu-check/1", "what": "CUDA artifacts, inputs and CPU references for "
           "benchmarks/gpu_check/run.sh (docs/targets.md, 'Running on a GPU')",
           "target": target, "commit": results_io.commit(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
               timespec="seconds"), "prepared_on": describe_host(), "versions": found,
           "cases": cases, "left_out": left_out, "files": files,
           "bytes": sum(f["bytes"] for f in files)}
    (out / "manifest.json").write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--models", type=Path, default=Path.home() / ".cache" / "braze-models")
    p.add_argument("--levels", default="2,3")
    p.add_argument("--target", default="cuda-sm90")
    p.add_argument("--only", help="model names, comma-separated (default: every model found)")
    p.add_argument("--budget", type=int, default=60 << 20, help="bytes the whole folder may take")
    p.add_argument("--cudart", help="the file name of the CUDA runtime shipped in lib/ (libcudart.so.13.0.96)")
    p.add_argument("--selfcheck", type=Path, help="also build the smallest case's model for this CPU here, "
                   "with the case's inputs and references (prepare.sh runs it from the folder)")
    args = p.parse_args()

    from braze.targets import get_target

    target = get_target(args.target)  # its host code is for the architecture's baseline CPU
    levels = [int(x) for x in args.levels.split(",")]
    models = find_models(args.models.expanduser(), args.only.split(",") if args.only else None)
    print(f"prepare: {len(models)} model(s) x levels {levels} for {args.target}: "
          + ", ".join(m.stem for m in models), flush=True)
    cases, left_out, sources = [], [], {}
    for path in models:
        feeds = model_inputs(path)
        refs, source = references(path, feeds)
        # All levels of a model or none (level 3 is measured against level 2);
        # each lib.so holds the weights and the kernels.
        used = folder_bytes(args.out)
        if used + len(levels) * 1.25 * path.stat().st_size > args.budget:
            left_out.append({"case": path.stem, "why": f"would pass the size budget ({used >> 20} MiB used of "
                             f"{args.budget >> 20} MiB; choose the models with --only)"})
            print(f"prepare: left out {path.stem}: size budget", flush=True)
            continue
        for level in levels:
            try:
                case = build_case(args.out, path, level, target, feeds, refs)
            except Exception as e:  # noqa: BLE001 -- one model braze cannot build must not stop the rest
                shutil.rmtree(args.out / "cases" / f"{path.stem}-l{level}", ignore_errors=True)
                why = (str(e).strip().splitlines() or [type(e).__name__])[-1][:300]
                left_out.append({"case": f"{path.stem}-l{level}", "why": f"{type(e).__name__}: {why}"})
                print(f"prepare: left out {path.stem} level {level}: {type(e).__name__}: {why}", flush=True)
                continue
            case["reference"] = source
            if folder_bytes(args.out) > args.budget:
                shutil.rmtree(args.out / "cases" / case["case"])
                left_out.append({"case": case["case"], "why": "passed the size budget"})
                continue
            cases.append(case)
            sources[case["case"]] = path
            print(f"prepare: {case['case']}: {case['kernels']} kernels, {case['compile_s']} s, "
                  f"{case['bytes'] / 2**20:.1f} MiB", flush=True)
    for name in CACHE_MODELS:
        if not args.only and all(c["model"] != name for c in cases) and \
                all(x["case"] != name and not x["case"].startswith(name + "-") for x in left_out):
            left_out.append({"case": name, "why": f"not in the model cache {args.models}"})
    if args.selfcheck and cases:
        smallest = min(cases, key=lambda c: c["bytes"])["case"]
        self_check(args.out / "cases" / smallest, sources[smallest], args.selfcheck)
    doc = write_manifest(args.out, cases, left_out, args.target, args.cudart)
    print(f"prepare: {len(cases)} case(s), {doc['bytes'] / 2**20:.1f} MiB in {args.out}", flush=True)


if __name__ == "__main__":
    main()
