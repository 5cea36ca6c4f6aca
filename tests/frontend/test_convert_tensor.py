"""Numerics of the shape and data-movement converters vs onnxruntime.

Resize and Upsample are in test_convert_resize.py.
"""

import numpy as np
import pytest

from braze.errors import DynamicShapeError, OnnxImportError
from braze.frontend import import_onnx
from braze.ir.interpret import interpret
from onnx_check import check_against_ort, parse


def head(opset: int) -> str:
    return f'<ir_version: 8, opset_import: ["" : {opset}]>'


def ops_of(module) -> list[str]:
    return [op.name for op in module.main.body.ops]


# --- reshapes -----------------------------------------------------------------------
@pytest.mark.parametrize("shape,out", [("0, -1", "2,12"), ("-1", "24"), ("4, 0, 2", "4,3,2"), ("2, 3, 4", "2,3,4")])
def test_reshape(shape, out):
    check_against_ort(f"{head(14)} g (float[2,3,4] x) => (float[{out}] y) "
                      f"<int64[{len(shape.split(','))}] s = {{{shape}}}> {{ y = Reshape(x, s) }}")


def test_reshape_allowzero():
    check_against_ort(f"{head(14)} g (float[2,0] x) => (float[0,5] y) <int64[2] s = {{0, 5}}> "
                      "{ y = Reshape<allowzero=1>(x, s) }")


def test_reshape_v1_attribute():
    check_against_ort(f"{head(4)} g (float[2,3,4] x) => (y) {{ y = Reshape<shape=[3, -1, 0]>(x) }}")


@pytest.mark.parametrize("perm", ["", "<perm=[1, 0, 2]>", "<perm=[2, 0, 1]>"])
def test_transpose(perm):
    check_against_ort(f"{head(13)} g (float[2,3,4] x) => (y) {{ y = Transpose{perm}(x) }}")


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
def test_flatten(axis):
    check_against_ort(f"{head(13)} g (float[2,3,4] x) => (y) {{ y = Flatten<axis={axis}>(x) }}")


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axes", [None, [1], [-1, 1]])
def test_squeeze(opset, axes):
    if axes is None:
        node = "Squeeze(x)"
    elif opset < 13:
        node = f"Squeeze<axes={axes}>(x)"
    else:
        node = "Squeeze(x, a)"
    init = f"<int64[{len(axes)}] a = {{{', '.join(map(str, axes))}}}>" if axes and opset >= 13 else ""
    check_against_ort(f"{head(opset)} g (float[2,1,3,1] x) => (y) {init} {{ y = {node} }}")


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axes", [[0], [1, 3], [-1, 0]])
def test_unsqueeze(opset, axes):
    ints = ", ".join(map(str, axes))
    if opset < 13:
        text = f"{head(opset)} g (float[2,3] x) => (y) {{ y = Unsqueeze<axes=[{ints}]>(x) }}"
    else:
        text = f"{head(opset)} g (float[2,3] x) => (y) <int64[{len(axes)}] a = {{{ints}}}> {{ y = Unsqueeze(x, a) }}"
    check_against_ort(text)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(mode):
    check_against_ort(f'{head(13)} g (float[2,8,2,3] x) => (y) {{ y = DepthToSpace<blocksize=2, mode="{mode}">(x) }}')


def test_space_to_depth():
    check_against_ort(f"{head(13)} g (float[2,3,4,6] x) => (y) {{ y = SpaceToDepth<blocksize=2>(x) }}")


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_space_to_depth_mode(mode):  # opset 28
    check_against_ort(f'{head(28)} g (float[2,3,4,6] x) => (y) {{ y = SpaceToDepth<blocksize=2, mode="{mode}">(x) }}')


# --- joining and cutting ------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(axis):
    shapes = {0: ("1,3,4", "2,3,4"), 1: ("2,1,4", "2,2,4"), -1: ("2,3,1", "2,3,5")}[axis]
    check_against_ort(f"{head(13)} g (float[{shapes[0]}] a, float[{shapes[1]}] b, float[{shapes[1]}] c) => (y) "
                      f"{{ y = Concat<axis={axis}>(a, b, c) }}")


@pytest.mark.parametrize("text", [
    # opset 11: sizes as an attribute, or equal parts
    f"{head(11)} g (float[2,6] x) => (a, b) {{ a, b = Split<axis=1, split=[2, 4]>(x) }}",
    f"{head(11)} g (float[2,6] x) => (a, b, c) {{ a, b, c = Split<axis=-1>(x) }}",
    # opset 13: sizes as an input
    f"{head(13)} g (float[6,2] x) => (a, b) <int64[2] s = {{5, 1}}> {{ a, b = Split(x, s) }}",
    f"{head(13)} g (float[6,2] x) => (a, b) {{ a, b = Split(x) }}",
    # opset 18: num_outputs, the last part smaller
    f"{head(18)} g (float[7,2] x) => (a, b, c) {{ a, b, c = Split<num_outputs=3>(x) }}",
])
def test_split(text):
    check_against_ort(text)


