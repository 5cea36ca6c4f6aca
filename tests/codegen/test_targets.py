"""Targets: descriptors and their validation, host detection, the NPU's
working tile and roofline estimate, Ascend-like builds against
onnxruntime, and CUDA code generation (no GPU needed, nvcc is)."""

import json
import struct

import numpy as np
import onnx
import pytest

from braze.cli import main
from braze.compiler import compile as braze_compile
from braze.compiler import fuse_only
from braze.errors import ArtifactError, TargetError
from braze.targets import Target, detect, get_target, mismatch
from braze.targets.roofline import estimate_module
from models import DATA, LIGHT_DIR, assert_close, tiny
from onnx_check import parse, random_inputs, run_ort

BUILT_IN = ["cpu", "cpu-avx2", "cpu-avx512", "cpu-neon", "cuda-sm80", "cuda-sm90", "ascend910b-like", "ascend310p-like"]


def descriptor(name: str) -> dict:
    return get_target(name).descriptor()


def write(tmp_path, data, name="t.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return str(path)


# --- descriptors ------------------------------------------------------------------------
def test_cli_lists_the_built_in_targets(capsys):
    assert main(["targets", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sorted(r["name"] for r in rows) == sorted(BUILT_IN)
    assert {r["name"]: r["family"] for r in rows}["ascend310p-like"] == "ascend"
    assert main(["targets"]) == 0
    assert "cuda-sm90" in capsys.readouterr().out


@pytest.mark.parametrize("name", BUILT_IN)
def test_show_json_is_a_descriptor_that_loads_back(name, tmp_path, capsys):
    assert main(["targets", "--show", name, "--json"]) == 0
    path = write(tmp_path, capsys.readouterr().out)
    assert get_target(path) == get_target(name)
    t = get_target(name)
    assert Target.from_dict(json.loads(json.dumps(t.to_dict()))) == t
    hash(t)  # frozen all the way down
    # what the CPU schedules read exists on every target
    assert t.num_cores >= 1 and t.vector_bits >= 128 and t.l2_bytes > 0


def test_the_families_build_for_the_right_kind():
    assert get_target("cuda-sm80").kind == "cuda" and get_target("cuda-sm80").cuda.arch == "sm_80"
    npu = get_target("ascend910b-like")
    assert npu.kind == "llvm" and npu.mcpu == get_target("cpu").mcpu  # the emulator runs on the host
    assert (npu.npu.ai_core_cnt, npu.npu.vector_core_cnt, npu.npu.ub_size) == (24, 48, 196608)
    small = get_target("ascend310p-like").npu
    assert (small.cube_freq, small.l0_c_size, small.l2_size, small.ddr_rate) == (1060, 262144, 16777216, 17)
    assert get_target("cpu", threads=3).num_cores == 3


def test_a_cuda_artifact_asks_no_more_of_the_host_cpu_than_its_architecture():
    from braze.targets.isa import requirements

    # the GPU server's CPU is not this one: host code for the baseline, no ISA features required
    assert requirements(get_target("cuda-sm90"))["features"] == []
    assert get_target("cuda-sm80").mcpu in ("x86-64", "generic")


@pytest.mark.parametrize("edit, field", [
    (lambda d: d["npu"].update(ub_size="big"), "npu.ub_size"),
    (lambda d: d["npu"].update(ub_size=-4), "npu.ub_size"),
    (lambda d: d["npu"].pop("l1_size"), "npu.l1_size"),
    (lambda d: d["npu"].update(ub_sise=4096), "npu.ub_sise"),
    (lambda d: d["npu"].update(cube_vector_combine="both"), "npu.cube_vector_combine"),
    (lambda d: d.update(family="tpu"), "family"),
    (lambda d: d.update(name="no spaces"), "name"),
    (lambda d: d.update(extra=1), "extra"),
    (lambda d: d.pop("npu"), "npu"),
])
def test_a_bad_descriptor_is_a_typed_error_naming_the_field(edit, field, tmp_path):
    data = descriptor("ascend910b-like")
    edit(data)
    path = write(tmp_path, data)
    with pytest.raises(TargetError, match=f"{path}: .*'{field}'"):
        get_target(path)


def test_bad_cuda_and_cpu_fields(tmp_path):
    data = descriptor("cuda-sm90")
    data["cuda"]["arch"] = "hopper"
    with pytest.raises(TargetError, match="'cuda.arch' must look like"):
        get_target(write(tmp_path, data))
    data = descriptor("cpu")
    data["cpu"]["vector_bits"] = 300
    with pytest.raises(TargetError, match="'cpu.vector_bits' must be one of"):
        get_target(write(tmp_path, data))
    data["cpu"] = {"mcpu": "detect"}  # what is not given is detected
    assert get_target(write(tmp_path, data)) == get_target("cpu")


def test_unknown_names_and_unreadable_files(tmp_path, capsys):
    with pytest.raises(TargetError, match="unknown target 'tpu-v5'.*ascend910b-like"):
        get_target("tpu-v5")
    with pytest.raises(TargetError, match="no such file"):
        get_target(str(tmp_path / "missing.json"))
    with pytest.raises(TargetError, match="not valid JSON"):
        get_target(write(tmp_path, "{oops"))
    assert main(["explain", str(tiny("bert-tiny")), "--target", "tpu-v5"]) == 1
    assert "unknown target 'tpu-v5'" in capsys.readouterr().err


# --- host detection ---------------------------------------------------------------------
def test_vector_width_from_flags_or_cpu_name():
    assert detect.vector_bits({"sse2", "avx2", "avx512f"}) == 512
    assert detect.vector_bits({"sse2", "avx", "avx2"}) == 256
    assert detect.vector_bits({"fp", "asimd"}) == 128
    assert detect.vector_bits(set(), mcpu="znver4") == 512
    assert detect.vector_bits(set(), mcpu="haswell") == 256
    assert detect.vector_bits(set(), mcpu="neoverse-n1") == 128


def test_caches_from_sysfs_or_defaults(tmp_path):
    for i, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "32K"),
                                             (2, "Unified", "2048K"), (3, "Unified", "32M")]):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    assert detect.caches(str(tmp_path)) == {"l1d_bytes": 48 << 10, "l2_bytes": 2 << 20, "l3_bytes": 32 << 20}
    assert detect.caches(str(tmp_path / "none")) == detect.DEFAULT_CACHES


