"""Schedule experiments: `braze kernels`, `braze schedule`, pinned schedules
in `braze compile`, and the Python API behind them. Small models built
here: MatMul+Add+Relu (64x256 @ 256x256) and a 3x3 Conv+Relu."""

import json
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import braze
from braze.cli import main
from braze.compiler import compile as braze_compile
from braze.errors import ScheduleError
from braze.measure import run_onnxruntime

MLP_FLOPS = 2 * 64 * 256 * 256 + 2 * 64 * 256  # the matmul, then one per element for Add and Relu
CONV_FLOPS = 2 * 32 * 16 * 3 * 3 * 28 * 28 + 32 * 28 * 28  # the conv (bias inside), then Relu


@pytest.fixture
def braze_cli(capsys):
    """Runs the braze command in this process (TVM is imported once)."""
    def run(*args):
        code = main([str(a) for a in args])
        out = capsys.readouterr()
        return SimpleNamespace(returncode=code, stdout=out.out, stderr=out.err)

    return run


def _save(path, nodes, x, y, weights):
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)
             for name, shape in weights.items()]
    graph = helper.make_graph(nodes, path.stem, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    return _save(tmp_path_factory.mktemp("mlp") / "mlp.onnx",
                 [helper.make_node("MatMul", ["x", "W"], ["m"], name="mm"),
                  helper.make_node("Add", ["m", "b"], ["a"], name="bias"),
                  helper.make_node("Relu", ["a"], ["y"], name="relu")],
                 [64, 256], [64, 256], {"W": (256, 256), "b": (256,)})


@pytest.fixture(scope="module")
def conv(tmp_path_factory):
    return _save(tmp_path_factory.mktemp("conv") / "conv.onnx",
                 [helper.make_node("Conv", ["x", "W", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", ["c"], ["y"], name="relu")],
                 [1, 16, 28, 28], [1, 32, 28, 28], {"W": (32, 16, 3, 3), "b": (32,)})


def _matches_onnxruntime(artifact, model):
    x = np.random.default_rng(1).standard_normal(artifact.inputs[0]["shape"]).astype(np.float32)
    got, want = artifact.run({"x": x})["y"], run_onnxruntime(str(model), {"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


# --- braze kernels ------------------------------------------------------------------------------
def test_kernels_lists_flops_bytes_and_rule(mlp, conv, braze_cli):
    r = braze_cli("kernels", mlp, "--json")
    assert r.returncode == 0, r.stderr
    [k] = json.loads(r.stdout)
    assert k["name"] == "k0_mm_matmul_epilogue"
    assert k["ops"] == ["nn.matmul", "math.add", "math.relu"] and k["anchor"] == "nn.matmul"
    assert k["flops"] == MLP_FLOPS
    assert k["bytes"] == 4 * (64 * 256 + 256 * 256 + 256 + 64 * 256)
    assert k["schedule"] == "gemm" and set(k["schedule_params"]["nn.matmul#0"]) == {"tile_m", "tile_n", "unroll_k", "order"}
    assert [i["const"] for i in k["inputs"]] == [False, True, True]
    assert k["packed"] == [f"gemm-panels-{k['schedule_params']['nn.matmul#0']['tile_n']}"]
    assert k["rules"] == ["generic", "gemm"]

    [c] = braze.kernels(conv)
    assert (c.flops, c.schedule, c.anchor) == (CONV_FLOPS, "conv2d", "nn.conv")

    r = braze_cli("kernels", mlp)  # the table
    assert r.returncode == 0 and "k0_mm_matmul_epilogue" in r.stdout and "gemm" in r.stdout
    assert "8.4" in r.stdout  # MFLOP


# --- braze schedule -----------------------------------------------------------------------------
def test_schedule_compares_variants_and_pins_the_fastest(mlp, tmp_path, braze_cli):
    pins = tmp_path / "pins.json"
    r = braze_cli("schedule", mlp, "--kernel", "k0_mm_matmul_epilogue", "--variants", "4", "--repeat", "2",
                  "--pin", pins, "--json", "-q")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    variants = data["variants"]
    assert [v["label"] for v in variants] == ["default", "alt1", "alt2", "generic"]
    assert all(v["ok"] and v["max_rel"] <= 1e-4 and v["ms"] > 0 and v["gflops"] > 0 for v in variants)
    assert len({json.dumps(v["schedule_params"], sort_keys=True) for v in variants}) == 4  # all different
    assert variants[0]["speedup"] == 1.0 and variants[-1]["schedule"] == "generic"
    assert data["kernel"]["flops"] == MLP_FLOPS

    # the pins file holds the fastest variant; compiling with it builds exactly that
    fastest = next(v for v in variants if v["label"] == data["fastest"])
    assert json.loads(pins.read_text()) == {"k0_mm_matmul_epilogue": fastest["pins"]}
    out = tmp_path / "pinned.braze"
    r = braze_cli("compile", mlp, "-o", out, "--schedule-file", pins, "-q")
    assert r.returncode == 0, r.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["schedules"] == {"k0_mm_matmul_epilogue": fastest["pins"]}
    assert manifest["kernels"][0]["schedule"] == fastest["schedule"]
    assert manifest["kernels"][0]["schedule_params"] == fastest["schedule_params"]


def test_schedule_table_and_conv_variants(conv, braze_cli):
    r = braze_cli("schedule", conv, "--kernel", "k0", "--variants", "3", "--repeat", "2", "-q")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    header = next(l for l in lines if l.startswith("variant"))
    assert all(col in header for col in ("rule", "params", "ms", "GFLOP/s", "GB/s", "max err", "speedup"))
    rows = [l for l in lines if l.startswith(("default", "alt1", "generic"))]
    assert len(rows) == 3 and all(l.rstrip().endswith("ok") for l in rows)
    assert "conv2d" in rows[0] and "tile_k=" in rows[1]
    assert lines[-1].startswith("fastest: ")


def test_pinning_a_non_default_variant_changes_the_artifact(mlp):
    default = braze_compile(mlp)
    tile_n = default.kernels[0]["schedule_params"]["nn.matmul#0"]["tile_n"]  # the target's vector width decides
    chosen = {"rule": "gemm", "params": {"tile_m": 4, "tile_n": tile_n}}  # the default: 6 rows (AVX2) or 8
    pinned = braze_compile(mlp, schedules={"k0": chosen})  # kN names the N-th kernel
    entry = pinned.kernels[0]
    merged = {**default.kernels[0]["schedule_params"]["nn.matmul#0"], **chosen["params"]}  # pins over defaults
    assert entry["schedule_params"] == {"nn.matmul#0": merged} != default.kernels[0]["schedule_params"]
    assert entry["packed"] == [f"gemm-panels-{tile_n}"]
    assert pinned.manifest["schedules"] == {"k0_mm_matmul_epilogue": chosen}
    _matches_onnxruntime(pinned, mlp)
    # the artifact's own listing reads the built schedule back
    [k] = braze.kernels(pinned)
    assert k.schedule_params == entry["schedule_params"] and k.flops == MLP_FLOPS


def test_compile_schedule_option_and_generic(mlp, tmp_path, braze_cli):
    out = tmp_path / "g.braze"
    r = braze_cli("compile", mlp, "-o", out, "--schedule", "k0_mm_matmul_epilogue=generic", "-q")
    assert r.returncode == 0, r.stderr
    r = braze_cli("kernels", out, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)[0]["schedule"] == "generic"


# --- a user's schedule function -------------------------------------------------------------------
SCHEDULES = '''
from braze.codegen.schedules.generic import schedule_generic


def rows(sch, kernel, target):
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        schedule_generic(sch, block, target, min_parallel=1)


def broken(sch, kernel, target):
    raise RuntimeError("this schedule does not work")
'''


def test_schedule_function_variants_and_pin(mlp, tmp_path):
    (tmp_path / "mine.py").write_text(SCHEDULES)
    rows, broken = f"{tmp_path}/mine.py:rows", f"{tmp_path}/mine.py:broken"
    exp = braze.schedule_variants(mlp, "k0", [rows, broken, "gemm:tile_m=16"], repeat=2)
    by = {r.label: r for r in exp.results}
    assert list(by) == ["default", "fn mine.py:rows", "fn mine.py:broken", "gemm tile_m=16"]
    assert by["fn mine.py:rows"].ok and by["fn mine.py:rows"].schedule == "function"
    assert not by["fn mine.py:broken"].ok and "this schedule does not work" in by["fn mine.py:broken"].error
    assert by["gemm tile_m=16"].ok and by["gemm tile_m=16"].schedule_params["nn.matmul#0"]["tile_m"] == 16
    assert exp.fastest is not None and "FAILED" in exp.table()

    art = braze_compile(mlp, schedules={"k0": {"function": rows}})
    assert art.kernels[0]["schedule"] == "function"
    assert art.manifest["schedules"] == {"k0_mm_matmul_epilogue": {"function": rows}}
    _matches_onnxruntime(art, mlp)


# --- errors ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel, variant, message", [
    ("k7", "gemm", "no kernel named 'k7'"),
    ("k0_mm_matmul", "gemm", "did you mean k0_mm_matmul_epilogue"),
    ("k0", "fancy", "unknown schedule rule 'fancy'"),
    ("k0", "conv2d", "rule 'conv2d' does not apply"),
    ("k0", "gemm:tile_q=4", "unknown schedule parameter 'tile_q' (rule gemm takes order, tile_m, tile_n, unroll_k)"),
    ("k0", "gemm:tile_m=four", "the value must be an integer"),
    ("k0", "gemm:tile_m=0", "gemm's tile_m takes an integer >= 1, got 0"),
    ("k0", "gemm:order=3", "gemm's order takes 1 or 2, got 3"),
    ("k0", "generic:tile_m=4", "the generic schedule takes no parameters"),
    ("k0", {"function": "nowhere.py:f"}, "no such file nowhere.py"),
])
def test_bad_choices_are_schedule_errors(mlp, kernel, variant, message):
    with pytest.raises(ScheduleError) as e:
        braze.schedule_variants(mlp, kernel, [variant], repeat=1)
    assert message in str(e.value)


def test_cli_errors_are_one_line(mlp, tmp_path, braze_cli):
    r = braze_cli("compile", mlp, "-o", tmp_path / "x.braze", "--schedule", "k3=gemm", "-q")
    assert r.returncode == 1 and r.stderr.startswith("error: no kernel named 'k3'") and "Traceback" not in r.stderr
    r = braze_cli("schedule", mlp, "--kernel", "k0", "--rule", "gemm", "--param", "tile_n", "-q")
    assert r.returncode == 1 and "expected NAME=VALUE" in r.stderr and "Traceback" not in r.stderr
    r = braze_cli("schedule", tmp_path, "--kernel", "k0", "-q")  # a folder (an artifact) is not the model
    assert r.returncode == 1 and "braze schedule takes the ONNX model" in r.stderr
    (tmp_path / "bad.json").write_text("[1, 2]")
    r = braze_cli("compile", mlp, "-o", tmp_path / "x.braze", "--schedule-file", tmp_path / "bad.json", "-q")
    assert r.returncode == 1 and "pins file" in r.stderr and "Traceback" not in r.stderr


def test_schedule_takes_the_precision_mode(mlp, braze_cli):
    """`braze schedule --precision-mode` times the kernel a 16-bit compile
    builds (its casts fused in, its rule: amx on a CPU with AMX tiles, dpbf16 with AVX512-BF16), and
    checks its variants against the mode's tolerance, not float32's."""
    from braze.codegen.schedules.dpbf16 import native_bf16_rule
    from braze.passes.precision import TOLERANCES
    from braze.targets import get_target

    r = braze_cli("kernels", mlp, "--precision-mode", "allow_mix_precision_bf16", "--json")
    name = json.loads(r.stdout)[0]["name"]
    r = braze_cli("schedule", mlp, "--kernel", name, "--precision-mode", "allow_mix_precision_bf16",
                  "--repeat", "2", "--json", "-q")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["tolerance"] == TOLERANCES["bf16"] and "math.cast" in data["kernel"]["ops"]
    default = data["variants"][0]
    assert default["ok"] and default["schedule"] == (native_bf16_rule(get_target("cpu")) or "gemm")


def test_schedule_times_16bit_winograd_kernels(conv, braze_cli):
    """A 16-bit Winograd kernel's transformed weights are computed in
    float64 and stored in the conv's dtype: `braze schedule` passes them in
    that dtype, as the build does (it failed with "expected float16")."""
    r = braze_cli("kernels", conv, "--precision-mode", "allow_mix_precision", "--json")
    name = next(k["name"] for k in json.loads(r.stdout) if "nn.conv" in k["ops"])
    r = braze_cli("schedule", conv, "--kernel", name, "--precision-mode", "allow_mix_precision",
                  "--rule", "winograd", "--repeat", "2", "--json", "-q")
    assert r.returncode == 0, r.stderr
    variants = json.loads(r.stdout)["variants"]
    assert variants[-1]["schedule"] == "winograd" and all(v["ok"] for v in variants), variants
