"""Control flow (converters/control.py, ir/ops/control.py): If, Loop and
Scan folded or unrolled when static, else cf.if / cf.loop regions that fuse
on their own and run as Relax If and recursion; against onnxruntime at
every level, in the reference interpreter, through IR text and braze-run.
ONNX's own node cases run in test_conformance.py."""

import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import braze
from braze.compiler import fuse_only
from braze.errors import DynamicShapeError, OnnxImportError, VerifyError
from braze.frontend import import_onnx
from braze.ir import parse_module, print_module, verify
from braze.ir.interpret import interpret


def _f(name, shape):
    return h.make_tensor_value_info(name, T.FLOAT, shape)


def _weights(seed: int, **shapes):
    rng = np.random.default_rng(seed)
    return [nh.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n) for n, s in shapes.items()]


def _loop_body(name: str, carried_out: str, nodes, scan=None):
    """A Loop body over ``acc`` [4, 8] that passes the condition through."""
    outputs = [h.make_tensor_value_info("c_out", T.BOOL, []), _f(carried_out, [4, 8])]
    if scan:
        outputs.append(_f(scan, [4, 8]))
    return h.make_graph(nodes + [h.make_node("Identity", ["c_in"], ["c_out"])], name,
                        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c_in", T.BOOL, []),
                         _f("acc_in", [4, 8])], outputs)