# --- the NPU: working tiles drive fusion --------------------------------------------------
def test_working_tile_of_a_chain_and_of_a_row():
    from braze.frontend import import_onnx
    from braze.passes.fusion.graph import Graph
    from braze.passes.fusion.tile import working_tile

    chain = import_onnx(parse("""<ir_version: 8, opset_import: ["" : 17]>
        g (float[64, 1024] x) => (z) { y = Relu(x) z = Exp(y) }"""))
    graph = Graph(chain.main)
    # one 256-byte vector repeat of x, y and z, double-buffered
    assert working_tile(graph, {0, 1}) == 2 * 3 * 256
    norm = import_onnx(parse("""<ir_version: 8, opset_import: ["" : 17]>
        g (float[8, 4096] x, float[8, 4096] r, float[4096] s, float[4096] b) => (z) {
            y = Add(x, r) z = LayerNormalization(y, s, b) }"""))
    graph = Graph(norm.main)
    # LayerNorm needs whole 4096-wide rows of x, r, y, z, and all of its scale and bias
    assert working_tile(graph, {0, 1}) == 2 * 6 * 4096 * 4


def test_ub_size_drives_fusion_and_estimates(tmp_path, capsys):
    model = str(tiny("bert-tiny"))
    assert main(["explain", model, "--target", "ascend910b-like", "--json"]) == 0
    real = json.loads(capsys.readouterr().out)
    assert real["groups"] and all(g["estimate_us"] > 0 for g in real["groups"])
    assert not [r for r in real["refused"] if r["reason"] == "memory_limit"]
    assert real["estimate"]["target"] == "ascend910b-like"
    assert len(real["estimate"]["kernels"]) == real["kernels"]

    data = descriptor("ascend910b-like")
    data["npu"]["ub_size"] = 4096
    assert main(["explain", model, "--target", write(tmp_path, data), "--json"]) == 0
    small = json.loads(capsys.readouterr().out)
    refused = [r for r in small["refused"] if r["reason"] == "memory_limit"]
    assert refused and "working tile" in refused[0]["detail"]
    assert small["kernels"] > real["kernels"]
    # without the target nothing limits the tile
    _, report = fuse_only(model, 2)
    assert report.kernels == real["kernels"] and report.estimate is None


def test_roofline_figures():
    big = parse("""<ir_version: 8, opset_import: ["" : 17]>
        g (float[2048, 2048] a, float[2048, 2048] b) => (c) { c = MatMul(a, b) }""")
    target = get_target("ascend910b-like")
    module, _ = fuse_only(big, 0)
    (k,) = estimate_module(module, target).kernels
    assert k.cube_flops == 2 * 2048 ** 3 and k.bound == "cube"
    ideal = k.cube_flops / (24 * 16 ** 3 * 2 * 1850e6) * 1e6  # 24 cores x 16x16x16 MACs at 1850 MHz
    assert ideal <= k.roofline_us <= 1.25 * ideal  # the launch cost is on top (tests/passes/test_launch_cost.py)
    # fusion saves traffic: the same model estimates faster fused
    fused = estimate_module(fuse_only(str(tiny("bert-tiny")), 2)[0], target)
    unfused = estimate_module(fuse_only(str(tiny("bert-tiny")), 0)[0], target)
    assert 0 < fused.roofline_us < unfused.roofline_us
    assert all(k.bound == "memory" for k in unfused.kernels if k.cube_flops == 0 and k.vector_ops == 0)