SLICES = [  # starts, ends, axes, steps
    ([1], [3], None, None),
    ([0, 1], [2, -1], [0, 2], None),
    ([-3], [-1], [-1], None),
    ([0], [2 ** 63 - 1], [1], [2]),
    ([-1], [-2 ** 63], [2], [-1]),  # full reversal through INT_MIN
    ([3, 5], [0, 1], [1, 2], [-2, -3]),
    ([10], [20], [0], None),  # clamped to empty
    ([2], [0], [2], [1]),  # empty
]


@pytest.mark.parametrize("starts,ends,axes,steps", SLICES)
def test_slice(starts, ends, axes, steps):
    def init(name, v):
        return f"int64[{len(v)}] {name} = {{{', '.join(map(str, v))}}}" if v is not None else None

    inits = [init("s", starts), init("e", ends), init("a", axes), init("t", steps)]
    args = ", ".join(["x", "s", "e", "a" if axes else "", "t" if steps else ""]).rstrip(", ")
    check_against_ort(f"{head(13)} g (float[3,4,6] x) => (y) <{', '.join(i for i in inits if i)}> "
                      f"{{ y = Slice({args}) }}")


def test_slice_v1_attributes():
    check_against_ort(f"{head(9)} g (float[3,4] x) => (y) "
                      "{ y = Slice<starts=[1, -3], ends=[1000, -1], axes=[0, 1]>(x) }")


# --- gathers ------------------------------------------------------------------------
@pytest.mark.parametrize("axis,idx", [(0, "{2, -1, 0}"), (1, "{-4, 3}"), (-1, "{1}")])
def test_gather(axis, idx):
    n = idx.count(",") + 1
    check_against_ort(f"{head(13)} g (float[3,4,5] x) => (y) <int64[{n}] i = {idx}> "
                      f"{{ y = Gather<axis={axis}>(x, i) }}")


def test_gather_scalar_index_runtime():
    check_against_ort(f"{head(13)} g (float[3,4] x, int32[2,2] i) => (y) {{ y = Gather<axis=1>(x, i) }}",
                      {"x": np.arange(12, dtype=np.float32).reshape(3, 4),
                       "i": np.array([[0, -1], [3, -4]], np.int32)})


@pytest.mark.parametrize("batch_dims,data,idx,values", [
    (0, "2,3,4", "2,2", [[1, -1], [0, 2]]),
    (0, "2,3,4", "3,1", [[1], [0], [-1]]),
    (0, "2,3,4", "2,3", [[1, 2, 3], [0, -1, -4]]),
    (1, "2,3,4", "2,1", [[2], [-3]]),
    (1, "2,3,4", "2,2,2", [[[0, 1], [2, 3]], [[1, 0], [0, -1]]]),
])
def test_gather_nd(batch_dims, data, idx, values):
    check_against_ort(f"{head(13)} g (float[{data}] x, int64[{idx}] i) => (y) "
                      f"{{ y = GatherND<batch_dims={batch_dims}>(x, i) }}",
                      {"x": np.random.default_rng(0).standard_normal([int(d) for d in data.split(",")], np.float32),
                       "i": np.array(values, np.int64)})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements(axis):
    rng = np.random.default_rng(1)
    check_against_ort(f"{head(13)} g (float[3,4] x, int64[2,3] i) => (y) {{ y = GatherElements<axis={axis}>(x, i) }}",
                      {"x": rng.standard_normal((3, 4), np.float32), "i": rng.integers(-3, 3, (2, 3))})


# --- broadcasting, tiling, padding --------------------------------------------------
@pytest.mark.parametrize("x,shape", [("3,1", "2,1,4"), ("2,3", "3"), ("1,3", "4,1"), ("3", "1")])
def test_expand(x, shape):
    n = shape.count(",") + 1
    check_against_ort(f"{head(13)} g (float[{x}] x) => (y) <int64[{n}] s = {{{shape}}}> {{ y = Expand(x, s) }}")


def test_tile():
    check_against_ort(f"{head(13)} g (int64[2,3] x) => (y) <int64[2] r = {{3, 2}}> {{ y = Tile(x, r) }}")


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads", ["0, 1, 2, 1", "1, -1, 0, 2", "0, 0, 0, 0"])
def test_pad(mode, pads):
    check_against_ort(f'{head(19)} g (float[3,4] x) => (y) <int64[4] p = {{{pads}}}, float v = {{1.5}}> '
                      f'{{ y = Pad<mode="{mode}">(x, p, v) }}')