def _if_loop_model(trip_count=None, nested=False) -> onnx.ModelProto:
    """y = If(sum(x) > 0, then: relu(x @ W1 + b) * 2, else: sigmoid(x) - x),
    then a Loop of ``n`` iterations (a graph input unless ``trip_count``):
    acc = tanh(acc @ W2 + y), acc starting at y. ``nested``: the else
    branch holds a second If on the same condition."""
    then_g = h.make_graph([h.make_node("MatMul", ["x", "W1"], ["t0"]), h.make_node("Add", ["t0", "b"], ["t1"]),
                           h.make_node("Relu", ["t1"], ["t2"]), h.make_node("Mul", ["t2", "two"], ["ty"])],
                          "then", [], [_f("ty", [4, 8])])
    else_nodes = [h.make_node("Sigmoid", ["x"], ["e0"]), h.make_node("Sub", ["e0", "x"], ["ey"])]
    if nested:
        inner_then = h.make_graph([h.make_node("Neg", ["x"], ["it"])], "inner_then", [], [_f("it", [4, 8])])
        inner_else = h.make_graph([h.make_node("Abs", ["x"], ["ie"])], "inner_else", [], [_f("ie", [4, 8])])
        else_nodes = [h.make_node("If", ["c"], ["e0"], then_branch=inner_then, else_branch=inner_else),
                      h.make_node("Sub", ["e0", "x"], ["ey"])]
    else_g = h.make_graph(else_nodes, "else", [], [_f("ey", [4, 8])])
    body = _loop_body("body", "acc_out", [h.make_node("MatMul", ["acc_in", "W2"], ["l0"]),
                                          h.make_node("Add", ["l0", "y"], ["l1"]),
                                          h.make_node("Tanh", ["l1"], ["acc_out"])])
    inits = _weights(0, W1=(8, 8), W2=(8, 8), b=(8,))
    inits += [nh.from_array(np.array(2, np.float32), "two"), nh.from_array(np.array(0, np.float32), "zero")]
    inputs = [_f("x", [4, 8])]
    if trip_count is None:
        inputs.append(h.make_tensor_value_info("n", T.INT64, []))
    else:
        inits.append(nh.from_array(np.array(trip_count, np.int64), "n"))
    nodes = [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0), h.make_node("Greater", ["s", "zero"], ["c"]),
             h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
             h.make_node("Loop", ["n", "", "y"], ["z"], body=body)]
    graph = h.make_graph(nodes, "if_loop", inputs, [_f("z", [4, 8])], inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def _cases(model):
    """Inputs taking both branches, and 0, 1 and 5 iterations."""
    runtime_count = any(i.name == "n" for i in model.graph.input)
    out = []
    for seed, n, shift in ((0, 3, 1.0), (1, 0, -1.0), (2, 5, -1.0), (3, 1, 1.0)):
        feeds = {"x": (np.random.default_rng(seed).standard_normal((4, 8)) + shift).astype(np.float32)}
        if runtime_count:
            feeds["n"] = np.array(n, np.int64)
        out.append(feeds)
    return out


def _ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


IF_LOOP = _if_loop_model()


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_if_and_loop_decided_at_run_time_match_onnxruntime(level):
    art = braze.compile(IF_LOOP, level=level)
    for feeds in _cases(IF_LOOP):
        np.testing.assert_allclose(art.run(feeds)["z"], _ort(IF_LOOP, feeds)["z"], rtol=1e-5, atol=1e-6)


def test_regions_fuse_inside_and_explain_names_the_boundary():
    _, report = fuse_only(IF_LOOP, level=2)
    data = report.to_dict()
    regions = {(r["node"], r["region"]): r for r in data["regions"]}
    assert set(regions) == {("If_2", "then"), ("If_2", "else"), ("Loop_3", "body")}
    # each region is one kernel: matmul + bias + relu + scale, sigmoid - x, matmul + add + tanh
    assert [len(regions[k]["groups"]) for k in sorted(regions)] == [1, 1, 1]
    assert regions[("If_2", "then")]["groups"][0]["op_types"] == ["MatMul", "Add", "Relu", "Mul"]
    assert regions[("Loop_3", "body")]["groups"][0]["rule"] == "matmul_epilogue"
    boundary = [r for r in data["refused"] if r["reason"] == "control_flow"]
    assert {r["nodes"][0] for r in boundary} == {"If_2", "Loop_3"}
    assert "Greater_1" in boundary[0]["nodes"]  # the condition's producer stays outside the branches
    assert data["kernels"] == 1 + 3  # the condition's kernel and one per region
    text = report.table()
    assert "region body of Loop_3 (cf.loop)" in text and "control_flow" in text


def test_nested_if_inside_a_branch():
    model = _if_loop_model(nested=True)
    art = braze.compile(model, level=2)
    for feeds in _cases(model):
        np.testing.assert_allclose(art.run(feeds)["z"], _ort(model, feeds)["z"], rtol=1e-5, atol=1e-6)
    inner = [r for r in fuse_only(model, level=2)[1].to_dict()["regions"] if r["region"] == "else"][0]
    assert [r["node"] for r in inner["regions"]] == ["If_2/else/If_0", "If_2/else/If_0"]


def test_constant_trip_count_unrolls_and_constant_condition_folds():
    model = _if_loop_model(trip_count=3)
    module = import_onnx(model)
    names = [op.name for op in module.walk()]
    assert "cf.loop" not in names and names.count("math.tanh") == 3
    # the If's condition comes from x: it stays
    assert "cf.if" in names
    art = braze.compile(model, level=2)
    for feeds in _cases(model):
        np.testing.assert_allclose(art.run(feeds)["z"], _ort(model, feeds)["z"], rtol=1e-5, atol=1e-6)
    folded = onnx.ModelProto()
    folded.CopyFrom(model)
    folded.graph.node[1].op_type = "Less"  # sum(x) < 0 ...
    folded.graph.node[0].input[0] = "zero"  # ... of a constant: the If folds to its else branch
    module = import_onnx(folded)
    assert "cf.if" not in [op.name for op in module.walk()]
    assert any(op.loc and op.loc.name == "If_2/else/Sigmoid_0" for op in module.walk())


def test_unrolled_loop_with_scan_outputs():
    """A for-loop (constant count, constant condition) stacks its scan
    outputs; the iteration number is a constant in each copy."""
    body = _loop_body("body", "acc_out", [h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT),
                                          h.make_node("Add", ["acc_in", "fi"], ["acc_out"]),
                                          h.make_node("Mul", ["acc_out", "acc_in"], ["sq"])], scan="sq")
    graph = h.make_graph([h.make_node("Loop", ["n", "t", "x"], ["z", "all"], body=body)], "scan_loop",
                         [_f("x", [4, 8])], [_f("z", [4, 8]), _f("all", [4, 4, 8])],
                         [nh.from_array(np.array(4, np.int64), "n"), nh.from_array(np.array(True), "t")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    feeds = {"x": np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)}
    got, want = braze.compile(model, level=2).run(feeds), _ort(model, feeds)
    for name in ("z", "all"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


def test_run_time_loop_with_scan_outputs_is_refused():
    model = _if_loop_model()
    body = model.graph.node[3].attribute[0].g
    body.node.append(h.make_node("Identity", ["acc_out"], ["seen"]))
    body.output.append(_f("seen", [4, 8]))
    model.graph.node[3].output.append("all")
    with pytest.raises(DynamicShapeError, match="Loop_3.*scan output.*run time"):
        import_onnx(model)


def test_branches_of_different_shapes_are_refused():
    model = _if_loop_model()
    else_branch = model.graph.node[2].attribute[0].g  # (make_node sorts the attributes by name)
    else_branch.node[1].CopyFrom(h.make_node("ReduceMean", ["e0"], ["ey"], keepdims=1))  # [1, 1], not [4, 8]
    with pytest.raises(OnnxImportError, match="If_2.*branches return different types"):
        import_onnx(model)


def test_unsupported_op_in_a_branch_names_it():
    model = _if_loop_model()
    model.graph.node[2].attribute[1].g.node[0].op_type = "SequenceEmpty"  # in the then branch
    with pytest.raises(braze.errors.UnsupportedOpError, match="SequenceEmpty: If_2/then/SequenceEmpty_0"):
        import_onnx(model)


def test_ir_text_round_trip_interpreter_and_verifier():
    module = import_onnx(IF_LOOP)
    text = print_module(module)
    assert '"cf.if"' in text and '"cf.loop"' in text
    again = parse_module(text)
    assert print_module(again) == text
    for feeds in _cases(IF_LOOP)[:2]:
        np.testing.assert_allclose(interpret(module, feeds)["z"], _ort(IF_LOOP, feeds)["z"], rtol=1e-5, atol=1e-6)
    loop = next(op for op in again.main.body.ops if op.name == "cf.loop")
    loop.attributes["carried"] = 2  # claims the first capture is carried too
    with pytest.raises(VerifyError, match="cf.loop"):
        verify(again)


def test_braze_run_runs_the_regions(braze_run, tmp_path):
    art = braze.compile(IF_LOOP, level=2)
    art.save(str(tmp_path / "m.braze"))
    for k, feeds in enumerate(_cases(IF_LOOP)[:2]):
        args = []
        for name, array in feeds.items():
            np.save(tmp_path / f"{name}{k}.npy", array)
            args += ["--input", f"{name}={tmp_path / f'{name}{k}.npy'}"]
        done = subprocess.run([str(braze_run), str(tmp_path / "m.braze"), *args, "--output-dir",
                               str(tmp_path / f"out{k}")], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        np.testing.assert_allclose(np.load(tmp_path / f"out{k}" / "z.npy"), _ort(IF_LOOP, feeds)["z"],
                                   rtol=1e-5, atol=1e-6)
