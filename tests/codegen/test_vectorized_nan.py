"""NaN tests that TVM's loop vectorizer keeps as vector code.

``tirx.isnan`` makes the vectorizer scalarize the whole loop: a matmul's
GELU epilogue (whose fast erf keeps NaN) ran one element at a time and cost
a third of bert's FFN matmul. ``fast.is_nan`` tests the bits instead.
"""

import numpy as np
import pytest
import tvm
from onnx import helper
from tvm import s_tir, te, tirx

from braze.codegen.lowerings import fast
from onnx_check import float_model as _model
from schedule_check import check_numerics, weight

SPECIALS = [0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, -np.nan, 1e-40, 65504.0]


def _vectorized(expr_of, dtype: str):
    x = te.placeholder((64,), dtype, name="x")
    y = te.compute(x.shape, lambda i: expr_of(x(i)), name="y")
    sch = s_tir.Schedule(te.create_prim_func([x, y]))
    (i,) = sch.get_loops(sch.get_sblock("y"))
    sch.vectorize(sch.split(i, [None, 8])[1])
    return sch.mod, x, y


def _scalarized(mod) -> bool:
    """Whether VectorizeLoop fell back to a scalar loop (it names it ``*_s``)."""
    passes = [s_tir.transform.LowerInitBlock(), s_tir.transform.ConvertBlocksToOpaque(),
              s_tir.transform.LowerOpaqueBlock(), tirx.transform.FlattenBuffer(), tirx.transform.VectorizeLoop(True)]
    text = tvm.ir.transform.Sequential(passes)(mod).script()
    return "_s in" in text


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_is_nan_is_exact(dtype):
    mod, _, _ = _vectorized(lambda v: tirx.Select(fast.is_nan(v), tirx.const(1, dtype), tirx.const(0, dtype)), dtype)
    lib = tvm.compile(mod, target="llvm")
    data = np.resize(np.array(SPECIALS, dtype), 64)
    out = tvm.runtime.empty((64,), dtype)
    lib(tvm.runtime.tensor(data), out)
    np.testing.assert_array_equal(out.numpy(), np.isnan(data).astype(dtype))


def test_is_nan_vectorizes_where_isnan_does_not():
    one, zero = tirx.const(1.0, "float32"), tirx.const(0.0, "float32")
    assert _scalarized(_vectorized(lambda v: tirx.Select(tirx.isnan(v), one, zero), "float32")[0])  # TVM's
    assert not _scalarized(_vectorized(lambda v: tirx.Select(fast.is_nan(v), one, zero), "float32")[0])


def test_fast_erf_vectorizes():
    x = te.placeholder((64,), "float32", name="x")
    sch = s_tir.Schedule(te.create_prim_func([x, fast.erf(x)]))
    *inner, last = sch.get_child_blocks(sch.get_sblock("root"))
    for block in inner:
        sch.compute_inline(block)
    sch.vectorize(sch.split(sch.get_loops(last)[0], [None, 8])[1])
    assert not _scalarized(sch.mod)


def test_gelu_epilogue_keeps_nan():
    """A matmul + GELU (erf form) kernel: NaN in, NaN out, the rest as onnxruntime."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Div", ["y", "s"], ["d"]),
             helper.make_node("Erf", ["d"], ["e"]), helper.make_node("Add", ["e", "one"], ["a"]),
             helper.make_node("Mul", ["y", "a"], ["p"]), helper.make_node("Mul", ["p", "half"], ["out"])]
    model = _model(nodes, [("x", [6, 16])], ["out"], {"w": weight(16, 32), "s": np.float32(1.4142135),
                                                      "one": np.float32(1), "half": np.float32(0.5)})
    art = check_numerics(model)
    x = np.ones((6, 16), np.float32)
    x[2, 3] = np.nan
    got = art.run({"x": x})["out"]
    assert np.isnan(got[2]).all() and not np.isnan(np.delete(got, 2, axis=0)).any()


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_row_extremes_keep_numpys_rules(op):
    """A max (min) along rows long enough for the vectorized form
    (lowerings/reduce.py ``_along_rows``): NaN wins, a row of infinities
    gives the infinity, a row holding the lowest (highest) finite float
    gives it, as numpy does."""
    from compiled_check import check_compiled_vs_reference, graph

    lowest = np.finfo(np.float32).min if op == "ReduceMax" else np.finfo(np.float32).max
    worst = -np.inf if op == "ReduceMax" else np.inf
    rows = np.random.default_rng(0).standard_normal((5, 64)).astype(np.float32)
    rows[1, 17] = np.nan
    rows[2, :] = worst
    rows[3, :] = worst
    rows[3, 40] = lowest
    rows[4, 63] = np.nan
    rows[4, 0] = worst
    text = graph("float[5,64] x", [f"y = {op} <keepdims=0> (x, axes)"], ["y"], opset=18,
                 constants="int64[1] axes = {-1}")
    check_compiled_vs_reference(text, {"x": rows}, rtol=0, atol=0)
