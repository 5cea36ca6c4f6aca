"""Numerics of the data-movement and gather lowerings: compiled with TVM vs
onnxruntime. Resize: test_lower_resize.py. Each test compiles one model of
several nodes (one kernel each at level 0); inputs are runtime values, so
nothing folds away before codegen.
"""

import numpy as np
import pytest

from braze.codegen import build
from braze.runtime.manifest import io_spec as _spec
from braze.ir import parse_module
from braze.ir.interpret import interpret
from braze.runtime.artifact import Artifact
from braze.targets import get_target
from compiled_check import check_compiled, graph
from onnx_check import parse, random_inputs


def ints(name: str, values) -> str:
    return f"int64[{len(values)}] {name} = {{{', '.join(map(str, values))}}}"


# Slices as (starts, ends, axes, steps) of a [3,4,6] input: clamping, negative
# steps through index 0 (ONNX's INT_MIN end), and empty results.
SLICES = [([1], [3], [0], [1]), ([0, 1], [2, -1], [0, 2], [1, 1]), ([-1], [-2 ** 63], [2], [-1]),
          ([3, 5], [0, 1], [1, 2], [-2, -3]), ([0], [2 ** 63 - 1], [1], [2]), ([2], [0], [2], [1]),
          ([10], [20], [0], [1]), ([-1, 4], [-2 ** 63, -2 ** 63], [0, 2], [-2, -4])]


def movement_model(dtype: str) -> str:
    """Every data-movement op but Pad on ``dtype`` inputs."""
    nodes = ["r = Reshape(x, rs)", "t = Transpose<perm=[2, 0, 1]>(x)", "c = Concat<axis=1>(x, z, x)",
             "s0, s1, s2 = Split<axis=2>(x, sp)", "e = Expand(v, es)", "u = Tile(x, tr)", "n = Identity(x)"]
    inits = [ints("rs", [4, -1, 2]), ints("sp", [1, 0, 5]), ints("es", [2, 3, 1]), ints("tr", [1, 2, 0])]
    outputs = ["r", "t", "c", "s0", "s1", "s2", "e", "u", "n"]
    for k, (starts, ends, axes, steps) in enumerate(SLICES):
        nodes.append(f"l{k} = Slice(x, b{k}, f{k}, a{k}, p{k})")
        inits += [ints(f"b{k}", starts), ints(f"f{k}", ends), ints(f"a{k}", axes), ints(f"p{k}", steps)]
        outputs.append(f"l{k}")
    return graph(f"{dtype}[3,4,6] x, {dtype}[3,2,6] z, {dtype}[3,1] v", nodes, outputs, 13, ", ".join(inits))


@pytest.mark.parametrize("dtype", ["float", "int64", "bool"])
def test_movement(dtype):
    check_compiled(movement_model(dtype))


def test_tile_on_several_axes():
    """Repeats on two or more axes at once, which LLVM (mcpu=znver5)
    miscompiled as one loop nest; and the tiles of onnx's own test."""
    nodes = ["a = Tile(x, ra)", "b = Tile(x, rb)", "c = Tile(y, rc)"]
    inits = [ints("ra", [1, 3, 4, 1]), ints("rb", [7, 6, 4, 2]), ints("rc", [3, 4, 2])]
    check_compiled(graph("float[2,3,4,5] x, float[3,4,5] y", nodes, ["a", "b", "c"], 13, ", ".join(inits)))


@pytest.mark.parametrize("dtype", ["float", "int32"])
def test_pad(dtype):
    """Every mode with pads, crops (negative pads, applied first) and none."""
    nodes, outputs, inits = [], [], [f"{dtype} v = {{7}}"]
    for mode in ["constant", "reflect", "edge", "wrap"]:
        for k, pads in enumerate([[0, 1, 2, 3], [1, -1, -1, 2], [0, 0, 0, 0], [-1, 1, 1, -2]]):
            nodes.append(f'{mode}{k} = Pad<mode="{mode}">(x, p{mode}{k}, v)')
            inits.append(ints(f"p{mode}{k}", pads))
            outputs.append(f"{mode}{k}")
    check_compiled(graph(f"{dtype}[3,4] x", nodes, outputs, 19, ", ".join(inits)))


