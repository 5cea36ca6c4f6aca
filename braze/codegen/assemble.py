"""The whole model as a Relax ``main`` that calls each kernel with call_tir."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax

from ..errors import CodegenError
from ..ir import Module, Value, const_array
from .kernel import TVM_DTYPES, Kernel


def _sinfo(v: Value):
    return relax.TensorType(v.type.shape, TVM_DTYPES[v.type.dtype])


def assemble(module: Module, kernels: list[Kernel], primfuncs: dict[str, "tvm.tirx.PrimFunc"]) -> tvm.IRModule:
    func = module.main
    bb = relax.BlockBuilder()
    params = [relax.Var(f"in{i}", _sinfo(a)) for i, a in enumerate(func.args)]
    env: dict[int, relax.Expr] = {id(a): p for a, p in zip(func.args, params)}

    def expr(v: Value) -> relax.Expr:
        if id(v) not in env:
            op = v.owner
            if op is None or op.name != "const":
                raise CodegenError(f"value {v} is used before any kernel computes it")
            data = const_array(op, module)
            if data is None:
                raise CodegenError(f"constant {op.attributes['value']} has no data (weights not loaded)")
            env[id(v)] = relax.const(np.ascontiguousarray(data).reshape(data.shape), TVM_DTYPES[v.type.dtype])
        return env[id(v)]

    def packed(k: Kernel, index: int, v: Value) -> relax.Expr:
        packing = k.packings[index]
        data = const_array(v.owner, module)
        if data is None:
            raise CodegenError(f"constant {v.owner.attributes['value']} has no data (weights not loaded)")
        return relax.const(np.ascontiguousarray(packing.pack(np.asarray(data))), TVM_DTYPES[v.type.dtype])

    with bb.function("main", params):
        with bb.dataflow():
            for k in kernels:
                gv = bb.add_func(primfuncs[k.name], k.name)
                out = [_sinfo(v) for v in k.returns]
                args = [packed(k, i, v) if i in k.packings else expr(v) for i, v in enumerate(k.args)]
                call = bb.emit(relax.call_tir(gv, args, out if len(out) > 1 else out[0]))
                if len(out) == 1:
                    env[id(k.returns[0])] = call
                else:
                    for i, r in enumerate(k.returns):
                        env[id(r)] = bb.emit(relax.TupleGetItem(call, i))
            outputs = [expr(v) for v in func.outputs]
            result = bb.emit_output(relax.Tuple(outputs) if len(outputs) != 1 else outputs[0])
        bb.emit_func_output(result)
    return bb.get()


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
