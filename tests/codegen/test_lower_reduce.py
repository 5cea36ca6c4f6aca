"""Numerics of the reduce lowerings: compiled with TVM vs onnxruntime.

Each test compiles one model holding several nodes (one kernel each at
level 0), so a handful of compiles covers every op, axis set and dtype.
"""

import numpy as np
import pytest

from compiled_check import check_compiled, check_compiled_vs_reference, graph
from onnx_check import parse, random_inputs


REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2"]
AXES = [("[0,1,2]", 1), ("[1]", 1), ("[0,2]", 0), ("[-1]", 0), ("[2,-3]", 1)]


def _reduce_nodes(ops, axes_list):
    nodes, outputs = [], []
    for op in ops:
        for j, (axes, keepdims) in enumerate(axes_list):
            out = f"{op.lower()}{j}"
            nodes.append(f"{out} = {op} <axes={axes}, keepdims={keepdims}> (x)")
            outputs.append(out)
    return nodes, outputs


@pytest.mark.parametrize("dtype", ["float", "double", "float16"])
def test_reduce_floats(dtype):
    nodes, outputs = _reduce_nodes(REDUCE, AXES)
    rtol = 1e-3 if dtype == "float16" else 1e-5  # f16 results round to 11 bits
    check_compiled(graph(f"{dtype}[2,3,4] x", nodes, outputs, 11), rtol=rtol, atol=rtol)


@pytest.mark.parametrize("dtype, ops, opset", [
    ("int32", REDUCE, 11), ("int64", REDUCE, 11),
    ("int8", ["ReduceMax", "ReduceMin"], 13), ("uint8", ["ReduceMax", "ReduceMin"], 13),  # ONNX: only these
])
def test_reduce_ints(dtype, ops, opset):
    text = graph(f"{dtype}[3,4,5] x", *_reduce_nodes(ops, AXES[:3]), opset)
    feeds = random_inputs(parse(text))
    if dtype.startswith("int"):  # negative values: mean truncates towards zero
        feeds["x"] = (feeds["x"] - 2).astype(feeds["x"].dtype)
    check_compiled(text, feeds)


def test_reduce_mean_large_layout():
    """The global average pool of a CNN head and a transformer's mean over hidden."""
    check_compiled(graph("float[1,64,7,7] x, float[1,16,96] t",
                         ["y = ReduceMean <axes=[2,3], keepdims=1> (x)", "z = ReduceMean <axes=[-1]> (t)"],
                         ["y", "z"], 13))


def test_reduce_max_min_bool():
    """ReduceMax/Min take bool since opset 20."""
    check_compiled('<ir_version: 8, opset_import: ["" : 20]> g (bool[3,4] x) => (y, z) '
                   '<int64[1] a = {1}, int64[1] b = {0}> '
                   '{ y = ReduceMax <keepdims=1> (x, a) z = ReduceMin <keepdims=0> (x, b) }')


@pytest.mark.parametrize("dtype", ["float", "int32"])  # int32 inputs in [0, 5): many ties
def test_arg_reduce(dtype):
    attrs = ["", "<axis=1>", "<axis=-1, keepdims=0>", "<axis=2, select_last_index=1>",
             "<axis=0, keepdims=0, select_last_index=1>"]
    nodes, outputs = [], []
    for op in ("ArgMax", "ArgMin"):
        for j, a in enumerate(attrs):
            outputs.append(f"{op.lower()}{j}")
            nodes.append(f"{outputs[-1]} = {op} {a} (x)")
    check_compiled(graph(f"{dtype}[3,4,5] x", nodes, outputs, 13))


def test_nan_and_infinities_follow_numpy():
    """NaN wins max, min, argmax and argmin (the first NaN's index) in any
    order, as in numpy; onnxruntime skips NaN there, so the references are
    the oracle. A row of -inf has max -inf, not the lowest finite float."""
    nodes = ["a = ReduceMax <axes=[1]> (x)", "b = ReduceMin <axes=[1]> (x)", "c = ArgMax <axis=1> (x)",
             "d = ArgMin <axis=1, select_last_index=1> (x)", "e = MaxPool <kernel_shape=[1,2]> (p)"]
    x = np.array([[1, np.nan, 3, np.nan], [2, 5, 1, np.nan], [-np.inf] * 4, [np.nan, 0, 0, 1]], "f")
    check_compiled_vs_reference(graph("float[4,4] x, float[1,1,4,4] p", nodes, list("abcde"), 11),
                                {"x": x, "p": x.reshape(1, 1, 4, 4)})


def test_reductions_over_an_empty_dim():
    """A reduction over no element gives its identity (0, 1, -inf, inf),
    as a MatMul over an empty inner dim gives 0: TVM alone would leave the
    output unwritten (its initial value sits inside the empty loop)."""
    ops = ["ReduceSum", "ReduceProd", "ReduceMax", "ReduceMin", "ReduceL2"]
    nodes = [f"{op.lower()} = {op} <axes=[1]> (x)" for op in ops] + ["m = MatMul (a, b)"]
    outputs = [op.lower() for op in ops] + ["m"]
    check_compiled_vs_reference(graph("float[2,0,4] x, float[3,0] a, float[0,2] b", nodes, outputs, 11))