def test_pad_axes():
    check_against_ort(f'{head(18)} g (int32[2,3,4] x) => (y) <int64[4] p = {{1, 2, 0, 3}}, int32 v = {{7}}, '
                      f'int64[2] a = {{-1, 0}}> {{ y = Pad(x, p, v, a) }}')


def test_pad_v2_attributes():
    check_against_ort(f'{head(9)} g (float[2,3] x) => (y) {{ y = Pad<pads=[1, 0, 0, 2], value=-2.0>(x) }}')


# --- constants and shape queries ----------------------------------------------------
def test_shape_chain_folds():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as exporters emit it."""
    module = check_against_ort(f"""{head(13)} g (float[2,3,4] x) => (y) <int64[1] minus1 = {{-1}}, int64 zero = {{0}},
        int64[1] ax = {{0}}> {{
        s = Shape(x)
        n = Gather<axis=0>(s, zero)
        n1 = Unsqueeze(n, ax)
        target = Concat<axis=0>(n1, minus1)
        y = Reshape(x, target)
    }}""")
    reshape = [op for op in module.main.body.ops if op.name == "tensor.reshape"][-1]
    assert reshape.attributes["shape"] == (2, 12)


@pytest.mark.parametrize("attrs", ["", "<start=1>", "<start=-2, end=-1>", "<end=10>", "<start=2, end=1>"])
def test_shape(attrs):
    check_against_ort(f"{head(15)} g (float[2,3,4] x) => (y) {{ y = Shape{attrs}(x) }}")


def test_size():
    check_against_ort(f"{head(13)} g (float[2,3,4] x) => (y) {{ y = Size(x) }}")


@pytest.mark.parametrize("value", ["", "<value=int64[1] {7}>", "<value=float[1] {2.5}>"])
def test_constant_of_shape(value):
    check_against_ort(f"{head(13)} g (float[2] x) => (y) <int64[2] s = {{2, 3}}> {{ y = ConstantOfShape{value}(s) }}")


@pytest.mark.parametrize("attr", ["value=float[2,2] {1, 2, 3, 4}", "value_float=2.5", "value_floats=[1.0, 2.0]",
                                  "value_int=3", "value_ints=[1, 2, 3]"])
def test_constant(attr):
    check_against_ort(f"{head(13)} g (float[1] x) => (y) {{ y = Constant<{attr}>() }}")


@pytest.mark.parametrize("dtype,start,limit,delta", [
    ("int64", 0, 5, 1), ("int32", 10, 2, -3), ("float", 0.5, 2.0, 0.1), ("float", 1.0, 1.0, 1.0)])
def test_range(dtype, start, limit, delta):
    check_against_ort(f"{head(13)} g (float[1] x) => (y) <{dtype} a = {{{start}}}, {dtype} b = {{{limit}}}, "
                      f"{dtype} c = {{{delta}}}> {{ y = Range(a, b, c) }}")


def test_identity_and_dropout():
    module = check_against_ort(f"{head(13)} g (float[2,3] x) => (y, m) {{ t = Identity(x) y, m = Dropout(t) }}")
    assert ops_of(module) == ["tensor.identity", "tensor.identity", "const", "func.return"]


@pytest.mark.parametrize("opset,dtype", [(7, np.float32), (10, np.bool_)])
def test_dropout_mask_before_opset_12(opset, dtype):
    # onnxruntime fills these old masks with zeros ("nothing dropped"); ONNX
    # (its reference too) means "kept", all true at inference, as from opset 12.
    x = np.ones((2, 3), np.float32)
    module = import_onnx(parse(f"{head(opset)} g (float[2,3] x) => (y, m) {{ y, m = Dropout(x) }}"))
    out = interpret(module, {"x": x})
    np.testing.assert_array_equal(out["y"], x)
    assert out["m"].dtype == dtype and out["m"].all()


def test_dropout_without_mask():
    module = check_against_ort(f"{head(13)} g (float[2,3] x) => (y) {{ y = Dropout(x) }}")
    assert ops_of(module) == ["tensor.identity", "func.return"]


# --- errors -------------------------------------------------------------------------
def test_runtime_shape_is_refused():
    model = parse(f"{head(13)} g (float[2,3] x, int64[2] s) => (y) {{ y = Reshape(x, s) }}")
    with pytest.raises(DynamicShapeError, match="'shape' is computed at run time"):
        import_onnx(model)


def test_dropout_training_is_refused():
    model = parse(f"{head(13)} g (float[2,3] x) => (y) <float r = {{0.5}}, bool t = {{1}}> {{ y = Dropout(x, r, t) }}")
    with pytest.raises(OnnxImportError, match="training_mode"):
        import_onnx(model)
