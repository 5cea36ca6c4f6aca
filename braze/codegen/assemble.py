"""The whole model as a Relax ``main`` that calls each kernel with call_tir
(or one such function per gear, sharing kernels and weights).

Control flow (ir/ops/control.py): each region is a Relax function of its
own (``region_functions`` names them); a ``cf.if`` is a Relax ``If`` that
calls one of its two, and a ``cf.loop`` calls a driver function that runs
the body and calls itself while the trip count and the condition allow."""

from __future__ import annotations

import contextlib
import hashlib

import numpy as np
import tvm
from tvm import relax, te

from ..errors import CodegenError
from ..ir import Module, Value, const_array, control_regions
from .kernel import TVM_DTYPES, Kernel


def region_functions(name: str, module: Module) -> list[tuple[str, Module]]:
    """The Relax functions the control-flow regions of function ``name``
    become, nested ones first: ``[(function name, region module), ...]``.
    The k-th control-flow op's region i is ``{name}__cf{k}_{i}``."""
    out: list[tuple[str, Module]] = []
    ops: list = []
    for op, i, sub in control_regions(module):
        if op not in ops:
            ops.append(op)
        fname = f"{name}__cf{len(ops) - 1}_{i}"
        out += region_functions(fname, sub)
        out.append((fname, sub))
    return out


def _sinfo(v: Value):
    return relax.TensorType(v.type.shape, TVM_DTYPES[v.type.dtype])


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
    mod = bb.get()  # less the loop drivers' construction copies
    return tvm.IRModule({gv: f for gv, f in mod.functions.items() if not gv.name_hint.endswith(_BUILDING)})


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

    control = [op for op in func.body.ops if op.name.startswith("cf.")]
    drivers = {id(op): _loop_driver(bb, f"{name}__cf{k}", op) for k, op in enumerate(control) if op.name == "cf.loop"}
    by_op = {id(k.group if k.group is not None else k.ops[0]): k for k in kernels}

    def bind(results, call) -> None:
        if len(results) == 1:
            env[id(results[0])] = call
        else:
            for i, r in enumerate(results):
                env[id(r)] = bb.emit(relax.TupleGetItem(call, i))

    with bb.function(name, params):
        # a Relax If is not allowed in a dataflow block
        with bb.dataflow() if not control else contextlib.nullcontext():
            for op in func.body.ops:
                k = by_op.get(id(op))
                if k is not None:
                    if k.name not in added:
                        added[k.name] = bb.add_func(primfuncs[k.name], k.name)
                    out = [_sinfo(v) for v in k.returns]
                    args = [packed(k, i, v) if i in k.packings else expr(v) for i, v in enumerate(k.args)]
                    bind(k.returns, bb.emit(relax.call_tir(added[k.name], args, out if len(out) > 1 else out[0])))
                elif op.name == "cf.if":
                    base = f"{name}__cf{control.index(op)}"
                    args = [expr(v) for v in op.operands[1:]]
                    branches = [relax.SeqExpr([], relax.Call(_global(bb, f"{base}_{i}"), args)) for i in (0, 1)]
                    bind(op.results, bb.emit(relax.If(expr(op.operands[0]), *branches)))
                elif op.name == "cf.loop":
                    args = [relax.const(0, "int64")] + [expr(v) for v in op.operands]
                    bind(op.results, bb.emit(relax.Call(drivers[id(op)], args)))
            outputs = [expr(v) for v in func.outputs]
            result = relax.Tuple(outputs) if len(outputs) != 1 else outputs[0]
            result = bb.emit_output(result) if not control else result
        bb.emit_func_output(result)


_BUILDING = "__building"


def _global(bb, name: str) -> relax.GlobalVar:
    return bb.get().get_global_var(name)


def _loop_driver(bb, base: str, op) -> relax.GlobalVar:
    """``{base}_loop(iteration, trip_count, cond, carried..., captures...)``:
    the carried values after running the body ``{base}_0`` while
    ``iteration < trip_count and cond``, one recursive call per iteration."""
    n = op.attributes["carried"]
    scalar_i64, scalar_i1 = relax.TensorType((), "int64"), relax.TensorType((), "bool")
    types = [scalar_i64, scalar_i64, scalar_i1] + [_sinfo(v) for v in op.operands[2:]]

    def params():
        return [relax.Var(f"a{i}", t) for i, t in enumerate(types)]

    def carried(ps):
        return relax.Tuple(ps[3:3 + n]) if n != 1 else ps[3]

    first = params()  # declared first (returning its input), so that its body can call it
    with bb.function(f"{base}_loop", first):
        driver = bb.emit_func_output(carried(first))
    body = _global(bb, f"{base}_0")
    keep, step = _loop_kernels(bb)
    ps = params()
    with bb.function(f"{base}_loop{_BUILDING}", ps):
        go = bb.emit(relax.call_tir(keep, ps[:3], scalar_i1))
        out = relax.Var("out", bb.get()[body].ret_ty)
        ran = relax.VarBinding(out, relax.Call(body, [ps[0], ps[2], *ps[3:]]))
        again = relax.Call(driver, [relax.call_tir(step, [ps[0]], scalar_i64), ps[1],
                                    *[relax.TupleGetItem(out, i) for i in range(1 + n)], *ps[3 + n:]])
        result = bb.emit(relax.If(go, relax.SeqExpr([relax.BindingBlock([ran])], again),
                                  relax.SeqExpr([], carried(ps))))
        built = bb.emit_func_output(result)
    bb.update_func(driver, bb.get()[built].with_attr("global_symbol", f"{base}_loop"))
    return driver


def _loop_kernels(bb):
    """The two scalar kernels every loop driver calls: ``i < trip_count and
    cond``, and ``i + 1`` (added once)."""
    mod = bb.get()
    names = ("braze_loop_continue", "braze_loop_next")
    if not any(gv.name_hint == names[0] for gv in mod.functions):
        i, m = te.placeholder((), "int64", name="i"), te.placeholder((), "int64", name="trip_count")
        c = te.placeholder((), "bool", name="cond")
        go = te.compute((), lambda: tvm.tirx.all(i() < m(), c()), name="go")
        nxt = te.compute((), lambda: i() + tvm.tirx.const(1, "int64"), name="next")
        bb.add_func(te.create_prim_func([i, m, c, go]), names[0])
        bb.add_func(te.create_prim_func([i, nxt]), names[1])
    return _global(bb, names[0]), _global(bb, names[1])


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
