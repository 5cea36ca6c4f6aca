"""benchmarks/gpu_check: prepare.sh builds the folder a GPU machine runs (here with
the smallest shipped model at one level, to stay cheap), and run.sh, on a machine
without a GPU, stops at once saying so."""

import ctypes
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SCRIPTS = ROOT / "benchmarks" / "gpu_check"
LIMIT = 64 << 20  # what a device run can carry


def _has_driver() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    if shutil.which("cmake") is None or not any(shutil.which(c) for c in (os.environ.get("CXX"), "c++", "g++", "clang++") if c):
        pytest.skip("building braze-run needs cmake and a C++17 compiler on PATH (neither is a pip package)")
    from braze.codegen.gpu import nvcc_path

    if nvcc_path() is None:
        pytest.skip("building CUDA artifacts needs nvcc (the CUDA toolkit), not a pip package")
    tmp = tmp_path_factory.mktemp("gpu-check")
    env = {**os.environ, "PYTHON": sys.executable, "BRAZE_GPU_CHECK_BUILD": str(tmp / "build")}
    done = subprocess.run(["bash", SCRIPTS / "prepare.sh", "--out", tmp / "gpu_check", "--only", "cnn-dynamic",
                           "--levels", "2", "--models", tmp / "no-cache"],
                          capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "self-check on the CPU" in done.stdout, done.stdout  # the folder's own binaries ran a model
    return tmp / "gpu_check"


def test_prepare_writes_a_folder_with_its_manifest(folder):
    manifest = json.loads((folder / "manifest.json").read_text())
    assert [c["case"] for c in manifest["cases"]] == ["cnn-dynamic-l2"]
    assert manifest["target"] == "cuda-sm90" and manifest["versions"]["cudart"]
    listed = {f["path"] for f in manifest["files"]}
    on_disk = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()} - {"manifest.json"}
    assert listed == on_disk
    for path in ("run.sh", "bin/braze-run", "bin/braze-gpu-check", "lib/libtvm_runtime.so", "lib/libtvm_ffi.so",
                 "lib/libtvm_runtime_cuda.so", "cases/cnn-dynamic-l2/artifact/lib.so",
                 "cases/cnn-dynamic-l2/inputs/0.npy", "cases/cnn-dynamic-l2/ref/0.npy"):
        assert (folder / path).is_file(), path
    case = json.loads((folder / "cases/cnn-dynamic-l2/artifact/manifest.json").read_text())
    assert case["target"]["kind"] == "cuda" and case["requires"]["features"] == []  # host code for any x86-64
    assert sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) < LIMIT


@pytest.mark.skipif(_has_driver(), reason="this machine has a CUDA driver: run.sh would run the check")
def test_run_stops_at_once_without_a_gpu(folder, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    started = time.monotonic()
    done = subprocess.run(["bash", folder / "run.sh", "--out", tmp_path / "results"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert time.monotonic() - started < 10
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stderr.startswith("run.sh: no CUDA device"), done.stderr
    assert not (tmp_path / "results").exists()
