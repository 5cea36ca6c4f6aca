"""ONNX control flow: If, Loop and Scan.

What is known at compile time is resolved at import:
- an ``If`` whose condition folds to a constant is its branch, inlined;
- a ``Loop`` with a constant trip count (at most ``MAX_UNROLLED``
  iterations) whose condition stays a constant is unrolled, its body
  inlined once per iteration, scan outputs stacked;
- a ``Scan`` (its length is a static shape) is unrolled the same way.

What is not becomes a control-flow op whose regions are the subgraphs
(ir/ops/control.py): ``cf.if`` runs one branch, ``cf.loop`` runs its body
until the trip count or the condition stops it. Fusion works inside each
region and never across its boundary. A run-time loop's scan outputs would
have a length known only at run time: braze refuses them (static shapes).
"""

from __future__ import annotations

import numpy as np

from ...errors import DynamicShapeError
from ...ir import Operation, Region, TensorType
from ..context import graph_inputs
from ..registry import converter
from .reduce import onnx_axis

#: The most iterations a Loop with a constant trip count is unrolled to;
#: beyond it the loop runs as a cf.loop (a Relax function that recurses
#: once per iteration).
MAX_UNROLLED = 64


@converter("If")
def if_(ctx, cond, *, then_branch, else_branch):
    if cond.type.size != 1:
        raise ctx.error(f"the condition must hold one value, got {cond.type}")
    imp, node = ctx.importer, ctx.node_name
    known = ctx.maybe_value(cond)
    if known is not None:  # folded: only the branch taken is imported
        taken = bool(np.asarray(known).reshape(-1)[0])
        branch, label = (then_branch, "then") if taken else (else_branch, "else")
        return imp.inline_graph(ctx, branch, [], f"{node}/{label}/")
    cond = _scalar(ctx, cond, "i1")
    captures = imp.captures([then_branch, else_branch])
    then_block, then_out = imp.region(ctx, then_branch, [], captures, f"{node}/then/")
    else_block, else_out = imp.region(ctx, else_branch, [], captures, f"{node}/else/")
    then_types, else_types = [v.type for v in then_out], [v.type for v in else_out]
    if then_types != else_types:
        raise ctx.error(f"the branches return different types: then ({', '.join(map(str, then_types))}), else "
                        f"({', '.join(map(str, else_types))}); braze needs one static type for each output")
    op = Operation("cf.if", [cond] + [v for _, v in captures], then_types, {},
                   [Region([then_block]), Region([else_block])], ctx.loc)
    return ctx.builder.insert(op).results


@converter("Loop")
def loop(ctx, M=None, cond=None, *initial, body):
    imp, node = ctx.importer, ctx.node_name
    n = len(initial)
    scans = len(body.output) - 1 - n
    if scans < 0:
        raise ctx.error(f"the body returns {len(body.output)} values; it must return the condition and the "
                        f"{n} loop-carried values")
    trips = None if M is None else ctx.maybe_value(M)
    go = np.array(True) if cond is None else ctx.maybe_value(cond)
    if trips is not None and int(np.asarray(trips).reshape(-1)[0]) <= MAX_UNROLLED and go is not None:
        unrolled = _unroll_loop(ctx, int(np.asarray(trips).reshape(-1)[0]), bool(np.asarray(go).reshape(-1)[0]),
                                list(initial), body, scans)
        if unrolled is not None:
            return unrolled
    if scans:
        raise DynamicShapeError(
            f"node {node} (Loop): its {scans} scan output(s) would have a length known only at run time "
            "(the trip count or the condition is computed at run time, or the trip count is above "
            f"{MAX_UNROLLED}); braze needs static shapes. Make the trip count a constant and the condition "
            "constant true, or return the values as loop-carried ones",
            sorted(set(graph_inputs(M) if M is not None else []) | set(graph_inputs(cond) if cond is not None else [])))
    M = ctx.const(np.array(np.iinfo(np.int64).max, np.int64)) if M is None else _scalar(ctx, M, "i64")
    cond = ctx.const(np.array(True)) if cond is None else _scalar(ctx, cond, "i1")
    captures = imp.captures([body])
    heads = [TensorType((), "i64"), TensorType((), "i1")] + [v.type for v in initial]
    block, outs = imp.region(ctx, body, heads, captures, f"{node}/body/")
    got, want = [v.type for v in outs[:1 + n]], heads[1:]
    if got != want:
        raise ctx.error(f"the body returns ({', '.join(map(str, got))}) where the condition and loop-carried "
                        f"values are ({', '.join(map(str, want))}); braze needs each loop-carried value to keep "
                        "its static type")
    op = Operation("cf.loop", [M, cond, *initial, *[v for _, v in captures]], [v.type for v in initial],
                   {"carried": n}, [Region([block])], ctx.loc)
    return ctx.builder.insert(op).results


