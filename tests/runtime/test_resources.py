"""Resource safety: repeated compiles and loads in one process keep memory
bounded; a compile killed or interrupted mid-way leaves no artifact."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from models import tiny

TESTS = Path(__file__).parents[1]

# An MLP with 2 MB of weights: a compile that kept its weights alive would
# grow by that much each time.
MLP = textwrap.dedent("""
    import gc, json, os, sys
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    from braze.compiler import compile as braze_compile
    from braze.runtime import load

    def rss_mb():
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS")) / 1024

    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((512, 512)).astype(np.float32), n) for n in ("w1", "w2")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("MatMul", ["b", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 512])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 512])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.standard_normal((2, 512)).astype(np.float32)
""")


def run_script(body: str, *args, timeout=300) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "BRAZE_CACHE_DIR"}  # every compile builds
    r = subprocess.run([sys.executable, "-c", MLP + textwrap.dedent(body), *map(str, args)], env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_repeated_compiles_keep_memory_bounded():
    rss = run_script("""
        sizes = []
        for i in range(15):
            artifact = braze_compile(model, level=i % 3)
            artifact.run({"x": x})
            sizes.append(rss_mb())
        print(json.dumps(sizes))
    """)
    # after the warm-up (TVM's first build loads its passes and LLVM), 12 more
    # compiles: a leak of the weights alone would add 24 MB
    assert rss[-1] - rss[2] < 10, f"RSS grew {rss[-1] - rss[2]:.1f} MB over 12 compiles: {rss}"


def test_reloading_an_artifact_keeps_memory_bounded(tmp_path):
    rss = run_script("""
        path = sys.argv[1]
        braze_compile(model, level=2).save(path)
        sizes = []
        for i in range(25):
            artifact = load(path)
            artifact.run({"x": x})
            sizes.append(rss_mb())
        print(json.dumps(sizes))
    """, tmp_path / "m.braze")
    # TVM never frees a loaded library; braze loads each artifact's once per process
    assert rss[-1] - rss[2] < 10, f"RSS grew {rss[-1] - rss[2]:.1f} MB over 22 loads: {rss}"


# --- interrupted compiles -------------------------------------------------------------------------
def start_compile(out: Path) -> subprocess.Popen:
    """``braze compile`` of a model whose build takes seconds, without the cache;
    returns once it has started building kernels."""
    env = {**os.environ, "BRAZE_CACHE_DIR": ""}
    proc = subprocess.Popen([sys.executable, "-m", "braze.cli", "compile", str(tiny("mobilenetv2-tiny")), "--level",
                             "0", "-o", str(out)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if "building kernels" in line:
            time.sleep(0.1)  # inside the build: a fast machine finishes it within a second
            return proc
    proc.wait()
    pytest.fail(f"the compile ended before building kernels: {proc.returncode}")


def test_killed_compile_leaves_no_artifact(tmp_path):
    out = tmp_path / "m.braze"
    proc = start_compile(out)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert os.listdir(tmp_path) == []


def test_interrupted_compile_leaves_no_artifact(tmp_path):
    out = tmp_path / "m.braze"
    proc = start_compile(out)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert os.listdir(tmp_path) == []


def test_ctrl_c_inside_tvm_stays_a_keyboard_interrupt_from_python(monkeypatch):
    """TVM's FFI turns a KeyboardInterrupt raised while its C++ runs into a
    bare RuntimeError; braze.compile must not report it as a CodegenError
    (nor fall back and go on): it raises KeyboardInterrupt. Simulated: the
    final TVM compile gets SIGINT and fails the way the FFI does."""
    import tvm

    from braze.compiler import compile as braze_compile

    real = tvm.compile

    def interrupted_compile(*args, **kwargs):
        if not isinstance(args[0], tvm.IRModule) or len(args[0].functions) < 2:
            return real(*args, **kwargs)
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            raise RuntimeError() from None  # what the FFI hands back
        return real(*args, **kwargs)

    monkeypatch.setattr(tvm, "compile", interrupted_compile)
    monkeypatch.setenv("BRAZE_CACHE_DIR", "")  # a real build, not a cached artifact
    # Python's own handler, as in a script (an in-process CLI test may have left the CLI's)
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            braze_compile(str(tiny("mobilenetv2-tiny")), level=2)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, saved)


def test_save_killed_midway_leaves_no_artifact_and_its_temp_is_removed(tmp_path):
    """Killed while writing the artifact: the destination does not exist, and the
    temporary folder it leaves is removed by the next save into that folder."""
    out = tmp_path / "m.braze"
    script = MLP + textwrap.dedent("""
        import time
        artifact = braze_compile(model, level=0)
        def slow_export(path):
            open(path, "wb").write(b"half a library")
            print("writing", flush=True)
            time.sleep(120)
        artifact._executable.export_library = slow_export
        artifact.save(sys.argv[1])
    """)
    env = {k: v for k, v in os.environ.items() if k != "BRAZE_CACHE_DIR"}
    proc = subprocess.Popen([sys.executable, "-c", script, str(out)], env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    left = os.listdir(tmp_path)
    assert "m.braze" not in left
    assert len(left) == 1 and left[0].startswith(f".braze-{proc.pid}-"), left

    from braze.compiler import compile as braze_compile
    from braze.runtime import load
    from onnx_check import parse

    model = parse('<ir_version: 8, opset_import: ["" : 17]> g (float[2] x) => (float[2] y) { y = Relu(x) }')
    braze_compile(model, level=0).save(str(out))
    assert os.listdir(tmp_path) == ["m.braze"]
    assert load(out).inputs == [{"name": "x", "shape": [2], "dtype": "float32"}]
