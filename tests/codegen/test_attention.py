"""nn.attention: ONNX Attention imported as one op, the flash CPU kernel
against onnxruntime (opset 23) and onnx's reference (opsets 24-25), its
workspace, the IR text, typed refusals, and the CUDA and Ascend-like paths.

Most cases use heads of 64; onnx's own node tests (tests/frontend/test_conformance.py)
run the flash kernel on their odd head sizes too."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper

import braze
from braze.errors import OnnxImportError
from braze.frontend import import_onnx

D = 64


def attention_model(q, k, v, *, opset=23, mask=None, past=None, nonpad=False, dtype=TP.FLOAT, outputs=("y",),
                    **attrs):
    """One Attention node; shapes are lists, ``mask`` (elem type, shape), ``past`` the past key/value shape."""
    inputs = [helper.make_tensor_value_info(n, dtype, s) for n, s in (("q", q), ("k", k), ("v", v))]
    names = ["q", "k", "v"]
    if mask is not None:
        inputs.append(helper.make_tensor_value_info("m", mask[0], mask[1]))
    names.append("m" if mask is not None else "")
    if past is not None:
        inputs += [helper.make_tensor_value_info(n, dtype, past) for n in ("pk", "pv")]
    names += ["pk", "pv"] if past is not None else ["", ""]
    if nonpad:
        inputs.append(helper.make_tensor_value_info("n", TP.INT64, [q[0]]))
        names.append("n")
    while names and not names[-1]:
        names.pop()
    node = helper.make_node("Attention", names, list(outputs), **attrs)
    outs = [helper.make_tensor_value_info(n, dtype, None) for n in outputs if n]
    graph = helper.make_graph([node], "g", inputs, outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def feeds_for(model, seed=0, lengths=None):
    rng = np.random.default_rng(seed)
    feeds = {}
    for inp in model.graph.input:
        t = inp.type.tensor_type
        shape = [d.dim_value for d in t.shape.dim]
        if t.elem_type == TP.BOOL:
            feeds[inp.name] = rng.random(shape) > 0.3
        elif t.elem_type == TP.INT64:
            feeds[inp.name] = np.array(lengths, np.int64)
        else:
            feeds[inp.name] = rng.standard_normal(shape).astype(onnx.helper.tensor_dtype_to_np_dtype(t.elem_type))
    return feeds


def run_braze(model, feeds, **options):
    artifact = braze.compile(model, **options)
    out = artifact.run(feeds)
    return artifact, [out[o.name] for o in model.graph.output]


def max_rel(got, ref):
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))


FLOAT_CASES = {
    "3d_gqa": dict(q=[1, 37, 4 * D], k=[1, 37, 2 * D], v=[1, 37, 2 * D], q_num_heads=4, kv_num_heads=2),
    "4d_causal_cross": dict(q=[1, 2, 21, D], k=[1, 2, 70, D], v=[1, 2, 70, D], is_causal=1),
    "4d_bool_mask": dict(q=[2, 4, 50, D], k=[2, 4, 70, D], v=[2, 4, 70, D], mask=(TP.BOOL, [2, 1, 50, 70])),
    "3d_causal_float_mask_mqa": dict(q=[1, 100, 2 * D], k=[1, 100, D], v=[1, 100, D], q_num_heads=2,
                                     kv_num_heads=1, is_causal=1, mask=(TP.FLOAT, [100, 100])),
    "4d_softcap_scale": dict(q=[1, 2, 33, D], k=[1, 2, 33, D], v=[1, 2, 33, D], softcap=2.0, scale=0.3),
    "4d_past_causal": dict(q=[1, 2, 5, D], k=[1, 2, 5, D], v=[1, 2, 5, D], past=[1, 2, 40, D], is_causal=1,
                           outputs=("y", "present_k", "present_v")),
}


@pytest.mark.parametrize("name", sorted(FLOAT_CASES))
def test_flash_matches_onnxruntime(name):
    case = dict(FLOAT_CASES[name])
    shapes = [case.pop(n) for n in ("q", "k", "v")]
    model = attention_model(*shapes, **case)
    feeds = feeds_for(model)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    artifact, got = run_braze(model, feeds)
    assert any(k["schedule"] == "flash" for k in artifact.kernels)
    for g, r in zip(got, ref):
        assert g.shape == r.shape and max_rel(g, r) <= 1e-5


@pytest.mark.parametrize("name, opset, attrs, lengths", [
    ("window", 25, dict(left_window_size=7, right_window_size=2), None),
    ("causal_window", 25, dict(is_causal=1, left_window_size=9), None),
    ("nonpad_causal", 24, dict(is_causal=1), [50, 31]),
])
def test_flash_matches_the_onnx_reference(name, opset, attrs, lengths):
    """Sliding windows (opset 25) and nonpad_kv_seqlen (opset 24): onnx's reference."""
    from onnx.reference import ReferenceEvaluator

    model = attention_model([2, 2, 50, D], [2, 2, 50, D], [2, 2, 50, D], opset=opset, nonpad=lengths is not None,
                            **attrs)
    feeds = feeds_for(model, lengths=lengths)
    ref = ReferenceEvaluator(model).run(None, feeds)[0]
    artifact, (got,) = run_braze(model, feeds)
    assert artifact.kernels[0]["schedule"] == "flash"
    assert max_rel(got, ref) <= 1e-5


