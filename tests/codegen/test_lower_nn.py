"""Numerics of the nn and normalization lowerings: compiled with TVM vs
onnxruntime. Convolutions and pooling: test_lower_conv.py. Each test
compiles one model of several nodes (one kernel each at level 0)."""

import numpy as np
import pytest

from compiled_check import check_compiled, check_compiled_vs_reference, graph
from onnx_check import parse, random_inputs


def _nodes(op: str, operand_types: list[list[str]], attrs: list[str] | None = None):
    """(signature, nodes, outputs) of one ``op`` node per operand list."""
    inputs, nodes, outputs = [], [], []
    for i, types in enumerate(operand_types):
        names = [f"x{i}_{j}" for j in range(len(types))]
        inputs += [f"{t} {n}" for t, n in zip(types, names)]
        nodes.append(f"y{i} = {op} {attrs[i] if attrs else ''} ({', '.join(names)})")
        outputs.append(f"y{i}")
    return ", ".join(inputs), nodes, outputs


MATMUL_CASES = [
    ["float[3,4]", "float[4,5]"],
    ["float[4]", "float[4,5]"],
    ["float[2,3,4]", "float[4]"],
    ["float[4]", "float[4]"],
    ["float[2,1,3,4]", "float[5,4,6]"],
    ["float[2,8,16]", "float[16,8]"],  # a shared 2-D weight
    ["float[1,3,8,4]", "float[1,3,4,8]"],  # attention scores
    ["float[4,3]", "float[1,2,3,5]"],
]


def test_matmul():
    check_compiled(graph(*_nodes("MatMul", MATMUL_CASES)))


@pytest.mark.parametrize("dtype", ["int32", "int64", "double"])
def test_matmul_dtypes(dtype):
    check_compiled(graph(*_nodes("MatMul", [[f"{dtype}[2,3]", f"{dtype}[3,2]"], [f"{dtype}[2,2,3]", f"{dtype}[3]"]])))


def test_matmul_model_shapes():
    """BERT-base's projections and attention products, batch 1, short sequence.
    Sums of 768 float32 products (|y| up to ~50) differ from onnxruntime's
    summation order by ~1e-6 relative: atol 1e-4."""
    check_compiled(graph(*_nodes("MatMul", [["float[1,32,768]", "float[768,768]"],
                                            ["float[1,12,32,64]", "float[1,12,64,32]"],
                                            ["float[1,12,32,32]", "float[1,12,32,64]"]])), rtol=1e-5, atol=1e-4)


EINSUM_CASES = [
    ("ij,jk->ik", ["float[2,3]", "float[3,4]"]),
    ("bij,bjk->bik", ["float[2,2,3]", "float[2,3,4]"]),
    ("ij,jk", ["float[2,3]", "float[3,4]"]),  # implicit output
    ("ji", ["float[2,3]"]),  # implicit output reorders
    ("ii->i", ["float[3,3]"]),
    ("ij->", ["float[2,3]"]),
    ("i,j->ij", ["float[2]", "float[3]"]),
    ("...ij,...jk->...ik", ["float[2,1,2,3]", "float[1,3,3,4]"]),
    ("bhid,bhjd->bhij", ["float[1,2,3,4]", "float[1,2,5,4]"]),
]


def test_einsum():
    attrs = [f'<equation="{eq}">' for eq, _ in EINSUM_CASES]
    check_compiled(graph(*_nodes("Einsum", [shapes for _, shapes in EINSUM_CASES], attrs), 12))


def test_einsum_ints():
    check_compiled(graph(*_nodes("Einsum", [["int32[2,3]", "int32[3,2]", "int32[2,2]"]],
                                 ['<equation="ij,jk,kl->il">']), 12))


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax(op):
    axes = [0, 1, -1, 2]
    sig, nodes, outputs = _nodes(op, [["float[2,3,4]"]] * len(axes), [f"<axis={a}>" for a in axes])
    sig += ", float[1,12,16,16] s"  # attention probabilities
    check_compiled(graph(sig, nodes + [f"z = {op} <axis=-1> (s)"], outputs + ["z"], 13))


@pytest.mark.parametrize("x", ["float[3,7]", "int64[3,7]", "int32[4,5,6]",  # ints: many ties
                               "int16[3,7]"])  # TVM sorts no int16: in int32
def test_topk(x):
    cases = [(3, -1, 1), (2, 0, 1), (4, 1, 0), (1, -2, 0), (0, -1, 1)]
    nodes = [f"v{i}, i{i} = TopK <axis={axis}, largest={largest}> (x, k{i})" for i, (_, axis, largest) in
             enumerate(cases)]
    constants = ", ".join(f"int64[1] k{i} = {{{k}}}" for i, (k, _, _) in enumerate(cases))
    outputs = [n for i in range(len(cases)) for n in (f"v{i}", f"i{i}")]
    check_compiled(graph(f"{x} x", nodes, outputs, 17, constants))


