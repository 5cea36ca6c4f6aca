"""ONNX -> braze IR. The only module (with ``converters/``) that imports onnx.

Steps: load the file, bind the user's input shapes, run onnx's shape
inference, refuse unsupported ops all at once, then convert node by node
in topological order with the converter table, and verify the result.
"""

from __future__ import annotations

import os
import re

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import numpy_helper

from ..errors import BrazeError, DynamicShapeError, ModelLoadError, OnnxImportError, UnsupportedOpError
from ..ir import Block, Builder, Func, Module, Operation, TensorType, Value, verify
from .context import ConversionContext
from .onnx_types import DEFAULT_DOMAINS, node_name, onnx_dtype  # noqa: F401  (onnx_dtype: for the converters)
from .subgraphs import SubgraphImporter, has_function
from .registry import find_converter



def load_model(source) -> onnx.ModelProto:
    """A ModelProto from a path, bytes or a ModelProto; typed errors name the file."""
    if isinstance(source, onnx.ModelProto):
        copy = onnx.ModelProto()
        copy.CopyFrom(source)  # binding input shapes edits the graph
        return copy
    if isinstance(source, (bytes, bytearray)):
        return _parse_bytes(bytes(source), "<bytes>")
    path = os.fspath(source)
    if not os.path.exists(path):
        raise ModelLoadError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ModelLoadError(f"{path}: is a directory, not an ONNX file")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ModelLoadError(f"{path}: cannot read ({e.strerror})") from None
    model = _parse_bytes(data, path)
    try:  # weights stored beside the model (external data)
        onnx.load_external_data_for_model(model, os.path.dirname(os.path.abspath(path)))
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"{path}: cannot load its external weights ({e})") from None
    return model


def _parse_bytes(data: bytes, name: str) -> onnx.ModelProto:
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as e:
        raise ModelLoadError(f"{name}: not a readable ONNX model (truncated or corrupt: {e})") from None
    if not model.HasField("graph") or not model.graph.node and not model.graph.output:
        raise ModelLoadError(f"{name}: not an ONNX model (no graph found)")
    return model


class ShapeBindings(dict):
    """``{input name: shape}`` as ``--input-shape`` gives them; with
    ``override``, a shape may also change dimensions the model fixes."""

    def __init__(self, shapes=(), override: bool = False):
        super().__init__(shapes)
        self.override = override


def parse_shape_bindings(specs, override: bool = False) -> ShapeBindings:
    """``["x=1x3x224x224", ...]`` or a dict -> {name: shape}."""
    if isinstance(specs, ShapeBindings):
        return ShapeBindings(specs, specs.override or override)
    if specs is None:
        return ShapeBindings({}, override)
    if isinstance(specs, dict):
        return ShapeBindings({k: tuple(int(d) for d in v) for k, v in specs.items()}, override)
    out = {}
    for spec in specs:
        name, sep, dims = spec.rpartition("=")
        if not sep or not name or not re.fullmatch(r"\d+(x\d+)*|", dims):
            raise OnnxImportError(f"--input-shape '{spec}': expected NAME=1x3x224x224")
        out[name] = tuple(int(d) for d in dims.split("x")) if dims else ()
    return ShapeBindings(out, override)


def import_onnx(source, input_shapes=None, override_shapes: bool = False) -> Module:
    """Import an ONNX model (path, bytes or ModelProto) into a verified
    Module. ``input_shapes`` binds input dimensions (``{"x": (1, 3, 224,
    224)}`` or ``["x=1x3x224x224"]``); only dynamic ones, unless
    ``override_shapes``."""
    return import_model(load_model(source), parse_shape_bindings(input_shapes, override_shapes))


def import_model(model: onnx.ModelProto, input_shapes=None) -> Module:
    """``import_onnx`` of a ModelProto that ``load_model`` gave, without a
    copy: binding the input shapes edits its graph, so import it only once."""
    return Importer(model, parse_shape_bindings(input_shapes)).run()


