"""The named CPU targets (cpu-avx2, cpu-avx512, cpu-neon) and the ISA check:
each builds for its fleet whatever the host, runs where the CPU has what it
requires, and is refused elsewhere with an ArtifactError (Python, `braze
run`, braze-run), never an illegal instruction. Whether the host has AVX-512
or NEON decides which side of each check runs here."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from braze.cli import main
from braze.codegen.tvm_target import tvm_target
from braze.compiler import compile as braze_compile
from braze.errors import ArtifactError
from braze.runtime import load
from braze.targets import advice, detect, get_target
from braze.targets.isa import FEATURES, host_features, host_mattr, missing, requirements
from onnx_check import run_ort

ROOT = Path(__file__).parents[2]
NAMED = ["cpu-avx2", "cpu-avx512", "cpu-neon"]
RNG = np.random.default_rng(0)


def _conv_relu():
    """One kernel: a 3x3 conv with its ReLU epilogue."""
    w = numpy_helper.from_array(RNG.standard_normal((16, 4, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])],
        "conv_relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 8, 8])], initializer=[w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


MODEL = _conv_relu()
FEEDS = {"x": RNG.standard_normal((1, 4, 8, 8)).astype(np.float32)}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """name -> the in-memory artifact compiled for that target."""
    return {name: braze_compile(MODEL, target=name, level=2) for name in NAMED}


def _runs_here(name: str) -> bool:
    return missing(requirements(get_target(name))) is None


def _kernel_asm(artifact) -> str:
    """The assembly of the kernels (the VM executable's imported LLVM module)."""
    return "".join(m.inspect_source("asm") for m in artifact._executable.mod.imports if m.kind == "llvm")


def _edit_manifest(art: Path, edit) -> None:
    m = json.loads((art / "manifest.json").read_text())
    edit(m)
    (art / "manifest.json").write_text(json.dumps(m))


# --- the descriptors --------------------------------------------------------------------------
def test_listed_and_shown(capsys):
    assert main(["targets", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(NAMED) <= set(rows) and all(rows[n]["family"] == "cpu" for n in NAMED)
    assert rows["cpu-neon"]["builds_for"] == "llvm aarch64 generic+neon"
    assert main(["targets", "--show", "cpu-avx2"]) == 0
    shown = capsys.readouterr().out
    for field in ("cpu.mcpu", "cpu.mtriple", "cpu.num_cores", "cpu.vector_bits", "cpu.vector_registers",
                  "cpu.l1d_bytes", "cpu.l2_bytes", "cpu.l3_bytes"):
        assert field in shown
    assert re.search(r"runs on x86_64 CPUs with .*\bavx2 fma\b", shown)


@pytest.mark.parametrize("name, arch, needs", [
    ("cpu-avx2", "x86_64", {"avx2", "fma"}),
    ("cpu-avx512", "x86_64", {"avx2", "fma", "avx512f", "avx512bw", "avx512dq", "avx512vl"}),
    ("cpu-neon", "aarch64", {"neon"}),
])
def test_fixed_fleet_figures_and_requirements(name, arch, needs):
    t = get_target(name)
    assert t.arch == arch and t.num_cores >= 1 and t.vector_registers in (16, 32)
    assert get_target(name) == t  # nothing detected: the same on every build machine
    found = requirements(t)
    assert found["arch"] == arch and needs <= set(found["features"])
    if name == "cpu-avx2":
        assert not any(f.startswith("avx512") for f in found["features"])


def test_the_host_target_requires_what_the_host_has():
    needs = requirements(get_target("cpu"))
    assert needs["arch"] == detect.arch() and set(needs["features"]) <= host_features()
    widest = {"AVX-512": "avx512f", "AVX2": "avx2", "NEON": "neon"}.get(detect.isa())
    if widest:  # at least the vector ISA level the host is known by
        assert widest in needs["features"]


def test_tvm_targets():
    neon = tvm_target(get_target("cpu-neon"))
    assert neon.attrs["mtriple"] == "aarch64-linux-gnu" and list(neon.attrs["mattr"]) == ["+neon"]
    avx2 = tvm_target(get_target("cpu-avx2"))
    assert (avx2.attrs["mtriple"], avx2.attrs["mcpu"]) == ("x86_64-linux-gnu", get_target("cpu-avx2").mcpu)
    host = get_target("cpu")  # its mattr only where the OS lists features beyond LLVM's name for it
    assert list(tvm_target(host).attrs.get("mattr", [])) == list(host.mattr) == list(host_mattr(detect.llvm_cpu()))


# --- compiling and running --------------------------------------------------------------------
@pytest.mark.parametrize("name", ["cpu-avx2", "cpu-avx512"])
def test_x86_targets_run_where_the_cpu_has_the_isa(name, built, tmp_path):
    art = built[name]
    assert art.manifest["requires"] == requirements(get_target(name))
    if detect.arch() != "x86_64":  # cross-compiled: refused as cpu-neon is on x86-64
        with pytest.raises(ArtifactError, match="this machine is"):
            art.run(FEEDS)
        return
    art.save(str(tmp_path / "m.braze"))
    if _runs_here(name):
        ours = load(tmp_path / "m.braze").run(FEEDS)["y"]
        np.testing.assert_allclose(ours, run_ort(MODEL, FEEDS)["y"], rtol=1e-4, atol=1e-4)
        return
    lacking = [f for f in art.manifest["requires"]["features"] if f not in host_features()]
    assert "avx512f" in lacking or name == "cpu-avx2"  # refused on a host without AVX-512: names avx512f
    for attempt in (lambda: load(tmp_path / "m.braze"), lambda: art.run(FEEDS)):
        with pytest.raises(ArtifactError, match=rf"built for target {name} \(x86_64\), this CPU lacks") as e:
            attempt()
        assert ", ".join(lacking) in str(e.value) and "`--target cpu`" in str(e.value)


def test_avx512_code_uses_the_wide_registers(built):
    assert "zmm" in _kernel_asm(built["cpu-avx512"]) and "zmm" not in _kernel_asm(built["cpu-avx2"])


def test_cpu_neon_cross_compiles(built, tmp_path):
    art = built["cpu-neon"]
    assert art.manifest["requires"] == {"arch": "aarch64", "features": ["neon"]}
    assert re.search(r"\bfmla\s+v\d+\.4s", _kernel_asm(art))  # NEON fused multiply-adds
    if detect.arch() == "aarch64":
        np.testing.assert_allclose(art.run(FEEDS)["y"], run_ort(MODEL, FEEDS)["y"], rtol=1e-4, atol=1e-4)
        return
    with pytest.raises(ArtifactError, match=re.escape(f"cpu-neon (aarch64), this machine is {detect.arch()}")):
        art.run(FEEDS)
    path = tmp_path / "m.braze"
    if shutil.which("aarch64-linux-gnu-g++") or shutil.which("aarch64-linux-gnu-gcc"):
        art.save(str(path))
        with pytest.raises(ArtifactError, match="this machine is"):
            load(path)
    else:  # writing lib.so needs a linker for aarch64: a typed error that names it
        with pytest.raises(ArtifactError, match="needs a linker for aarch64: aarch64-linux-gnu-g\\+\\+"):
            art.save(str(path))
        assert not path.exists()


# --- a manifest this machine cannot satisfy -----------------------------------------------------
@pytest.fixture(scope="module")
def runnable(built, tmp_path_factory):
    """A saved artifact this host runs (cpu-avx2 where it can, else the host's own)."""
    path = tmp_path_factory.mktemp("named") / "m.braze"
    art = built["cpu-avx2"] if _runs_here("cpu-avx2") else braze_compile(MODEL, level=2)
    art.save(str(path))
    np.save(path.parent / "x.npy", FEEDS["x"])
    return path


OTHER_ARCH = "aarch64" if detect.arch() != "aarch64" else "x86_64"
EDITS = {  # (edit, message, whether it says which target to rebuild for)
    "fake-feature": (lambda m: m["requires"]["features"].append("avx9000"), "this CPU lacks avx9000", True),
    "other-arch": (lambda m: m["requires"].update(arch=OTHER_ARCH), f"({OTHER_ARCH}), this machine is", True),
    "corrupt": (lambda m: m.update(requires=["avx2"]), "corrupt manifest.json (", False),
}


@pytest.mark.parametrize("edit, message, advised", EDITS.values(), ids=EDITS)
def test_edited_requirements_fail_in_python(runnable, tmp_path, capsys, edit, message, advised):
    art = tmp_path / "copy.braze"
    shutil.copytree(runnable, art)
    _edit_manifest(art, edit)
    with pytest.raises(ArtifactError, match=re.escape(message)):
        load(art)
    np.savez(tmp_path / "in.npz", **FEEDS)
    assert main(["run", str(art), "--inputs", str(tmp_path / "in.npz"), "-o", str(tmp_path / "out.npz")]) == 1
    err = capsys.readouterr().err
    assert message in err and (advice() in err) == advised and "Traceback" not in err


@pytest.mark.parametrize("edit, message, advised", EDITS.values(), ids=EDITS)
def test_edited_requirements_fail_in_braze_run(braze_run, runnable, tmp_path, edit, message, advised):
    art = tmp_path / "copy.braze"
    shutil.copytree(runnable, art)
    args = [str(braze_run), str(art), "--input", f"x={runnable.parent / 'x.npy'}", "--output-dir", str(tmp_path)]
    assert subprocess.run(args, capture_output=True, timeout=120, check=False).returncode == 0
    _edit_manifest(art, edit)
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert message in done.stderr and (advice() in done.stderr) == advised  # the same words as Python's


@pytest.mark.skipif(detect.arch() != "x86_64", reason="links x86-64 code")
def test_braze_run_refuses_avx512_code_on_a_cpu_without_it(braze_run, built, tmp_path):
    art = tmp_path / "m.braze"
    built["cpu-avx512"].save(str(art))
    np.save(tmp_path / "x.npy", FEEDS["x"])
    done = subprocess.run([str(braze_run), str(art), "--input", f"x={tmp_path / 'x.npy'}", "--output-dir",
                           str(tmp_path / "o")], capture_output=True, text=True, timeout=120, check=False)
    if _runs_here("cpu-avx512"):
        assert done.returncode == 0, done.stderr
        np.testing.assert_allclose(np.load(tmp_path / "o" / "y.npy"), run_ort(MODEL, FEEDS)["y"], rtol=1e-4, atol=1e-4)
    else:
        assert done.returncode == 1 and "this CPU lacks avx512" in done.stderr and advice() in done.stderr


def test_the_cpp_runtime_knows_the_same_features():
    """cpp/src/cpu.cpp names the features of isa.FEATURES, and the portable
    targets' requirements as Python derives them."""
    source = (ROOT / "cpp" / "src" / "cpu.cpp").read_text()
    assert re.findall(r'\{"([\w.-]+)", (?:0x)?[0-9a-f]+, \d, k', source) == list(FEATURES["x86_64"])
    assert re.findall(r'\{"([\w.]+)", AT_HWCAP2?,', source) == list(FEATURES["aarch64"])
    for name in NAMED:
        listed = re.search(r'\{"' + name + r'", \{([^}]*)\}\}', source).group(1)
        assert re.findall(r'"([^"]+)"', listed) == requirements(get_target(name))["features"], name


def test_tuning_for_a_cpu_this_machine_cannot_run_is_refused(tmp_path):
    """Tuning measures candidates here: a target this CPU cannot run is a
    TuningError naming what it lacks, before anything is built."""
    from braze.codegen.tuning import tune_workloads
    from braze.errors import TuningError

    with pytest.raises(TuningError, match=r"target cpu-\w+ needs \("):
        tune_workloads([], get_target("cpu-neon" if detect.arch() == "x86_64" else "cpu-avx2"), str(tmp_path / "db"))