def _unroll_loop(ctx, trips: int, go: bool, values: list, body, scans: int):
    """The loop's outputs with its body inlined once per iteration; None if
    the condition the body returns is not a compile-time constant (the ops
    already emitted are dead and DCE drops them)."""
    imp, node = ctx.importer, ctx.node_name
    parts: list[list] = [[] for _ in range(scans)]
    cond = ctx.const(np.array(go))
    n = len(values)
    for i in range(trips):
        if not go:
            break
        outs = imp.inline_graph(ctx, body, [ctx.const(np.array(i, np.int64)), cond, *values], f"{node}/{i}/")
        cond, values = outs[0], outs[1:1 + n]
        for j, v in enumerate(outs[1 + n:]):
            parts[j].append(v)
        known = ctx.maybe_value(cond)
        if known is None:
            return None
        go = bool(np.asarray(known).reshape(-1)[0])
    if scans and not parts[0]:
        raise ctx.error("runs no iteration, so its scan outputs have no element type and shape braze can "
                        "infer; remove the loop or its scan outputs")
    return [*values, *(_stack(ctx, p, 0) for p in parts)]


@converter("Scan", since=9)
def scan(ctx, *inputs, body, num_scan_inputs, scan_input_axes=None, scan_input_directions=None,
         scan_output_axes=None, scan_output_directions=None):
    states, xs = list(inputs[:len(inputs) - num_scan_inputs]), inputs[len(inputs) - num_scan_inputs:]
    return _scan(ctx, states, list(xs), body, scan_input_axes, scan_input_directions, scan_output_axes,
                 scan_output_directions, ctx.node_name + "/")


@converter("Scan", since=8)
def scan_v8(ctx, sequence_lens=None, *inputs, body, num_scan_inputs, directions=None):
    """Opset 8: every input has a batch axis first; each sample is scanned
    on its own."""
    states, xs = list(inputs[:len(inputs) - num_scan_inputs]), list(inputs[len(inputs) - num_scan_inputs:])
    batch = xs[0].type.shape[0]
    if sequence_lens is not None:
        lens = ctx.maybe_value(sequence_lens)
        if lens is None or np.any(lens != xs[0].type.shape[1]):
            raise ctx.error("sequence_lens shorter than the scan axis is not supported (opset 8)")
    outputs = []
    for b in range(batch):
        outputs.append(_scan(ctx, [_take(ctx, s, 0, b) for s in states], [_take(ctx, x, 0, b) for x in xs], body,
                             None, directions, None, None, f"{ctx.node_name}/{b}/"))
    return [_stack(ctx, [o[k] for o in outputs], 0) for k in range(len(outputs[0]))]


def _scan(ctx, states, xs, body, in_axes, in_dirs, out_axes, out_dirs, prefix):
    imp = ctx.importer
    in_axes = [onnx_axis(ctx, a, x.type.rank) for a, x in zip(in_axes or [0] * len(xs), xs)]
    in_dirs = list(in_dirs or [0] * len(xs))
    lengths = {x.type.shape[a] for x, a in zip(xs, in_axes)}
    if len(lengths) != 1:
        raise ctx.error(f"the scan inputs differ in length along their scan axes: {sorted(lengths)}")
    length = lengths.pop()
    if length == 0:
        raise ctx.error("the scan inputs are empty; braze cannot infer the scan outputs' shapes")
    n = len(states)
    parts: list[list] = []
    for t in range(length):
        slices = [_take(ctx, x, a, length - 1 - t if d else t) for x, a, d in zip(xs, in_axes, in_dirs)]
        outs = imp.inline_graph(ctx, body, [*states, *slices], f"{prefix}{t}/")
        states = outs[:n]
        if not parts:
            parts = [[] for _ in outs[n:]]
        for j, v in enumerate(outs[n:]):
            parts[j].append(v)
    out_axes = list(out_axes or [0] * len(parts))
    out_dirs = list(out_dirs or [0] * len(parts))
    scanned = []
    for p, a, d in zip(parts, out_axes, out_dirs):
        scanned.append(_stack(ctx, p[::-1] if d else p, onnx_axis(ctx, a, p[0].type.rank + 1)))
    return [*states, *scanned]


def _take(ctx, x, axis: int, index: int):
    """x[..., index, ...] along ``axis``, that axis dropped."""
    shape = x.type.shape
    starts = tuple(index if i == axis else 0 for i in range(len(shape)))
    ends = tuple(index + 1 if i == axis else d for i, d in enumerate(shape))
    part = ctx.op("tensor.slice", [x], starts=starts, ends=ends, steps=(1,) * len(shape))
    return ctx.op("tensor.reshape", [part], shape=shape[:axis] + shape[axis + 1:])


def _stack(ctx, values: list, axis: int):
    """The values stacked along a new ``axis``."""
    shape = values[0].type.shape
    parts = [ctx.op("tensor.reshape", [v], shape=shape[:axis] + (1,) + shape[axis:]) for v in values]
    return parts[0] if len(parts) == 1 else ctx.op("tensor.concat", parts, axis=axis)


def _scalar(ctx, v, dtype: str):
    """A one-value condition or count as the scalar cf ops take."""
    if v.type.shape != ():
        v = ctx.op("tensor.reshape", [v], shape=())
    if v.type.dtype != dtype:
        v = ctx.op("math.cast", [v], to=dtype)
    return v
