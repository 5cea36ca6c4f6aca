"""braze as an ONNX backend (``onnx.backend.base.Backend``), like
``onnxruntime.backend``, so that ONNX's own conformance suite can run it::

    import onnx.backend.test
    from braze.backend import BrazeBackend

    backend_test = onnx.backend.test.BackendTest(BrazeBackend, __name__)
    backend_test.include(r"^test_relu_")
    globals().update(backend_test.test_cases)

or directly: ``BrazeBackend.run_model(model, [x])`` / ``prepare(model).run({"x": x})``.

The only module besides ``frontend/`` that imports onnx: it is the bridge
between onnx's API and the compiler. CPU only; level 0 (one kernel per op)
unless ``prepare(..., level=N)``.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

from .compiler import compile as braze_compile
from .errors import DynamicShapeError, InputError, OnnxImportError


class BrazeRep(BackendRep):
    """A prepared model. ``run(inputs)`` takes a list (graph-input order,
    initializers excluded), a dict by name, or one array for a one-input
    model, and returns the outputs in graph-output order.

    braze compiles for static shapes. A model whose inputs have dynamic
    dimensions, or whose shape-like inputs (a Reshape's shape, a Slice's
    starts, a reduction's axes) are graph inputs, is compiled at the first
    ``run``: for the shapes it is given, with those shape-like inputs folded
    in as constants, as an exported model holds them (and again for others).
    """

    def __init__(self, model: onnx.ModelProto, level: int = 0, **compile_options):
        self.model = model
        self.level = level
        self.compile_options = compile_options
        initializers = {t.name for t in model.graph.initializer}
        self.input_names = [i.name for i in model.graph.input if i.name not in initializers]
        self.output_names = [o.name for o in model.graph.output]
        self.constant_inputs: set[str] = set()  # inputs braze needs at compile time
        self._artifacts: dict[tuple, object] = {}
        for i in model.graph.input:
            if not i.type.HasField("tensor_type"):
                raise OnnxImportError(f"graph input '{i.name}' is not a tensor (sequences, optionals and maps are "
                                      "unsupported)")
        if not any(_is_dynamic(i) for i in model.graph.input if i.name not in initializers):
            try:
                self._artifacts[None] = braze_compile(model, level=level, **compile_options)
            except DynamicShapeError as e:
                if not e.inputs:
                    raise
                self.constant_inputs.update(e.inputs)

    def artifact(self, feeds: dict | None = None):
        """The compiled artifact (for ``feeds`` when it depends on them)."""
        if None in self._artifacts:
            return self._artifacts[None]
        if feeds is None:
            raise InputError("the model is compiled for the shapes (and shape-like inputs) it runs with: "
                             "give inputs")
        while True:
            key = self._key(feeds)
            if key in self._artifacts:
                return self._artifacts[key]
            shapes = {n: tuple(np.shape(feeds[n])) for n in self.input_names
                      if n in feeds and n not in self.constant_inputs}
            try:
                self._artifacts[key] = braze_compile(self._with_constants(feeds), level=self.level,
                                                     input_shapes=shapes, **self.compile_options)
            except DynamicShapeError as e:
                if not e.inputs or set(e.inputs) <= self.constant_inputs:
                    raise
                self.constant_inputs.update(e.inputs)  # and compile again with those folded in

    def _key(self, feeds: dict) -> tuple:
        key = []
        for name in self.input_names:
            a = feeds.get(name)
            if a is None:
                continue
            value = a.tobytes() if name in self.constant_inputs else None
            key.append((name, a.shape, str(a.dtype), value))
        return tuple(key)

    def _with_constants(self, feeds: dict) -> onnx.ModelProto:
        """The model with its constant inputs turned into initializers."""
        if not self.constant_inputs:
            return self.model
        model = onnx.ModelProto()
        model.CopyFrom(self.model)
        if model.ir_version >= 4:  # (before, every initializer was also an input)
            kept = [i for i in model.graph.input if i.name not in self.constant_inputs]
            del model.graph.input[:]
            model.graph.input.extend(kept)
        for name in sorted(self.constant_inputs):
            if name in feeds:
                model.graph.initializer.append(onnx.numpy_helper.from_array(feeds[name], name))
        return model

    def run(self, inputs, **kwargs):
        feeds = self._feeds(inputs)
        artifact = self.artifact(feeds)
        outputs = artifact.run({k: v for k, v in feeds.items() if k not in self.constant_inputs})
        return namedtupledict("Outputs", self.output_names)(*[outputs[n] for n in self.output_names])

    def _feeds(self, inputs) -> dict:
        if isinstance(inputs, dict):
            return {k: _array(v) for k, v in inputs.items()}
        if isinstance(inputs, (np.ndarray, np.generic, onnx.TensorProto)):
            inputs = [inputs]
        inputs = list(inputs)
        if len(inputs) != len(self.input_names):
            raise InputError(f"got {len(inputs)} inputs, the model takes {len(self.input_names)} "
                             f"({', '.join(self.input_names)})")
        return {name: _array(a) for name, a in zip(self.input_names, inputs)}


class BrazeBackend(Backend):
    """The ONNX backend API over ``braze.compiler.compile`` (CPU only)."""

    @classmethod
    def is_compatible(cls, model, device: str = "CPU", **kwargs) -> bool:
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model, device: str = "CPU", level: int = 0, **kwargs) -> BrazeRep:
        """Compile ``model`` (a ModelProto, path or bytes). ``level`` is the
        fusion level (default 0); other keywords go to ``braze.compiler.compile``
        (``fusion``, ``threads``, ``cache_dir``)."""
        if not cls.supports_device(device):
            raise ValueError(f"braze's backend runs on CPU only, not {device}")
        if not isinstance(model, onnx.ModelProto):
            from .frontend import load_model

            model = load_model(model)
        return BrazeRep(model, level, **kwargs)

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs, device: str = "CPU", outputs_info=None, **kwargs):
        """Run one node on ``inputs`` (a list in the node's input order, or a
        dict by input name), in a one-node model at ``opset_version``."""
        opset = kwargs.pop("opset_version", onnx.defs.onnx_opset_version())
        names = [n for n in node.input if n]
        arrays = [inputs[n] for n in names] if isinstance(inputs, dict) else list(inputs)
        graph_inputs = [onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(_array(a).dtype),
                                                           np.shape(a)) for n, a in zip(names, arrays)]
        graph_outputs = [onnx.helper.make_empty_tensor_value_info(n) for n in node.output if n]
        graph = onnx.helper.make_graph([node], "run_node", graph_inputs, graph_outputs)
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
        return cls.run_model(model, arrays, device, **kwargs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        try:
            return Device(device).type == DeviceType.CPU
        except (AttributeError, ValueError):
            return False


def _array(value) -> np.ndarray:
    """An input as an array; onnx's test data holds some (bfloat16, ...) as TensorProtos."""
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    return np.asarray(value)


def _is_dynamic(value_info) -> bool:
    """A tensor input whose shape only the run-time inputs tell (other input
    kinds are compiled, and refused, right away)."""
    tt = value_info.type.tensor_type
    if not value_info.type.HasField("tensor_type"):
        return False
    return not tt.HasField("shape") or not all(d.HasField("dim_value") for d in tt.shape.dim)


prepare = BrazeBackend.prepare
run_model = BrazeBackend.run_model
run_node = BrazeBackend.run_node
supports_device = BrazeBackend.supports_device