def test_gathers():
    """Negative indices wrap; i32 and i64 indices; a scalar index; every axis;
    GatherElements with dims smaller than the data's; GatherND with batch dims."""
    rng = np.random.default_rng(0)
    nodes = ["g0 = Gather<axis=0>(x, i)", "g1 = Gather<axis=1>(x, j)", "g2 = Gather<axis=2>(x, i)",
             "g3 = Gather<axis=1>(x, s)",
             "e0 = GatherElements<axis=0>(x, ei)", "e1 = GatherElements<axis=1>(x, ej)",
             "e2 = GatherElements<axis=-1>(x, ek)",
             "n0 = GatherND(x, nd2)", "n1 = GatherND(x, nd1)", "n2 = GatherND<batch_dims=1>(x, nb)",
             "n3 = GatherND<batch_dims=1>(x, nb3)"]
    text = graph("float[3,4,5] x, int64[2,2] i, int32[3] j, int64 s, int64[2,3,5] ei, int32[3,2,4] ej, "
                 "int64[1,4,3] ek, int64[2,2] nd2, int64[2,3,1] nd1, int64[3,2,2] nb, int64[3,2] nb3",
                 nodes, ["g0", "g1", "g2", "g3", "e0", "e1", "e2", "n0", "n1", "n2", "n3"], 13)
    feeds = {"x": rng.standard_normal((3, 4, 5), np.float32),
             "i": np.array([[0, -1], [2, -3]]), "j": np.array([-4, 3, 0], np.int32), "s": np.array(-2),
             "ei": rng.integers(-3, 3, (2, 3, 5)), "ej": rng.integers(-4, 4, (3, 2, 4)).astype(np.int32),
             "ek": rng.integers(-5, 5, (1, 4, 3)), "nd2": np.array([[1, -1], [-3, 2]]),
             "nd1": np.array([[[0], [-1], [2]], [[-2], [1], [0]]]),
             "nb": np.array([[[0, 1], [-1, -5]], [[3, 4], [2, 0]], [[-4, 2], [1, -1]]]),
             "nb3": np.array([[0, 1], [-1, 2], [3, -5]])}
    check_compiled(text, feeds)


@pytest.mark.parametrize("dtype", ["int64", "bool"])
def test_gathers_other_dtypes(dtype):
    """Shape arithmetic gathers i64 values (a scalar index, a constant one)."""
    text = graph(f"{dtype}[4] x, {dtype}[3,2] m, int64[2] i", [
        "a = Gather<axis=0>(x, i)", "b = Gather<axis=0>(x, k)", "c = GatherElements<axis=1>(m, e)",
        "d = GatherND(m, q)"], ["a", "b", "c", "d"], 13,
        "int64 k = {-1}, int64[3,1] e = {1, -2, 0}, int64[2,1] q = {-1, 1}")
    feeds = random_inputs(parse(text))
    feeds["i"] = np.array([-1, 2])
    check_compiled(text, feeds)


# --- what ONNX cannot express, and ops canonicalize removes: from IR text, vs the references ---------------
IR = """
func.func @main(%x: tensor<2x3x4xf32>, %b: tensor<3xi1>, %i: tensor<2x3xi32>) -> (
    tensor<2x3x4xf32> {name = "same"}, tensor<3xi1> {name = "same_b"}, tensor<2xi64> {name = "dims"},
    tensor<0xi64> {name = "none"}, tensor<3x6xi32> {name = "pad_i"}, tensor<6xi1> {name = "pad_b"},
    tensor<2x11xi32> {name = "wrap"}) {
  %0 = "tensor.identity"(%x) : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %1 = "tensor.identity"(%b) : (tensor<3xi1>) -> tensor<3xi1>
  %2 = "tensor.shape"(%x) {end = 3, start = 1} : (tensor<2x3x4xf32>) -> tensor<2xi64>
  %3 = "tensor.shape"(%x) {end = 2, start = 2} : (tensor<2x3x4xf32>) -> tensor<0xi64>
  %4 = "tensor.pad"(%i) {pads = [1, 0, 0, 3], value = -7.9} : (tensor<2x3xi32>) -> tensor<3x6xi32>
  %5 = "tensor.pad"(%b) {pads = [1, 2], value = 0.5} : (tensor<3xi1>) -> tensor<6xi1>
  %6 = "tensor.pad"(%i) {mode = "wrap", pads = [0, 4, 0, 4]} : (tensor<2x3xi32>) -> tensor<2x11xi32>
  "func.return"(%0, %1, %2, %3, %4, %5, %6) : (tensor<2x3x4xf32>, tensor<3xi1>, tensor<2xi64>, tensor<0xi64>,
                                               tensor<3x6xi32>, tensor<6xi1>, tensor<2x11xi32>) -> ()
}
"""


def test_ir_only_cases():
    """Identity and Shape (canonicalize drops and folds them); a float pad
    value truncated into i32 and made true in i1; wrap pads deeper than the
    dim (periodic, as numpy)."""
    module = parse_module(IR)
    func = module.main
    manifest = {"threads": None, "inputs": [_spec(a.name, a.type) for a in func.args],
                "outputs": [_spec(n, v.type) for n, v in zip(func.result_names, func.outputs)]}
    artifact = Artifact(manifest, IR, executable=build(module, get_target("cpu")).executable)
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 3, 4), np.float32),
             "b": np.array([True, False, True]), "i": np.arange(6, dtype=np.int32).reshape(2, 3)}
    got = artifact.run(feeds)
    for name, want in interpret(parse_module(IR), feeds).items():
        assert got[name].dtype == want.dtype and got[name].shape == want.shape, name
        np.testing.assert_array_equal(got[name], want, err_msg=name)
    assert (got["pad_i"][0] == -7).all() and got["pad_b"][0]
