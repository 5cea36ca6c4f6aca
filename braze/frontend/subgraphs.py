"""Subgraphs, for the importer: the bodies of If, Loop and Scan (inlined, or
the region of a control-flow op), and ops onnx defines as functions of other
ops (their function body, converted in their place).

``SubgraphImporter`` is a part of ``importer.Importer``: its methods read and
restore the importer's name scope (``values``, ``initializers``, ``opset``).
"""

from __future__ import annotations

import contextlib

import numpy as np
import onnx
from onnx import numpy_helper

from ..errors import UnsupportedOpError
from ..ir import Block, Builder, Operation, TensorType, Value
from .context import ConversionContext
from .onnx_types import _ONNX_FROM_IR, DEFAULT_DOMAINS, node_name


class SubgraphImporter:
    # --- subgraphs: If branches, Loop and Scan bodies (converters/control.py) ----------------
    def inline_graph(self, ctx: ConversionContext, graph, bound: list[Value], prefix: str) -> list[Value]:
        """Convert ``graph``'s nodes into the current block, its inputs bound
        to ``bound`` and the names around it visible: its output values.
        Node names get ``prefix`` (an unrolled loop's iteration)."""
        if len(bound) != len(graph.input):
            raise ctx.error(f"subgraph '{graph.name}' has {len(graph.input)} inputs, {len(bound)} given")
        with self._scope(ctx, graph, region=False):
            self.values.update({i.name: v for i, v in zip(graph.input, bound)})
            return self._convert_graph(ctx, graph, prefix)

    def region(self, ctx: ConversionContext, graph, heads: list[TensorType], captures: list[tuple[str, Value]],
               prefix: str) -> tuple[Block, list[Value]]:
        """``graph`` as the one block of a control-flow region: its arguments
        are ``heads`` (bound to the graph's inputs) then the captures (outer
        values it reads); outer constants are copied in rather than
        captured. (block, the values it returns)."""
        if len(heads) != len(graph.input):
            raise ctx.error(f"subgraph '{graph.name}' has {len(graph.input)} inputs, {len(heads)} expected")
        block = Block(heads + [v.type for _, v in captures])
        inner = ConversionContext(ctx.module, Builder(ctx.module, block), self.opset, self)
        with self._scope(ctx, graph, region=True):
            self.values.update({i.name: a for i, a in zip(graph.input, block.args)})
            self.values.update({n: a for (n, _), a in zip(captures, block.args[len(heads):])})
            outputs = self._convert_graph(inner, graph, prefix)
        block.append(Operation("func.return", outputs, []))
        return block, outputs

    def captures(self, graphs) -> list[tuple[str, Value]]:
        """The outer values that ``graphs`` (and the subgraphs inside them)
        read, in first-use order, constants and weights left out (a region
        makes its own copy)."""
        names = []
        for g in graphs:
            names += [n for n in free_names(g) if n not in names]
        out = []
        for n in names:
            v = self.values.get(n)
            if v is not None and not (v.owner is not None and v.owner.name == "const"):
                out.append((n, v))
        return out

    @contextlib.contextmanager
    def _scope(self, ctx: ConversionContext, graph, region: bool):
        """Names as a subgraph sees them, restored after it (with the node
        the context was converting): all the outer ones when it is inlined;
        none in a region, but outer constants, re-made inside it when used."""
        saved = self.values, self.initializers, (ctx.node_name, ctx.op_type, ctx.inputs, ctx.outputs)
        outer_consts = {n: v for n, v in self.values.items() if v.owner is not None and v.owner.name == "const"}
        self.values = {} if region else dict(self.values)
        if region:
            self.initializers = {**self.initializers, **self._const_protos(outer_consts, ctx)}
        self.initializers = {**self.initializers, **{t.name: t for t in graph.initializer}}
        for t in graph.initializer:
            self.values.pop(t.name, None)
        try:
            yield
        finally:
            self.values, self.initializers = saved[0], saved[1]
            ctx.node_name, ctx.op_type, ctx.inputs, ctx.outputs = saved[2]

    def _const_protos(self, consts: dict, ctx) -> dict:
        """Outer constant values (initializers already converted, Constant
        nodes) as TensorProtos, for a region to re-make."""
        from ..ir import const_array

        out = {}
        for n, v in consts.items():
            if n in self.initializers:
                continue
            data = const_array(v.owner, ctx.module)
            if data is not None:
                out[n] = numpy_helper.from_array(np.asarray(data), n)
        return out

    def _convert_graph(self, ctx: ConversionContext, graph, prefix: str) -> list[Value]:
        available = set(self.values) | set(self.initializers) | {""}
        for node, name in self.sorted_nodes(graph, available, prefix):
            self.convert(ctx, node, name)
        return [self.lookup(ctx, o.name) for o in graph.output]

    def expand_function(self, ctx: ConversionContext, node, name: str) -> None:
        """An op braze has no converter for, but which onnx defines as a
        function of other ops (its schema's body, or one built for the node's
        attributes and input types): the body's nodes converted in its place,
        named ``<node>/<body node>``, at the body's own opset."""
        types = []
        for x in node.input:
            v = self.values.get(x) if x else None
            if v is None and x in self.initializers:
                v = self.lookup(ctx, x)
            types.append(onnx.TypeProto() if v is None else
                         onnx.helper.make_tensor_type_proto(_ONNX_FROM_IR[v.type.dtype], list(v.type.shape)))
        body = function_body(node, self.opset, types)
        if body is None:
            raise UnsupportedOpError({node.op_type: [name]})
        opset = next((o.version for o in body.opset_import if o.domain in DEFAULT_DOMAINS), self.opset)
        inner = f"{name}/"
        renamed = {f: node.input[i] if i < len(node.input) else "" for i, f in enumerate(body.input)}
        renamed.update({f: y for f, y in zip(body.output, node.output) if y})
        attrs = {a.name: a for a in node.attribute}
        defaults = onnx.defs.get_schema(node.op_type, self.opset).attributes

        def rename(x: str) -> str:
            return renamed.get(x, inner + x) if x else ""

        nodes = []
        for i, n in enumerate(body.node):
            copy = onnx.NodeProto()
            copy.CopyFrom(n)
            copy.name = node_name(n, i)
            del copy.input[:], copy.output[:], copy.attribute[:]
            copy.input.extend(rename(x) for x in n.input)
            copy.output.extend(rename(y) for y in n.output)
            for a in n.attribute:
                if a.ref_attr_name:  # the node's attribute, or the schema's default
                    given = attrs.get(a.ref_attr_name)
                    if given is None and a.ref_attr_name in defaults and defaults[a.ref_attr_name].default_value.type:
                        given = defaults[a.ref_attr_name].default_value
                    if given is None:
                        continue
                    ref, a = a, onnx.AttributeProto()
                    a.CopyFrom(given)
                    a.name = ref.name
                elif a.type == onnx.AttributeProto.GRAPH:  # a subgraph reads the body's names too
                    a = onnx.AttributeProto(name=a.name, type=a.type, g=_rename_free(a.g, rename))
                copy.attribute.append(a)
            nodes.append(copy)
        graph = onnx.helper.make_graph(nodes, node.op_type, [], [])
        outer_opset, self.opset, ctx.opset = self.opset, opset, opset
        try:
            for n, label in self.sorted_nodes(graph, set(self.values) | set(self.initializers) | {""}, inner):
                self.convert(ctx, n, label)
        finally:
            self.opset, ctx.opset = outer_opset, outer_opset


