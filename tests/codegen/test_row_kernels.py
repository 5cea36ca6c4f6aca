"""Row-wise kernels (softmax, layer norm): computed one row at a time, each
reduction vectorized along the row (schedules/generic.py, schedule_rows),
and 1-D convolutions made 2-D (canonicalize.conv_1d_as_2d) so that the
conv rules and the layout pass take them. Numerics against onnxruntime."""

import numpy as np
import pytest
from onnx import helper

from braze import compiler
from braze.codegen.kernel import partition
from braze.codegen.schedules import schedule_kernel
from braze.frontend import import_onnx
from braze.targets import get_target
from compiled_check import check_compiled, graph
from onnx_check import float_model, parse, random_inputs, run_ort


def _top_level_loops(func) -> int:
    """Loop nests directly under the kernel's root block."""
    from tvm import tirx

    body = func.body.block.body
    return len(body.seq) if isinstance(body, tirx.SeqStmt) else 1


def _kernel_funcs(model, level=2):
    module = import_onnx(model)
    compiler.pipeline(level).run(module)
    target = get_target("cpu")
    return [(k, schedule_kernel(k, target)) for k in partition(module.main)]


# rows of 128 (whole vectors), 100 and 1500 (no whole number of vectors:
# the partial results are split by a divisor of the row), 20 (under two
# vectors: scalar), 197 (prime: no divisor, the stages are scheduled one by one)
@pytest.mark.parametrize("n", [128, 100, 1500, 20, 197])
def test_softmax_and_layer_norm_rows(n):
    text = graph(f"float[2,3,{n}] x, float[{n}] g, float[{n}] b", [
        "s = Softmax<axis=-1>(x)",
        "y = LayerNormalization<axis=-1, epsilon=1e-5>(x, g, b)",
    ], [f"float[2,3,{n}] s", f"float[2,3,{n}] y"])
    model = parse(text)
    feeds = random_inputs(model)
    feeds["x"] = feeds["x"] * 4  # large logits: a wrong row max or sum shows
    got = compiler.compile(model, level=2).run(feeds)
    for name, want in run_ort(model, feeds).items():
        np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-5, err_msg=name)
    check_compiled(text, feeds)


@pytest.mark.parametrize("n, fused", [(128, True), (1500, True), (197, False)])
def test_softmax_row_fused(n, fused):
    # one loop nest over the rows holds every stage (max, exp, sum, divide)
    model = parse(graph(f"float[4,{n}] x", ["s = Softmax<axis=-1>(x)"], [f"float[4,{n}] s"]))
    [(kernel, func)] = _kernel_funcs(model)
    assert (_top_level_loops(func) == 1) == fused, func.script()
    if fused:  # every stage vectorized along the row: no scalar loop over all of it (1500: 100 x 15 lanes)
        assert f"range({n})" not in func.script(), func.script()


def test_long_rows_run_whole_vectors_then_a_short_one():
    """A row of 1500 (Whisper's attention) is no whole number of vectors:
    its elementwise stages run the row's whole vectors of the target's
    lanes, then the rest as one shorter vector (1500 = 93 x 16 + 12 with
    16 lanes), not vectors of 15 that LLVM splits into four pieces."""
    from braze.codegen.schedules.machine import lanes

    vec = lanes(get_target("cpu"))
    n = 1500
    model = parse(graph(f"float[4,{n}] x", ["s = Softmax<axis=-1>(x)"], [f"float[4,{n}] s"]))
    [(kernel, func)] = _kernel_funcs(model)
    script = func.script()
    assert f"T.vectorized({vec})" in script, script
    assert f"T.vectorized({n - n % vec}, {n})" in script, script


def _conv1d_model(stride: int = 1, group: int = 1, bn: bool = False):
    rng = np.random.default_rng(0)
    c, m, k = 32, 32, 3
    weights = {"w": rng.standard_normal((m, c // group, k)).astype(np.float32) * 0.2,
               "w2": rng.standard_normal((m, m, 1)).astype(np.float32) * 0.2,
               "bias": rng.standard_normal(m).astype(np.float32)}
    nodes = [("Conv", ["x", "w", "bias"], ["c1"], {"pads": [1, 1], "strides": [stride], "group": group})]
    last = "c1"
    if bn:
        weights.update({"scale": rng.random(m).astype(np.float32) + 0.5,
                        "shift": rng.standard_normal(m).astype(np.float32),
                        "mean": rng.standard_normal(m).astype(np.float32),
                        "var": rng.random(m).astype(np.float32) + 0.5})
        nodes.append(("BatchNormalization", ["c1", "scale", "shift", "mean", "var"], ["bn"], {}))
        last = "bn"
    nodes += [("Gelu", [last], ["g"], {}), ("Conv", ["g", "w2"], ["c2"], {}), ("Relu", ["c2"], ["y"], {})]
    made = [helper.make_node(op, ins, outs, **attrs) for op, ins, outs, attrs in nodes]
    return float_model(made, [("x", [1, c, 40])], ["y"], weights, opset=20)


@pytest.mark.parametrize("stride, group, bn", [(1, 1, False), (2, 1, False), (1, 32, False), (1, 1, True)])
def test_conv1d_as_conv2d(stride, group, bn):
    model = _conv1d_model(stride, group, bn)
    module = import_onnx(model)
    compiler.pipeline(2).run(module)
    ops = [op.name for op in module.walk()]
    assert not [op for op in module.walk() if op.name == "nn.conv" and op.results[0].type.rank == 3]
    assert "nn.batch_norm" not in ops  # folded into the 2-D conv's weights
    # the GELU joins its conv's kernel (the reshapes sink below it and cancel between the convs)
    kernels = partition(module.main)
    assert any({n.split("_")[0] for n in k.nodes} >= {"Conv", "Gelu"} for k in kernels), [k.nodes for k in kernels]
    assert sum(op == "tensor.reshape" for op in ops) == 2, ops  # the input's and the output's
    feeds = random_inputs(model)
    got = compiler.compile(model, level=2).run(feeds)
    np.testing.assert_allclose(got["y"], run_ort(model, feeds)["y"], rtol=1e-4, atol=1e-4)
