"""The whole model as a Relax ``main`` that calls each kernel with call_tir
(or one such function per gear, sharing kernels and weights)."""

from __future__ import annotations

import hashlib

import numpy as np
import tvm
from tvm import relax

from ..errors import CodegenError
from ..ir import Module, Value, const_array
from .kernel import TVM_DTYPES, Kernel


def _sinfo(v: Value):
    return relax.TensorType(v.type.shape, TVM_DTYPES[v.type.dtype])


def assemble(module: Module, kernels: list[Kernel], primfuncs: dict[str, "tvm.tirx.PrimFunc"]) -> tvm.IRModule:
    """The model as one Relax function, ``main``."""
    return assemble_functions([("main", module, kernels)], primfuncs)


def assemble_functions(functions: list[tuple[str, Module, list[Kernel]]],
                       primfuncs: dict[str, "tvm.tirx.PrimFunc"]) -> tvm.IRModule:
    """One Relax function per ``(name, module, kernels)`` (a gear each, or
    just ``main``), all in one IRModule: a kernel several functions call is
    added once, and a constant (a weight, packed or not) with the same bytes
    is one constant, stored once in the executable."""
    bb = relax.BlockBuilder()
    constants: dict[tuple, relax.Constant] = {}
    added: dict[str, relax.GlobalVar] = {}

    def constant(data: np.ndarray, dtype: str) -> relax.Constant:
        data = np.ascontiguousarray(data).reshape(np.shape(data))  # (ascontiguousarray makes 0-d 1-d)
        if len(functions) == 1:  # one function: each value is made once already, nothing to hash
            return relax.const(data, dtype)
        key = (data.dtype.str, data.shape, hashlib.sha256(data.tobytes()).hexdigest())
        if key not in constants:
            constants[key] = relax.const(data, dtype)
        return constants[key]

    for name, module, kernels in functions:
        _function(bb, name, module, kernels, primfuncs, added, constant)
    return bb.get()


def _function(bb, name: str, module: Module, kernels: list[Kernel], primfuncs, added, constant) -> None:
    func = module.main
    params = [relax.Var(f"in{i}", _sinfo(a)) for i, a in enumerate(func.args)]
    env: dict[int, relax.Expr] = {id(a): p for a, p in zip(func.args, params)}

    def weights(op) -> np.ndarray:
        data = const_array(op, module)
        if data is None:
            raise CodegenError(f"constant {op.attributes['value']} has no data (weights not loaded)")
        return np.asarray(data)

    def expr(v: Value) -> relax.Expr:
        if id(v) not in env:
            op = v.owner
            if op is None or op.name != "const":
                raise CodegenError(f"value {v} is used before any kernel computes it")
            env[id(v)] = constant(weights(op), TVM_DTYPES[v.type.dtype])
        return env[id(v)]

    def packed(k: Kernel, index: int, v: Value) -> relax.Expr:
        packing = k.packings[index]
        return constant(packing.pack(weights(v.owner)), TVM_DTYPES[packing.dtype or v.type.dtype])

    with bb.function(name, params):
        with bb.dataflow():
            for k in kernels:
                if k.name not in added:
                    added[k.name] = bb.add_func(primfuncs[k.name], k.name)
                out = [_sinfo(v) for v in k.returns]
                args = [packed(k, i, v) if i in k.packings else expr(v) for i, v in enumerate(k.args)]
                call = bb.emit(relax.call_tir(added[k.name], args, out if len(out) > 1 else out[0]))
                if len(out) == 1:
                    env[id(k.returns[0])] = call
                else:
                    for i, r in enumerate(k.returns):
                        env[id(r)] = bb.emit(relax.TupleGetItem(call, i))
            outputs = [expr(v) for v in func.outputs]
            result = bb.emit_output(relax.Tuple(outputs) if len(outputs) != 1 else outputs[0])
        bb.emit_func_output(result)


def lowering_pipeline(target: tvm.target.Target) -> tvm.transform.Pass:
    """TVM's Relax lowering without its fusion passes: braze already decided
    what each kernel holds; TVM plans memory and lowers to the VM."""
    from tvm.relax.backend.cpu_generic import pipeline as cpu_generic

    @tvm.transform.module_pass(opt_level=0)
    def pipeline(mod, _ctx):
        with target:
            passes = cpu_generic.dataflow_lower_passes(target) + cpu_generic.finalize_passes(target)
            return tvm.transform.Sequential(passes)(mod)

    return pipeline