def has_function(op_type: str, opset: int) -> bool:
    """Whether onnx defines ``op_type`` at ``opset`` as a function of other ops."""
    try:
        schema = onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return False
    return any(v <= opset for v in list(schema.function_opset_versions)
               + list(schema.context_dependent_function_opset_versions))


def function_body(node, opset: int, input_types: list) -> "onnx.FunctionProto | None":
    """The function onnx defines ``node`` as at ``opset`` (the latest
    version of it not above ``opset``), built for the node's attributes and
    input types when it depends on them; None if there is none."""
    schema = onnx.defs.get_schema(node.op_type, opset, "")
    body = onnx.FunctionProto()
    plain = [v for v in schema.function_opset_versions if v <= opset]
    dependent = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
    if plain and (not dependent or max(plain) >= max(dependent)):
        body.ParseFromString(schema.get_function_with_opset_version(max(plain)))
    elif dependent:
        data = schema.get_context_dependent_function_with_opset_version(
            max(dependent), node.SerializeToString(), [t.SerializeToString() for t in input_types])
        if not data:
            return None
        body.ParseFromString(data)
    else:
        return None
    return body


def _rename_free(graph, rename, outer_defined=frozenset()):
    """A copy of ``graph`` whose reads of names from the scopes around it
    go through ``rename`` (its own names stay)."""
    copy = onnx.GraphProto()
    copy.CopyFrom(graph)
    defined = set(outer_defined) | {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    defined.update(o for n in graph.node for o in n.output)
    for node in copy.node:
        for k, x in enumerate(node.input):
            if x not in defined:
                node.input[k] = rename(x)
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                a.g.CopyFrom(_rename_free(a.g, lambda x: x if x in defined else rename(x)))
    for o in copy.output:
        if o.name not in defined:
            o.name = rename(o.name)
    return copy


def free_names(graph) -> list[str]:
    """The names ``graph`` (or a subgraph inside it) reads but does not
    define: what it takes from the scopes around it, in first-use order."""
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    defined.update(o for n in graph.node for o in n.output)
    out: list[str] = []
    for node in graph.node:
        used = list(node.input)
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                used += free_names(a.g)
        out += [n for n in used if n not in defined and n not in out]
    out += [o.name for o in graph.output if o.name not in defined and o.name not in out]
    return out
