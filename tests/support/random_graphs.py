"""Random small ONNX graphs for differential testing (a hypothesis strategy).

``models(families)`` draws a graph input, then a few ops, each reading
tensors made earlier (so the graph is a DAG, not only a chain), with random
small shapes, broadcasting and attribute values; weights are initializers.
Every op is valid by construction: its attributes are drawn to fit its
operands, and onnx's shape inference gives each result's shape. Values stay
finite and away from the edges of the ops' domains (Log, Sqrt and Div read
``|x| + 0.5``, Exp reads a clipped value), so that braze and onnxruntime
can be compared with a tolerance.

The op families (what each draws) are in ``random_ops.py``.
Hypothesis shrinks a failing graph: fewer ops, earlier operands (the input),
the first choice of every attribute, smaller dims.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from hypothesis import assume
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

OPSET = 18
MAX_ELEMENTS = 2048  # per tensor: keeps every kernel tiny


class Graph:
    """The graph being drawn: nodes, inputs, weights and the pool of float
    tensors (name -> shape) that later ops may read."""

    def __init__(self, draw):
        self.draw = draw
        self.nodes, self.inputs, self.weights = [], [], []
        self.pool: dict[str, tuple[int, ...]] = {}
        self.count = 0

    # --- drawing ----------------------------------------------------------------------------------
    def pick(self, ok=lambda shape: len(shape) >= 1) -> tuple[str, tuple[int, ...]]:
        """A tensor from the pool whose shape satisfies ``ok`` (by default: not a
        scalar); the earliest ones come first, so operands shrink to the input."""
        names = [n for n, s in self.pool.items() if ok(s)]
        assume(names)
        name = self.draw(st.sampled_from(names))
        return name, self.pool[name]

    def one_of(self, *choices):
        return self.draw(st.sampled_from(choices))

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    # --- making tensors ---------------------------------------------------------------------------
    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def input(self, shape) -> str:
        name = f"in{len(self.inputs)}"
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
        self.pool[name] = tuple(shape)
        return name

    def const(self, array: np.ndarray, prefix: str = "w") -> str:
        name = self.fresh(prefix)
        self.weights.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, shape, low: float = -1.0, high: float = 1.0) -> str:
        rng = np.random.default_rng(self.count)  # deterministic per graph position
        return self.const(rng.uniform(low, high, shape).astype(np.float32))

    def ints(self, values) -> str:
        return self.const(np.array(values, dtype=np.int64), "k")

    def operand(self, shape) -> str:
        """A new tensor of ``shape`` as a weight or as another graph input."""
        if self.one_of("weight", "input") == "weight":
            return self.weight(shape)
        return self.input(shape)

    def node(self, op: str, inputs, outputs: int = 1, keep: int | bool = True, **attrs) -> list[str]:
        """Add a node; its results (``keep``: the first ``keep`` of them, the
        float ones) join the pool with their inferred shapes."""
        names = [self.fresh("t") for _ in range(outputs)]
        self.nodes.append(helper.make_node(op, list(inputs), names, name=self.fresh(f"{op}_"), **attrs))
        shapes = self.infer(names)
        for i, name in enumerate(names):
            assume(all(d > 0 for d in shapes[name]) and math.prod(shapes[name]) <= MAX_ELEMENTS)
            if i < keep:
                self.pool[name] = shapes[name]
        return names

    def infer(self, names) -> dict[str, tuple[int, ...]]:
        model = self.model(names)
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
        out = {}
        for vi in inferred.graph.output:
            dims = vi.type.tensor_type.shape.dim
            assert all(d.HasField("dim_value") for d in dims), f"no static shape for {vi.name}"
            out[vi.name] = tuple(d.dim_value for d in dims)
        return out

    def model(self, outputs) -> onnx.ModelProto:
        outs = [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in outputs]
        graph = helper.make_graph(self.nodes, "random", self.inputs, outs, self.weights)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8)

    def positive(self, name: str) -> str:
        """``|x| + 0.5``: a tensor safe to divide by, take the log or a power of."""
        (a,) = self.node("Abs", [name], keep=False)
        return self.node("Add", [a, self.const(np.float32(0.5))], keep=False)[0]


def shapes(min_rank: int = 1, max_rank: int = 4, max_dim: int = 5):
    return st.lists(st.integers(1, max_dim), min_size=min_rank, max_size=max_rank).map(tuple)


@st.composite
def models(draw, families=None, max_ops: int = 4, input_shapes=shapes()):
    """An ONNX model: one input of a drawn shape, 1 to ``max_ops`` ops of the
    given families, the last result and maybe an earlier one as outputs."""
    from random_ops import FAMILIES  # (it imports Graph from here)

    g = Graph(draw)
    g.input(draw(input_shapes))
    for _ in range(draw(st.integers(1, max_ops))):
        FAMILIES[draw(st.sampled_from(families or tuple(FAMILIES)))](g)
    made = [n for n in g.pool if n.startswith("t")]
    assume(made)
    outputs = [made[-1]]
    if len(made) > 1 and draw(st.booleans()):
        outputs.insert(0, draw(st.sampled_from(made[:-1])))
    model = g.model(outputs)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(inferred, full_check=True)
    return inferred