@pytest.mark.parametrize("q, v", [([1, 2, 37, 40], [1, 2, 37, 40]), ([1, 2, 20, 3], [1, 2, 30, 5])])
def test_flash_takes_head_sizes_that_fill_no_whole_vector(q, v):
    """v's head size padded to whole vectors inside the kernel, the padding never written out."""
    model = attention_model(q, [*v[:3], q[3]], v, is_causal=1)
    feeds = feeds_for(model)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    artifact, (got,) = run_braze(model, feeds)
    assert artifact.kernels[0]["schedule"] == "flash" and max_rel(got, ref) <= 1e-5


def test_fully_masked_rows_give_zeros_and_keys_past_the_mask_are_masked():
    """A query row whose mask forbids every key gives 0 (ONNX's rule); a
    mask shorter than the keys leaves the rest out (onnx's reference:
    onnxruntime refuses the shorter mask)."""
    from onnx.reference import ReferenceEvaluator

    model = attention_model([1, 1, 20, D], [1, 1, 40, D], [1, 1, 40, D], mask=(TP.BOOL, [20, 32]))
    feeds = feeds_for(model)
    feeds["m"][3] = False
    ref = ReferenceEvaluator(model).run(None, feeds)[0]
    _, (got,) = run_braze(model, feeds)
    assert np.all(got[0, 0, 3] == 0) and max_rel(got, ref) <= 1e-5


@pytest.mark.parametrize("attend", [False, True])
def test_a_constant_one_value_mask(attend):
    """A mask that is one constant (a kernel immediate): all "attend" changes
    nothing (flash takes it), all "do not attend" gives zeros."""
    model = attention_model([1, 2, 8, D], [1, 2, 8, D], [1, 2, 8, D])
    model.graph.node[0].input.insert(3, "m")
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.full((8, 8), attend), "m"))
    feeds = feeds_for(model)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    artifact, (got,) = run_braze(model, feeds)
    assert max_rel(got, ref) <= 1e-5 if attend else np.all(got == 0)
    assert (artifact.kernels[0]["schedule"] == "flash") == attend


@pytest.mark.parametrize("mode", ["allow_mix_precision", "allow_mix_precision_bf16"])
def test_flash_16bit(mode):
    """16-bit q, k, v (the precision pass puts Attention on its white list):
    float32 arithmetic inside, the result rounded once."""
    model = attention_model([1, 64, 2 * D], [1, 64, 2 * D], [1, 64, 2 * D], q_num_heads=2, kv_num_heads=2,
                            is_causal=1)
    feeds = feeds_for(model)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    artifact, (got,) = run_braze(model, feeds, precision_mode=mode)
    assert artifact.kernels and any(k["schedule"] == "flash" for k in artifact.kernels)
    assert max_rel(got, ref) <= (2e-3 if mode == "allow_mix_precision" else 2e-2)


def test_flash_on_an_avx2_build():
    """The portable AVX2 target: 8-lane vectors, 16 registers, other tiles."""
    case = dict(FLOAT_CASES["3d_causal_float_mask_mqa"])
    model = attention_model(*[case.pop(n) for n in ("q", "k", "v")], **case)
    feeds = feeds_for(model)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    artifact, (got,) = run_braze(model, feeds, target="cpu-avx2")
    params = artifact.kernels[0]["schedule_params"]
    assert artifact.kernels[0]["schedule"] == "flash" and max_rel(got, ref) <= 1e-5
    tile = next(iter(params.values()))
    assert tile["tile_q"] * tile["key_vectors"] + tile["key_vectors"] + 1 <= 16  # 16 ymm registers


def _allocated_bytes(func) -> int:
    """Bytes the PrimFunc allocates (float32 buffers), read off its TVMScript."""
    import re

    shapes = re.findall(r"alloc_buffer\(\(([\d, ]+)\)", func.script())
    return sum(4 * int(np.prod([int(d) for d in shape.split(",") if d.strip()])) for shape in shapes)


