"""Numerics of the reduction converters vs onnxruntime."""

import numpy as np
import pytest

from onnx_check import check_against_ort, parse, random_inputs

REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceL1",
          "ReduceSumSquare", "ReduceLogSum"]
AXES_INPUT_SINCE = {"ReduceSum": 13}


def check(x: str, body: str, opset: int, constants: str = ""):
    constants = f"<{constants}>" if constants else ""
    model = parse(f'<ir_version: 8, opset_import: ["" : {opset}]> g ({x} x) => (y) {constants} {{ {body} }}')
    feeds = random_inputs(model)
    if "LogSum" in body:  # the log of a positive sum
        feeds["x"] = np.abs(feeds["x"])
    return check_against_ort(model, feeds)


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("axes, keepdims", [(None, 1), ((1,), 1), ((0, 2), 0), ((-1,), 0), ((2, -3), 1)])
@pytest.mark.parametrize("new_opset", [False, True])
def test_reduce(op, axes, keepdims, new_opset):
    """Axes as an attribute (old opsets) and as an input (13 for ReduceSum, else 18)."""
    if new_opset:
        constants = "" if axes is None else f"int64[{len(axes)}] axes = {{{', '.join(map(str, axes))}}}"
        check("float[2,3,4]", f"y = {op} <keepdims={keepdims}> (x{', axes' if axes else ''})",
              AXES_INPUT_SINCE.get(op, 18), constants)
    else:
        attrs = f"keepdims={keepdims}" + ("" if axes is None else f", axes=[{', '.join(map(str, axes))}]")
        check("float[2,3,4]", f"y = {op} <{attrs}> (x)", 11)


@pytest.mark.parametrize("op", REDUCE)
def test_reduce_noop_with_empty_axes(op):
    check("float[2,3]", f"y = {op} <noop_with_empty_axes=1> (x, axes)", AXES_INPUT_SINCE.get(op, 18),
          "int64[0] axes = {}")


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2"])
@pytest.mark.parametrize("dtype", ["int32", "int64", "double"])
def test_reduce_dtypes(op, dtype):
    check(f"{dtype}[3,4]", f"y = {op} <axes=[1]> (x)", 11)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("attrs", ["", "<axis=1>", "<axis=-1, keepdims=0>", "<axis=2, select_last_index=1>",
                                   "<axis=0, keepdims=0, select_last_index=1>"])
@pytest.mark.parametrize("dtype", ["float", "int32"])  # int32 inputs in [0, 5): many ties
def test_arg_reduce(op, attrs, dtype):
    check(f"{dtype}[3,4,5]", f"y = {op} {attrs} (x)", 13)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_reduce_opset_11(op):
    check("float[3,4]", f"y = {op} <axis=1> (x)", 11)