def test_topk_unsigned():
    """TVM sorts no uint32 or uint64: braze sorts int64 keys (uint64 with
    the top bit flipped). onnxruntime has neither: the references are the oracle."""
    x = np.array([[3, 2**64 - 1, 0, 2**63, 2**63 - 1, 7]], np.uint64)
    y = np.array([[3, 2**32 - 1, 0, 2**31, 2**31 - 1, 3]], np.uint32)
    nodes = ["v, i = TopK <axis=-1> (x, k)", "w, j = TopK <axis=-1, largest=0> (x, k)", "u, l = TopK (y, k)"]
    check_compiled_vs_reference(graph("uint64[1,6] x, uint32[1,6] y", nodes, ["v", "i", "w", "j", "u", "l"], 17,
                                      "int64[1] k = {4}"), {"x": x, "y": y})


@pytest.mark.parametrize("x", ["float[3,4]", "int32[3,4]", "double[2,3,2]"])
def test_cumsum(x):
    cases = [(axis, exclusive, reverse) for axis in (0, -1) for exclusive in (0, 1) for reverse in (0, 1)]
    nodes = [f"y{i} = CumSum <exclusive={e}, reverse={r}> (x, a{i})" for i, (_, e, r) in enumerate(cases)]
    constants = ", ".join(f"int32 a{i} = {{{axis}}}" for i, (axis, _, _) in enumerate(cases))
    check_compiled(graph(f"{x} x", nodes, [f"y{i}" for i in range(len(cases))], 17, constants))


def test_layer_norm():
    nodes = ["y0 = LayerNormalization (x0, s0, b0)",
             "y1 = LayerNormalization <axis=1, epsilon=0.001> (x1, s1, b1)",
             "y2 = LayerNormalization <axis=-2> (x2, s2)",
             "y3 = LayerNormalization <axis=-1, epsilon=1e-12> (x3, s3, b3)"]  # BERT's
    sig = ("float[2,3,8] x0, float[8] s0, float[8] b0, float[2,3,8] x1, float[3,8] s1, float[3,8] b1, "
           "float[2,3,4] x2, float[3,4] s2, float[1,16,768] x3, float[768] s3, float[768] b3")
    feeds = random_inputs(parse(graph(sig, nodes, ["y0"])))
    feeds["x3"] = feeds["x3"] * 2 + 10  # a mean far from 0: variance must not cancel
    check_compiled(graph(sig, nodes, ["y0", "y1", "y2", "y3"]), feeds, rtol=1e-5, atol=1e-5)


def test_batch_and_instance_norm():
    rng = np.random.default_rng(0)
    sig = ("float[2,3] a, float[1,3,4,5] b, float[2,3,2,3,2] c, float[3] s, float[3] bias, float[3] mean, "
           "float[3] var")
    nodes = ["ya = BatchNormalization <epsilon=0.01> (a, s, bias, mean, var)",
             "yb = BatchNormalization (b, s, bias, mean, var)",
             "zb = InstanceNormalization <epsilon=0.001> (b, s, bias)",
             "zc = InstanceNormalization (c, s, bias)"]
    text = graph(sig, nodes, ["ya", "yb", "zb", "zc"], 15)
    feeds = random_inputs(parse(text))
    feeds["var"] = rng.uniform(0.5, 2.0, 3).astype("f")
    check_compiled(text, feeds)


def test_lrn():
    attrs = ["<size=3>", "<size=1, alpha=0.01, beta=0.5, bias=2.0>", "<size=5, alpha=0.1>"]
    check_compiled(graph(*_nodes("LRN", [["float[2,6,3,4]"]] * len(attrs), attrs)))


def test_lrn_even_size():
    """onnxruntime refuses even sizes; the window is then one longer after
    the channel than before it: compare with braze's reference."""
    check_compiled_vs_reference(graph("float[2,6,3,4] x", ["y = LRN <size=4, alpha=0.2> (x)"], ["y"]))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_floats(dtype):
    """Every nn op on 16-bit floats (computed in float32, rounded once) vs
    the references; onnxruntime's CPU kernels take few of them."""
    nodes = ["a = Conv <pads=[1,1,1,1]> (x, w, b)", "c = MatMul (m, n)", "d = Softmax <axis=-1> (m)",
             "e = LayerNormalization (m, s)", "f = AveragePool <kernel_shape=[2,2]> (x)", "g = CumSum (m, ax)",
             "i = MaxPool <kernel_shape=[2,2]> (x)", "j = ConvTranspose (x, wt)", "v = LogSoftmax (m)",
             "k = BatchNormalization (x, bs, bs, bs, bv)", "l = InstanceNormalization (x, bs, bs)",
             "o = LRN <size=3> (x)", "p, q = TopK (m, kk)", 't = Einsum <equation="ij,jk->ik"> (m, n)']
    sig = (f"{dtype}[1,2,5,5] x, {dtype}[3,2,3,3] w, {dtype}[3] b, {dtype}[4,6] m, {dtype}[6,3] n, {dtype}[6] s, "
           f"{dtype}[2,3,2,2] wt, {dtype}[2] bs, {dtype}[2] bv")
    text = graph(sig, nodes, list("acdefgijvkloptq"), 17, "int32 ax = {1}, int64[1] kk = {2}")
    feeds = random_inputs(parse(text))
    feeds["bv"] = abs(feeds["bv"]) + 1  # a variance
    ulp = 2.0 ** (-10 if dtype == "float16" else -7)  # results may round the other way: one unit
    check_compiled_vs_reference(text, feeds, rtol=ulp, atol=ulp)