def test_flash_workspace_grows_linearly_with_the_sequence():
    """No S x S buffer: the kernel's allocations (K^T, V, per-task state and
    tiles) at 4096 tokens are at most ~4x those at 1024, not 16x."""
    from braze.codegen.kernel import partition
    from braze.codegen.schedules import flash
    from braze.targets import get_target

    sizes = {}
    target = get_target("cpu")
    for s in (1024, 4096):
        module = import_onnx(attention_model([1, s, 2 * D], [1, s, 2 * D], [1, s, 2 * D], q_num_heads=2,
                                             kv_num_heads=2))
        kernel = partition(next(iter(module.funcs.values())) if isinstance(module.funcs, dict)
                           else module.funcs[0])[0]
        op = kernel.ops[0]
        sizes[s] = _allocated_bytes(flash.primfunc(op, kernel, target, flash.defaults(op, kernel, target)))
    assert sizes[4096] <= 4.5 * sizes[1024]
    assert sizes[4096] < 4096 * 4096 * 4  # one head's scores would be 64 MiB


def test_flash_tiles_follow_the_machine_model():
    """Register tiles fit each ISA's register file; key blocks shrink where
    the L2 cache cannot hold a block's K^T and V (AVX2's 256 KiB, heads of 128)."""
    from braze.codegen.kernel import partition
    from braze.codegen.schedules import flash
    from braze.targets import get_target

    module = import_onnx(attention_model([1, 1000, 2 * 128], [1, 1000, 2 * 128], [1, 1000, 2 * 128],
                                         q_num_heads=2, kv_num_heads=2))
    kernel = partition(next(iter(module.funcs.values())) if isinstance(module.funcs, dict) else module.funcs[0])[0]
    for name in ("cpu-avx2", "cpu-avx512"):
        target = get_target(name)
        p = flash.defaults(kernel.ops[0], kernel, target)
        lanes = target.vector_bits // 32
        assert p["tile_q"] * p["key_vectors"] + p["key_vectors"] + 1 <= target.vector_registers
        assert p["block_k"] % (p["key_vectors"] * lanes) == 0
        assert 2 * p["block_k"] * 2 * 128 * 4 <= target.l2_bytes
    assert flash.defaults(kernel.ops[0], kernel, get_target("cpu-avx2"))["block_k"] <= 128


def test_ir_text_round_trips():
    from braze import parse_ir

    module = import_onnx(attention_model([1, 2, 8, D], [1, 2, 8, D], [1, 2, 8, D], is_causal=1, softcap=3.0))
    text = str(module)
    assert '"nn.attention"' in text and "causal = true" in text
    assert str(parse_ir(text)) == text


@pytest.mark.parametrize("attrs, needle", [
    (dict(softmax_precision=7), "softmax_precision=7"),
    (dict(qk_matmul_output_mode=4), "qk_matmul_output_mode=4"),
    (dict(left_window_size=-3), "left_window_size=-3"),
])
def test_unsupported_attribute_values_are_refused_by_name(attrs, needle):
    model = attention_model([1, 2, 8, D], [1, 2, 8, D], [1, 2, 8, D], opset=25, **attrs)
    with pytest.raises(OnnxImportError, match=needle):
        import_onnx(model)


def test_3d_inputs_need_head_counts():
    with pytest.raises(OnnxImportError, match="q_num_heads"):
        import_onnx(attention_model([1, 8, 2 * D], [1, 8, 2 * D], [1, 8, 2 * D]))


def test_ascend_estimate_counts_both_gemms_on_the_cube():
    from braze.compiler import fuse_only

    _, report = fuse_only(attention_model([1, 128, 4 * D], [1, 128, 4 * D], [1, 128, 4 * D], q_num_heads=4,
                                          kv_num_heads=4), 2, target="ascend910b-like")
    (kernel,) = [k for k in report.estimate["kernels"] if k["nodes"] == ["Attention_0"]]
    assert kernel["cube_flops"] >= 4 * 4 * 128 * 128 * D  # q k^T and p v, 2 flops a multiply-add
    assert kernel["vector_ops"] >= 4 * 128 * 128


def test_attention_builds_for_cuda(tmp_path):
    from braze.codegen.gpu import nvcc_path

    if nvcc_path() is None:
        pytest.skip("CUDA's compiler (nvcc) is not installed: CUDA code generation cannot be checked")
    artifact = braze.compile(attention_model([1, 64, 2 * D], [1, 64, 2 * D], [1, 64, 2 * D], q_num_heads=2,
                                             kv_num_heads=2, is_causal=1), target="cuda-sm90")
    assert len(artifact.kernels) == 1
    artifact.save(str(tmp_path / "attention.braze"))
