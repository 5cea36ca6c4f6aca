"""canonicalize keeps the numbers: imported models before and after the pass
agree with onnxruntime (the reference interpreter runs the IR)."""

import numpy as np
import pytest

from onnx_check import check_against_ort

HEAD = '<ir_version: 8, opset_import: ["" : 17]>'
RNG = np.random.default_rng(0)


def floats(n):
    return ",".join(f"{v:.3f}" for v in RNG.standard_normal(n))


CASES = {
    "conv_bn": f"""{HEAD} g (float[1,2,5,5] x) => (float[1,3,5,5] y)
        <float[3,2,3,3] w = {{{floats(54)}}}, float[3] b = {{{floats(3)}}}, float[3] s = {{1,2,0.5}},
         float[3] t = {{0,1,-1}}, float[3] mu = {{0.5,0,1}}, float[3] var = {{1,4,0.25}}> {{
        c = Conv<pads = [1,1,1,1]>(x, w, b)
        y = BatchNormalization<epsilon = 1e-3>(c, s, t, mu, var) }}""",
    "conv_nobias_bn_relu": f"""{HEAD} g (float[1,2,5,5] x) => (float[1,3,5,5] y)
        <float[3,2,1,1] w = {{{floats(6)}}}, float[3] s = {{1,-2,0.5}},
         float[3] t = {{0,1,-1}}, float[3] mu = {{0.5,0,1}}, float[3] var = {{1,4,0.25}}> {{
        c = Conv(x, w)
        n = BatchNormalization(c, s, t, mu, var)
        y = Relu(n) }}""",
    "gemm_bn": f"""{HEAD} g (float[4,3] x) => (float[4,2] y)
        <float[2,3] w = {{{floats(6)}}}, float[2] c = {{1,-1}}, float[2] s = {{2,3}}, float[2] t = {{1,0}},
         float[2] mu = {{0,1}}, float[2] var = {{3,8}}> {{
        g1 = Gemm<transB = 1, alpha = 0.5, beta = 2.0>(x, w, c)
        y = BatchNormalization<epsilon = 1.0>(g1, s, t, mu, var) }}""",
    "matmul_scale_shift": f"""{HEAD} g (float[2,4,3] x) => (float[2,4,2] y)
        <float[3,2] w = {{{floats(6)}}}, float[2] a = {{1,2}}, float[2] s = {{0.5,-3}}, float[1] t = {{0.25}}> {{
        m = MatMul(x, w)
        p = Add(m, a)
        q = Mul(p, s)
        y = Add(q, t) }}""",
    "standalone_bn": f"""{HEAD} g (float[2,3,4] x) => (float[2,3,4] y)
        <float[3] s = {{1,2,3}}, float[3] t = {{0,1,2}}, float[3] mu = {{0,0.5,1}}, float[3] var = {{1,2,3}}> {{
        y = BatchNormalization(x, s, t, mu, var) }}""",
    "shape_chain": f"""{HEAD} g (float[2,3,4] x) => (float[6,4] y) {{
        s = Shape(x)
        i = Constant<value = int64[2] {{0, 1}}>()
        d = Gather<axis = 0>(s, i)
        p = ReduceProd<keepdims = 1>(d)
        m = Constant<value = int64[1] {{-1}}>()
        shape = Concat<axis = 0>(p, m)
        y = Reshape(x, shape) }}""",
}


@pytest.mark.parametrize("name", CASES)
def test_canonicalized_module_matches_onnxruntime(name):
    module = check_against_ort(CASES[name], rtol=1e-5, atol=1e-5, pipeline="canonicalize,cse,dce")
    names = [op.name for op in module.main.body.ops]
    assert "nn.batch_norm" not in names and "tensor.shape" not in names


def test_a_transposed_weight_folds_past_the_fold_limit(monkeypatch):
    """A Gemm's transB of a constant larger than FOLD_LIMIT still folds
    (moving costs a copy, never more), so the matmul reads a plain weight
    that its schedule rule can pack; arithmetic on it does not."""
    import braze.ir.fold as fold

    monkeypatch.setattr(fold, "FOLD_LIMIT", 4)
    text = f"""{HEAD} g (float[4,3] x) => (float[4,2] y, float[2,3] z)
        <float[2,3] w = {{{floats(6)}}}> {{
        y = Gemm<transB = 1>(x, w)
        z = Add(w, w) }}"""
    module = check_against_ort(text, pipeline="canonicalize,cse,dce")
    names = [op.name for op in module.main.body.ops]
    assert "tensor.transpose" not in names and "math.add" in names


def test_a_splat_weight_stays_a_splat_when_transposed():
    """ConstantOfShape weights (the onnx wheel's light models) transposed or
    reshaped stay one-value constants: nothing is materialized."""
    text = f"""{HEAD} g (float[4,3] x) => (float[4,2] y) <int64[2] shape = {{2, 3}}> {{
        w = ConstantOfShape<value = float[1] {{0.5}}>(shape)
        y = Gemm<transB = 1>(x, w) }}"""
    module = check_against_ort(text, pipeline="canonicalize,cse,dce")
    consts = [op for op in module.main.body.ops if op.name == "const"]
    assert "tensor.transpose" not in [op.name for op in module.main.body.ops]
    assert any(getattr(op.attributes["value"], "splat", False) and op.result.type.shape == (3, 2) for op in consts)
