"""A reference interpreter: runs a module with each op's numpy reference.

Slow and simple on purpose: it is the oracle that converters and passes are
tested against (next to onnxruntime), never the way models are run.
"""

from __future__ import annotations

import numpy as np

from ..errors import BrazeError
from .builder import const_array
from .core import Block, Module
from .registry import lookup


def interpret(module: Module, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The outputs of ``@main`` for ``inputs`` (by graph input name)."""
    func = module.main
    env = interpret_values(module, inputs)
    return {name: env[id(v)] for name, v in zip(func.result_names, func.outputs)}


def interpret_values(module: Module, inputs: dict[str, np.ndarray]) -> dict[int, np.ndarray]:
    """Every value of ``@main`` (keyed by ``id(value)``), nested ones included."""
    func = module.main
    env: dict[int, np.ndarray] = {}
    for arg in func.args:
        if arg.name not in inputs:
            raise BrazeError(f"interpret: missing input '{arg.name}'")
        env[id(arg)] = np.asarray(inputs[arg.name], dtype=arg.type.np_dtype)
    _run_block(func.body, env, module)
    return env


def _run_block(block: Block, env: dict, module: Module) -> list[np.ndarray]:
    for op in block.ops:
        if op.name in ("func.return", "fuse.yield"):
            return [env[id(v)] for v in op.operands]
        args = [env[id(v)] for v in op.operands]
        if op.name == "const":
            out = [const_array(op, module)]
            if out[0] is None:
                raise BrazeError(f"interpret: weights of {op.attributes['value']} are not loaded")
        elif op.name == "fuse.group":
            inner = op.regions[0].blocks[0]
            env.update({id(a): x for a, x in zip(inner.args, args)})
            out = _run_block(inner, env, module)
        elif op.name == "cf.if":
            inner = op.regions[0 if bool(args[0]) else 1].blocks[0]
            env.update({id(a): x for a, x in zip(inner.args, args[1:])})
            out = _run_block(inner, env, module)
        elif op.name == "cf.loop":
            out = _run_loop(op, args, env, module)
        else:
            opdef = lookup(op.name)
            if not opdef.has_reference:
                raise BrazeError(f"interpret: '{op.name}' has no numpy reference")
            with np.errstate(all="ignore"):
                out = opdef.run_reference(args, [v.type for v in op.operands], op.attributes)
        for r, a in zip(op.results, out):
            a = np.asarray(a)
            if a.shape != r.type.shape or a.dtype != r.type.np_dtype:
                raise BrazeError(f"interpret: {op.name} at {op.loc} returned {a.dtype}{list(a.shape)}, "
                                 f"expected {r.type}")
            env[id(r)] = a
    return []


def _run_loop(op, args: list, env: dict, module: Module) -> list[np.ndarray]:
    """cf.loop: the body while ``iteration < trip_count`` and the condition hold."""
    body = op.regions[0].blocks[0]
    n = op.attributes["carried"]
    trips, cond, values, captures = int(args[0]), bool(args[1]), args[2:2 + n], args[2 + n:]
    i = 0
    while i < trips and cond:
        env.update({id(a): x for a, x in zip(body.args, [np.array(i, np.int64), np.array(cond), *values, *captures])})
        out = _run_block(body, env, module)
        cond, values = bool(out[0]), out[1:]
        i += 1
    return values
