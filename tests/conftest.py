import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "support"))  # the shared helpers: models, golden_runner, ...

import os
import shutil
import subprocess
import tempfile

import pytest

# Compile each model once per test run: identical compiles reuse the cached build.
os.environ.setdefault("BRAZE_CACHE_DIR", tempfile.mkdtemp(prefix="braze-test-cache-"))
# Any disagreement between braze's and onnx's shape inference fails the import.
os.environ.setdefault("BRAZE_STRICT_SHAPES", "1")


# --- braze-run, the C++ runner: one build per test session, for every module that runs it ---------
ROOT = Path(__file__).parent.parent


def _cxx_compiler() -> str | None:
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return name
    return None


def _step(cmd: list) -> None:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd))} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


@pytest.fixture(scope="session")
def braze_run(tmp_path_factory) -> Path:
    """The braze-run binary, configured against this Python's TVM and built once."""
    if shutil.which("cmake") is None or _cxx_compiler() is None:
        pytest.skip("building braze-run needs cmake and a C++17 compiler on PATH (neither is a pip package)")
    build = tmp_path_factory.mktemp("cpp-build")
    _step(["cmake", "-S", ROOT, "-B", build, f"-DPython_EXECUTABLE={sys.executable}",
           "-DCMAKE_BUILD_TYPE=Release"])
    _step(["cmake", "--build", build, "--parallel", str(os.cpu_count() or 2)])
    return build / "braze-run"