class Importer(SubgraphImporter):
    def __init__(self, model: onnx.ModelProto, input_shapes: dict[str, tuple[int, ...]]):
        self.model = model
        self.graph = model.graph
        self.input_shapes = input_shapes
        self.opset = next((o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS), 1)
        self.values: dict[str, Value] = {}
        self.initializers = {t.name: t for t in self.graph.initializer}

    def run(self) -> Module:
        self.check_ops()
        inputs = self.graph_inputs()
        self.shape_inference()
        module = Module()
        body = Block([t for _, t in inputs], [n for n, _ in inputs])
        for (name, _), arg in zip(inputs, body.args):
            self.values[name] = arg
        func = Func("main", body, [o.name for o in self.graph.output])
        module.funcs.append(func)
        builder = Builder(module, body)
        ctx = ConversionContext(module, builder, self.opset, self)
        for node, name in self.sorted_nodes():
            self.convert(ctx, node, name)
        outputs = [self.lookup(ctx, o.name) for o in self.graph.output]
        body.append(Operation("func.return", outputs, []))
        try:
            return verify(module)
        except BrazeError as e:  # a converter produced bad IR: a braze bug, but say where
            raise OnnxImportError(f"imported IR does not verify: {e}") from None

    # --- checks before converting ----------------------------------------------------
    def check_ops(self) -> None:
        """Every op type braze cannot convert, subgraphs' included, in one error."""
        missing: dict[str, list[str]] = {}
        self._check_graph(self.graph, "", missing)
        if missing:
            raise UnsupportedOpError(missing)

    def _check_graph(self, graph, prefix: str, missing: dict) -> None:
        for i, node in enumerate(graph.node):
            name = prefix + node_name(node, i)
            key = node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"
            if node.domain not in DEFAULT_DOMAINS or (find_converter(node.op_type, self.opset) is None
                                                      and not has_function(node.op_type, self.opset)):
                missing.setdefault(key, []).append(name)
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    self._check_graph(a.g, f"{name}/{a.name.removesuffix('_branch')}/", missing)

    def graph_inputs(self) -> list[tuple[str, TensorType]]:
        unknown = set(self.input_shapes) - {i.name for i in self.graph.input}
        if unknown:
            raise OnnxImportError(f"--input-shape names no graph input: {', '.join(sorted(unknown))} "
                                  f"(inputs: {', '.join(i.name for i in self.graph.input)})")
        out = []
        for inp in self.graph.input:
            if inp.name in self.initializers:
                continue  # IR version 3 lists weights as inputs too
            tt = inp.type.tensor_type
            if not inp.type.HasField("tensor_type"):
                raise OnnxImportError(f"graph input '{inp.name}' is not a tensor (sequences and maps are unsupported)")
            dtype = onnx_dtype(tt.elem_type, f"graph input '{inp.name}'")
            if inp.name in self.input_shapes:
                shape = self.input_shapes[inp.name]
                if tt.HasField("shape") and len(tt.shape.dim) != len(shape):
                    raise OnnxImportError(f"--input-shape {inp.name}: the input has rank {len(tt.shape.dim)}, "
                                          f"got {len(shape)} dimensions")
                fixed = [(i, d.dim_value) for i, d in enumerate(tt.shape.dim)
                         if d.HasField("dim_value") and d.dim_value != shape[i]] if tt.HasField("shape") else []
                if fixed and not getattr(self.input_shapes, "override", False):
                    i, size = fixed[0]
                    raise OnnxImportError(
                        f"--input-shape {inp.name}: dimension {i} is fixed at {size} in the model, not "
                        f"{shape[i]}; a model exported for one size may compute wrong results at another. "
                        "Give --override-shape (override_shapes=True in Python) if it is meant to run at any size")
            else:
                shape = self.static_shape(inp)
            self.set_input_shape(inp, shape)
            out.append((inp.name, TensorType(shape, dtype)))
        return out

    def static_shape(self, inp) -> tuple[int, ...]:
        tt = inp.type.tensor_type
        if not tt.HasField("shape"):
            raise DynamicShapeError(f"graph input '{inp.name}' has no shape; bind it with "
                                    f"--input-shape {inp.name}=1x3x224x224")
        dims = []
        for i, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0 or d.HasField("dim_value") and d.dim_value == 0:
                dims.append(d.dim_value)
            else:
                label = f"'{d.dim_param}'" if d.dim_param else "unnamed"
                raise DynamicShapeError(
                    f"graph input '{inp.name}' dimension {i} ({label}) is dynamic; bind it with "
                    f"--input-shape {inp.name}=" + "x".join(
                        str(x.dim_value) if x.HasField("dim_value") else "N" for x in tt.shape.dim))
        return tuple(dims)

    @staticmethod
    def set_input_shape(inp, shape) -> None:
        tt = inp.type.tensor_type
        tt.shape.ClearField("dim")
        for d in shape:
            tt.shape.dim.add().dim_value = d

    def shape_inference(self) -> None:
        """Run onnx's shape inference; keep its output types for cross-checks."""
        try:
            inferred = onnx.shape_inference.infer_shapes(self.without_weights(), strict_mode=False, data_prop=True)
        except Exception as e:  # onnx raises several types; any of them means a broken model
            raise OnnxImportError(f"onnx shape inference rejects the model: {e}") from None
        self.onnx_types: dict[str, tuple] = {}
        for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
            tt = vi.type.tensor_type
            if vi.type.HasField("tensor_type") and tt.HasField("shape"):
                dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)
                self.onnx_types[vi.name] = dims

    def without_weights(self) -> onnx.ModelProto:
        """The model with large initializers turned into typed inputs: shape
        inference needs their shapes, not their data (which it would copy)."""
        light = onnx.ModelProto()
        light.ir_version = self.model.ir_version
        light.opset_import.extend(self.model.opset_import)
        g = light.graph
        g.node.extend(self.graph.node)
        g.output.extend(self.graph.output)
        g.input.extend(i for i in self.graph.input if i.name not in self.initializers)
        for t in self.graph.initializer:
            if np.prod(t.dims, dtype=np.int64) <= 64:  # small ones may be shapes: keep their values
                g.initializer.append(t)
            else:
                g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        return light

    def sorted_nodes(self, graph=None, available=None, prefix: str = ""):
        """Nodes in topological order (ONNX requires it, but not every file
        obeys); for a subgraph, ``available`` names what the scope around it
        defines and ``prefix`` goes before its synthetic node names."""
        graph = graph or self.graph
        nodes = [(n, prefix + node_name(n, i)) for i, n in enumerate(graph.node)]
        if available is None:
            available = {i.name for i in self.graph.input} | set(self.initializers) | {""}
        available = set(available) | {i.name for i in graph.input} | {t.name for t in graph.initializer}
        done, order, pending = set(), [], list(range(len(nodes)))
        while pending:
            progress = []
            for i in pending:
                if all(x in available for x in nodes[i][0].input):
                    order.append(nodes[i])
                    available.update(nodes[i][0].output)
                    progress.append(i)
            if not progress:
                n, name = nodes[pending[0]]
                missing = [x for x in n.input if x not in available]
                raise OnnxImportError(f"node {name} ({n.op_type}) uses {', '.join(missing)}, "
                                      "which no node, input or initializer produces (or the graph has a cycle)")
            done.update(progress)
            pending = [i for i in pending if i not in done]
        return order

    # --- converting ---------------------------------------------------------------------
    def lookup(self, ctx: ConversionContext, name: str) -> Value | None:
        if name == "":
            return None
        if name not in self.values:
            t = self.initializers.get(name)
            if t is None:
                raise OnnxImportError(f"tensor '{name}' is used but never defined")
            try:
                data = numpy_helper.to_array(t)
            except Exception as e:
                raise OnnxImportError(f"initializer '{name}' cannot be read: {e}") from None
            onnx_dtype(t.data_type, f"initializer '{name}'")
            self.values[name] = ctx.builder.const(data, name, None)
        return self.values[name]

    def convert(self, ctx: ConversionContext, node, name: str) -> None:
        ctx.node_name, ctx.op_type = name, node.op_type
        fn = find_converter(node.op_type, self.opset) if node.domain in DEFAULT_DOMAINS else None
        if fn is None and node.domain in DEFAULT_DOMAINS and has_function(node.op_type, self.opset):
            return self.expand_function(ctx, node, name)
        if fn is None:  # in a subgraph (the main graph's nodes were checked all at once)
            key = node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"
            raise UnsupportedOpError({key: [name]})
        inputs = [self.lookup(ctx, x) for x in node.input]
        ctx.node = node
        ctx.inputs = list(zip(node.input, inputs))
        ctx.outputs = list(node.output)
        attrs = {a.name: attribute_value(a, ctx) for a in node.attribute}
        try:
            result = fn(ctx, *inputs, **attrs)
        except TypeError as e:
            if "argument" not in str(e):
                raise
            raise ctx.error(f"unexpected inputs or attributes: {e}") from None
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        outputs = [o for o in node.output]
        if len(results) < len([o for o in outputs if o]):
            raise ctx.error(f"produces {len(outputs)} outputs but braze converts only {len(results)}")
        for out_name, value in zip(outputs, results):
            if not out_name:
                continue
            self.check_type(ctx, out_name, value)
            self.values[out_name] = value

    def check_type(self, ctx, name: str, value: Value) -> None:
        """Cross-check braze's inferred shape with onnx's. braze's converters
        follow onnxruntime where onnx's shape inference differs from it (e.g.
        pooling with ceil_mode), so a mismatch is fatal only in strict mode
        (``BRAZE_STRICT_SHAPES=1``, which the test suite sets)."""
        dims = self.onnx_types.get(name)
        if dims is None or None in dims or os.environ.get("BRAZE_STRICT_SHAPES") != "1":
            return
        if tuple(dims) != value.type.shape:
            raise ctx.error(f"output '{name}' has shape {list(value.type.shape)} in braze but "
                            f"{list(dims)} by onnx shape inference")


def attribute_value(a, ctx: ConversionContext):
    """An ONNX attribute as a Python value: ints -> tuple, tensor -> ndarray."""
    A = onnx.AttributeProto
    if a.type == A.INT:
        return a.i
    if a.type == A.FLOAT:
        return a.f
    if a.type == A.STRING:
        return a.s.decode("utf-8", "replace")
    if a.type == A.INTS:
        return tuple(a.ints)
    if a.type == A.FLOATS:
        return tuple(a.floats)
    if a.type == A.STRINGS:
        return tuple(s.decode("utf-8", "replace") for s in a.strings)
    if a.type == A.TENSOR:
        return numpy_helper.to_array(a.t)
    if a.type == A.GRAPH:
        return a.g  # a branch or loop body: converters/control.py imports it
    if a.type == A.GRAPHS:
        raise ctx.error(f"attribute '{a.name}' holds a list of subgraphs, which no standard op braze converts uses")
    raise ctx.error(f"attribute '{a.name}' has an unsupported type {A.AttributeType.Name(a.type)}")