# --- Ascend-like builds run on the host ---------------------------------------------------
def test_ascend_build_of_light_squeezenet_matches_onnxruntime():
    model = onnx.load(LIGHT_DIR / "light_squeezenet.onnx")
    # Its activations reach 9e9 on random inputs, far beyond float16's range:
    # the chip's default mode (force_fp16) would overflow, so check float32.
    artifact = braze_compile(model, target="ascend910b-like", precision_mode="must_keep_origin_dtype")
    m = artifact.manifest
    assert m["target"]["name"] == "ascend910b-like" and m["estimate"]["total_us"] > 0
    assert all(k["estimate_us"] > 0 for k in m["kernels"])
    assert m["fusion"]["estimate"]["total_us"] == m["estimate"]["total_us"]
    feeds = random_inputs(model)
    assert_close(artifact.run(feeds), run_ort(model, feeds))


def test_ascend_build_of_a_tiny_model_matches_onnxruntime():
    # float32 here; the default (ATC's force_fp16) is checked in test_precision.py
    artifact = braze_compile(str(tiny("bert-tiny")), target="ascend310p-like", precision_mode="must_keep_origin_dtype")
    feeds = dict(np.load(DATA / "bert-tiny.inputs.npz"))
    assert_close(artifact.run(feeds), dict(np.load(DATA / "bert-tiny.ref.npz")))


# --- CUDA ---------------------------------------------------------------------------------
def needs_nvcc():
    from braze.codegen.gpu import nvcc_path

    if nvcc_path() is None:
        pytest.skip("CUDA's compiler (nvcc) is not installed: CUDA code generation cannot be checked")


SMALL = """<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 8, 16, 16] x, float[16, 8, 3, 3] w, float[16] wb, float[256, 32] m) => (p, s) {
    c = Conv <pads = [1, 1, 1, 1]> (x, w, wb)
    r = Relu(c)
    f = Reshape(r, shape)
    mm = MatMul(f, m)
    s = Softmax <axis = -1> (mm)
    p = GlobalAveragePool(r)
    shape = Constant <value = int64[2] {16, 256}> ()
}"""


def test_cuda_build_embeds_compiled_device_code(tmp_path):
    needs_nvcc()
    model = parse(SMALL)
    artifact = braze_compile(model, target="cuda-sm90")
    assert artifact.manifest["target"]["kind"] == "cuda" and artifact.manifest["target"]["cuda"]["arch"] == "sm_90"
    rules = {k["schedule"] for k in artifact.kernels}
    assert rules and all(r.startswith("dlight.") or r == "bind_spatial" for r in rules)
    path = artifact.save(str(tmp_path / "m.braze"))
    lib = (tmp_path / "m.braze" / "lib.so").read_bytes()
    assert struct.pack("<I", 0xBA55ED50) in lib  # an nvcc fatbin, compiled at build time
    assert b"__global__" not in lib  # not CUDA source to compile at load time
    if detect.gpu_arch() is None:
        with pytest.raises(ArtifactError, match="cuda-sm90 .*no CUDA GPU"):
            from braze.runtime import load

            load(path)


def test_bind_spatial_schedules_what_dlight_does_not():
    needs_nvcc()
    import tvm
    from tvm import te

    from braze.codegen import gpu
    from braze.codegen.tvm_target import tvm_target

    target = get_target("cuda-sm80")
    x = te.placeholder((3, 1000), name="x")
    y = te.compute((3, 1000), lambda i, j: x[i, j] * 2.0, name="y")
    z = te.compute((3, 1000), lambda i, j: y[i, j] + 1.0, name="z")
    func = gpu.bind_spatial(te.create_prim_func([x, z]), tvm_target(target))
    with gpu.cuda_toolchain(target):
        built = tvm.compile(tvm.IRModule({"main": func}), target=tvm_target(target))
    assert built is not None


def test_a_cuda_artifact_needs_a_gpu_of_its_arch():
    built = {"name": "cuda-sm90", "kind": "cuda", "mcpu": detect.llvm_cpu(), "cuda": {"arch": "sm_90"}}
    have = detect.gpu_arch()
    if have is None:
        assert "no CUDA GPU" in mismatch(built)
    assert "this machine is llvm" in mismatch({**built, "mcpu": "cortex-a72"})
    assert mismatch({"kind": "llvm", "mcpu": detect.llvm_cpu()}) is None
