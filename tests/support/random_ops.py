"""The op families of tests/support/random_graphs.py: each function draws one op (or a
short chain) with attributes that fit its operands and adds it to the graph.
New ops go here, into a family of ``FAMILIES``."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st
from onnx import TensorProto

from random_graphs import Graph


# --- shapes -----------------------------------------------------------------------------------------------
def broadcast_variant(g: Graph, shape) -> tuple[int, ...]:
    """A shape that broadcasts against ``shape``: leading dims dropped, some dims 1."""
    drop = g.integer(0, len(shape))
    return tuple(d if g.draw(st.booleans()) else 1 for d in shape[drop:])


def broadcasts(a, b) -> bool:
    return all(x == y or 1 in (x, y) for x, y in zip(reversed(a), reversed(b)))


# --- the ops, by family ----------------------------------------------------------------------------------
UNARY = ["Relu", "Sigmoid", "Tanh", "Neg", "Abs", "Erf", "Softsign", "Sin", "Cos", "Identity", "HardSwish",
         "Softplus"]


def unary(g: Graph) -> None:
    x, _ = g.pick(lambda s: True)
    kind = g.one_of("plain", "attr", "domain")
    if kind == "plain":
        g.node(g.one_of(*UNARY), [x])
    elif kind == "attr":
        op = g.one_of("LeakyRelu", "Elu", "HardSigmoid", "Selu", "Clip")
        if op == "LeakyRelu":
            g.node(op, [x], alpha=g.one_of(0.01, 0.2, 1.5))
        elif op == "Elu":
            g.node(op, [x], alpha=g.one_of(1.0, 0.5))
        elif op == "HardSigmoid":
            g.node(op, [x], alpha=g.one_of(0.2, 0.5), beta=g.one_of(0.5, 0.1))
        elif op == "Selu":
            g.node(op, [x])
        else:
            lo, hi = g.one_of((-0.5, 0.5), (0.0, None), (None, 1.0))
            bounds = [g.const(np.float32(v)) if v is not None else "" for v in (lo, hi)]
            g.node("Clip", [x, *bounds] if hi is not None else [x, bounds[0]])
    else:
        op = g.one_of("Exp", "Log", "Sqrt", "Reciprocal", "Pow")
        if op == "Exp":
            (c,) = g.node("Clip", [x, g.const(np.float32(-4)), g.const(np.float32(4))], keep=False)
            g.node("Exp", [c])
        elif op == "Pow":
            g.node("Pow", [g.positive(x), g.const(np.float32(g.one_of(2.0, 0.5, -1.0, 3.0)))])
        else:
            g.node(op, [g.positive(x)])


def binary(g: Graph) -> None:
    a, sa = g.pick(lambda s: True)
    op = g.one_of("Add", "Mul", "Sub", "Div", "Max", "Min", "Where", "PRelu", "Sum", "Mean")
    if op == "PRelu":  # the slope broadcasts to X one way only
        g.node(op, [a, g.weight(broadcast_variant(g, sa), 0.0, 0.5)])
        return
    source = g.one_of("pool", "new")
    if source == "pool":
        b, sb = g.pick(lambda s: broadcasts(s, sa))
    else:
        sb = broadcast_variant(g, sa)
        b = g.operand(sb)
    if g.draw(st.booleans()):
        a, b = b, a
    if op == "Div":
        g.node(op, [a, g.positive(b)])
    elif op == "Where":
        (cond,) = g.node(g.one_of("Greater", "Less"), [a, b], keep=False)
        g.node(op, [cond, a, b])
    else:
        g.node(op, [a, b])


def matmul(g: Graph) -> None:
    a, sa = g.pick()
    n = g.integer(1, 5)
    kind = g.one_of("weight", "batched", "vector", "gemm") if len(sa) == 2 else g.one_of("weight", "batched", "vector")
    k = sa[-1]
    if kind == "weight" or len(sa) == 1 and kind == "batched":
        g.node("MatMul", [a, g.weight((k, n))])
    elif kind == "vector":
        g.node("MatMul", [a, g.operand((k,))])
    elif kind == "batched":  # both operands batched, batch dims broadcast
        batch = broadcast_variant(g, sa[:-2])
        b = g.operand((*batch, k, n))
        g.node("MatMul", [a, b])
    else:
        trans_a, trans_b = g.integer(0, 1), g.integer(0, 1)
        m, k = (sa[1], sa[0]) if trans_a else sa
        b = g.weight((n, k) if trans_b else (k, n))
        c = g.weight(g.one_of((n,), (1, n), (m, n), (m, 1)))
        g.node("Gemm", [a, b, c][: g.integer(2, 3)], transA=trans_a, transB=trans_b,
               alpha=g.one_of(1.0, 0.5), beta=g.one_of(1.0, 2.0))


def _spatial(shape) -> bool:
    return len(shape) in (3, 4)


def _window(g: Graph, dim: int, max_kernel: int = 3, dilate: bool = True, pad: bool = True):
    """(kernel, stride, dilation, pad_begin, pad_end) of a valid sliding window over ``dim``."""
    k = g.integer(1, max_kernel)
    d = g.integer(1, 2) if dilate else 1
    s = g.integer(1, 2)
    pb, pe = (g.integer(0, k - 1), g.integer(0, k - 1)) if pad else (0, 0)
    assume((k - 1) * d + 1 <= dim + pb + pe)
    return k, s, d, pb, pe


def _last_window_starts_inside(dim: int, window) -> bool:
    """With ceil_mode, onnx's shape inference counts a last window that starts
    in the end padding, onnxruntime drops it: keep to shapes both agree on."""
    k, s, d, pb, pe = window
    out = -(-(dim + pb + pe - (k - 1) * d - 1) // s) + 1
    return (out - 1) * s < dim + pb


def conv(g: Graph) -> None:
    x, sx = g.pick(_spatial)
    c = sx[1]
    group = g.one_of(*[q for q in range(1, c + 1) if c % q == 0])
    oc = group * g.integer(1, max(1, 4 // group))
    auto_pad = g.one_of("NOTSET", "SAME_UPPER", "VALID")
    # onnxruntime refuses dilations with SAME padding
    windows = [_window(g, dim, dilate=auto_pad != "SAME_UPPER", pad=auto_pad == "NOTSET") for dim in sx[2:]]
    kernel = [w[0] for w in windows]
    attrs = {"strides": [w[1] for w in windows], "dilations": [w[2] for w in windows], "group": group}
    if auto_pad == "NOTSET":
        attrs["pads"] = [w[3] for w in windows] + [w[4] for w in windows]
    else:
        attrs["auto_pad"] = auto_pad
    inputs = [x, g.weight((oc, c // group, *kernel))]
    if g.draw(st.booleans()):
        inputs.append(g.weight((oc,)))
    if g.one_of("Conv", "ConvTranspose") == "Conv":
        g.node("Conv", inputs, **attrs)
    else:  # weight (C, OC/group, k...); output padding below the stride
        inputs[1] = g.weight((c, oc // group, *kernel))
        attrs.pop("auto_pad", None)
        attrs["pads"] = [min(w[3], w[0] - 1) for w in windows] * 2
        g.node("ConvTranspose", inputs, **attrs)


def pool(g: Graph) -> None:
    x, sx = g.pick(_spatial)
    op = g.one_of("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool")
    if op.startswith("Global"):
        g.node(op, [x])
        return
    windows = [_window(g, dim, dilate=op == "MaxPool") for dim in sx[2:]]
    ceil_mode = g.integer(0, 1)
    assume(not ceil_mode or all(_last_window_starts_inside(dim, w) for dim, w in zip(sx[2:], windows)))
    attrs = {"kernel_shape": [w[0] for w in windows], "strides": [w[1] for w in windows],
             "pads": [w[3] for w in windows] + [w[4] for w in windows], "ceil_mode": ceil_mode}
    if op == "MaxPool":
        attrs["dilations"] = [w[2] for w in windows]
    else:
        attrs["count_include_pad"] = g.integer(0, 1)
    g.node(op, [x], **attrs)


def _axes(g: Graph, rank: int, min_size: int = 1) -> list[int]:
    axes = g.draw(st.lists(st.integers(0, rank - 1), min_size=min_size, max_size=rank, unique=True))
    return [a - rank if g.draw(st.booleans()) else a for a in axes]


def reduce(g: Graph) -> None:
    x, sx = g.pick()
    op = g.one_of("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceL1",
                  "ReduceSumSquare", "ReduceProd", "ArgMax", "ArgMin", "Softmax", "LogSoftmax")
    axis = g.integer(-len(sx), len(sx) - 1)
    if op in ("Softmax", "LogSoftmax"):
        g.node(op, [x], axis=axis)
    elif op in ("ArgMax", "ArgMin"):
        (i,) = g.node(op, [x], keep=False, axis=axis, keepdims=g.integer(0, 1), select_last_index=g.integer(0, 1))
        g.node("Cast", [i], to=TensorProto.FLOAT)
    else:
        axes = _axes(g, len(sx), min_size=0)
        g.node(op, [x, g.ints(axes)] if axes else [x], keepdims=g.integer(0, 1))


def norm(g: Graph) -> None:
    op = g.one_of("LayerNormalization", "BatchNormalization", "InstanceNormalization")
    if op == "LayerNormalization":
        x, sx = g.pick()
        axis = g.integer(-len(sx), len(sx) - 1)
        tail = sx[axis:]
        g.node(op, [x, g.weight(tail, 0.5, 1.5), g.weight(tail)][: g.integer(2, 3)], axis=axis,
               epsilon=g.one_of(1e-5, 1e-2))
    elif op == "BatchNormalization":
        x, sx = g.pick(lambda s: len(s) >= 2)
        c = sx[1]
        g.node(op, [x, g.weight((c,), 0.5, 1.5), g.weight((c,)), g.weight((c,)), g.weight((c,), 0.5, 2.0)],
               epsilon=1e-5)
    else:
        x, sx = g.pick(lambda s: len(s) >= 3)
        g.node(op, [x, g.weight((sx[1],), 0.5, 1.5), g.weight((sx[1],))], epsilon=1e-3)


def _factor(g: Graph, total: int, rank: int) -> list[int]:
    """``rank`` dims whose product is ``total``."""
    dims = [1] * rank
    n, p = total, 2
    while n > 1:
        while n % p == 0:
            dims[g.integer(0, rank - 1)] *= p
            n //= p
        p += 1
    return dims


def movement(g: Graph) -> None:
    x, sx = g.pick()
    r = len(sx)
    op = g.one_of("Transpose", "Reshape", "Flatten", "Unsqueeze", "Squeeze", "Slice", "Concat", "Expand", "Pad",
                  "Tile", "Split", "Gather")
    if op == "Transpose":
        g.node(op, [x], perm=g.draw(st.permutations(range(r))))
    elif op == "Reshape":
        dims = _factor(g, math.prod(sx), g.integer(1, 4))
        special = g.one_of("none", "infer", "copy")
        if special == "infer":
            dims[g.integer(0, len(dims) - 1)] = -1
        elif special == "copy":
            dims = [0 if i < r and d == sx[i] else d for i, d in enumerate(dims)]
        g.node(op, [x, g.ints(dims)])
    elif op == "Flatten":
        g.node(op, [x], axis=g.integer(-r, r))
    elif op == "Unsqueeze":
        axes = sorted(g.draw(st.lists(st.integers(0, r), min_size=1, max_size=2, unique=True)))
        g.node(op, [x, g.ints(axes)])
    elif op == "Squeeze":
        ones = [i for i, d in enumerate(sx) if d == 1]
        assume(ones and r > 1)
        g.node(op, [x, g.ints(ones[:1])] if g.draw(st.booleans()) else [x])
    elif op == "Slice":
        axes = _axes(g, r)
        starts, ends, steps = [], [], []
        for a in axes:
            dim = sx[a]
            step = g.one_of(1, 2, -1, -2)
            lo, hi = g.integer(-dim - 1, dim + 1), g.one_of(dim, 2**62, -(2**62), g.integer(-dim, dim))
            starts.append(lo)
            ends.append(hi)
            steps.append(step)
        g.node(op, [x, g.ints(starts), g.ints(ends), g.ints(axes), g.ints(steps)])
    elif op == "Concat":
        axis = g.integer(-r, r - 1)
        same = lambda s: len(s) == r and all(d == e for i, (d, e) in enumerate(zip(s, sx)) if i != axis % r)
        if g.one_of("pool", "new") == "pool":
            other, _ = g.pick(same)
        else:
            other = g.operand(tuple(g.integer(1, 3) if i == axis % r else d for i, d in enumerate(sx)))
        g.node(op, [x, other] if g.draw(st.booleans()) else [other, x, other], axis=axis)
    elif op == "Expand":
        shape = [g.integer(1, 3) if d == 1 else d for d in sx]
        shape = [g.integer(1, 2)] * g.integer(0, 1) + shape
        g.node(op, [x, g.ints(shape)])
    elif op == "Pad":
        mode = g.one_of("constant", "reflect", "edge")
        top = {"constant": 2, "edge": 2}.get(mode)
        pads = [g.integer(-1 if mode == "constant" and d > 1 else 0, top or d - 1) for d in sx * 2]
        value = [g.const(np.float32(g.one_of(0.0, 1.5)))] if mode == "constant" else []
        g.node(op, [x, g.ints(pads), *value], mode=mode)
    elif op == "Tile":
        g.node(op, [x, g.ints([g.integer(1, 2) for _ in sx])])
    elif op == "Split":
        axis = g.integer(-r, r - 1)
        dim = sx[axis]
        assume(dim >= 2)
        parts = g.integer(2, min(3, dim))
        if g.draw(st.booleans()):
            g.node(op, [x], outputs=parts, axis=axis, num_outputs=parts)
        else:
            cuts = sorted(g.draw(st.lists(st.integers(1, dim - 1), min_size=parts - 1, max_size=parts - 1,
                                          unique=True)))
            sizes = [b - a for a, b in zip([0, *cuts], [*cuts, dim])]
            g.node(op, [x, g.ints(sizes)], outputs=len(sizes), axis=axis)
    else:  # Gather
        axis = g.integer(-r, r - 1)
        dim = sx[axis]
        idx = g.draw(st.lists(st.integers(-dim, dim - 1), min_size=1, max_size=3))
        indices = np.array(idx[0] if g.draw(st.booleans()) else idx, dtype=np.int64)
        g.node(op, [x, g.const(indices, "i")], axis=axis)


def other(g: Graph) -> None:
    x, sx = g.pick()
    r = len(sx)
    op = g.one_of("CumSum", "TopK", "Einsum", "GatherElements", "Mod", "Dropout", "Resize", "DepthToSpace",
                  "SpaceToDepth", "LRN")
    if op == "CumSum":
        g.node(op, [x, g.ints(g.integer(-r, r - 1))], exclusive=g.integer(0, 1), reverse=g.integer(0, 1))
    elif op == "TopK":  # the values (the indices of equal values may differ)
        axis = g.integer(-r, r - 1)
        k = g.integer(1, sx[axis])
        g.node(op, [x, g.ints([k])], outputs=2, keep=1, axis=axis, largest=g.integer(0, 1), sorted=1)
    elif op == "Einsum":
        letters = "abcd"[:r]
        kind = g.one_of("transpose", "reduce", "matmul")
        if kind == "transpose":
            g.node(op, [x], equation=f"{letters}->{''.join(g.draw(st.permutations(letters)))}")
        elif kind == "reduce":
            keep = "".join(c for c in letters if g.draw(st.booleans()))
            g.node(op, [x], equation=f"{letters}->{keep}")
        else:
            n = g.integer(1, 4)
            g.node(op, [x, g.weight((sx[-1], n))], equation=f"{letters},{letters[-1]}z->{letters[:-1]}z")
    elif op == "GatherElements":
        axis = g.integer(-r, r - 1)
        rng = np.random.default_rng(g.count)
        shape = tuple(g.integer(1, d) for d in sx)
        g.node(op, [x, g.const(rng.integers(-sx[axis], sx[axis], shape).astype(np.int64), "i")], axis=axis)
    elif op == "Mod":  # float Mod is C's fmod
        g.node(op, [x, g.positive(g.operand(broadcast_variant(g, sx)))], fmod=1)
    elif op == "Dropout":  # inference: the identity
        g.node(op, [x, g.const(np.float32(g.one_of(0.0, 0.5)))])
    elif op in ("Resize", "DepthToSpace", "SpaceToDepth", "LRN"):
        _image_op(g, op)


def _image_op(g: Graph, op: str) -> None:
    x, sx = g.pick(lambda s: len(s) == 4)
    if op == "Resize":  # output sizes that are whole numbers, so every mode agrees on them
        scales = [1.0, 1.0] + [g.one_of(2.0, 1.0, 0.5, 3.0) for _ in sx[2:]]
        assume(all(float(d * f).is_integer() and d * f >= 1 for d, f in zip(sx, scales)))
        mode = g.one_of("nearest", "linear", "cubic")
        attrs = {"mode": mode, "coordinate_transformation_mode": g.one_of(
            "half_pixel", "asymmetric", "pytorch_half_pixel", "align_corners", "half_pixel_symmetric")}
        if mode == "nearest":
            attrs["nearest_mode"] = g.one_of("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
        if mode == "cubic":
            attrs["cubic_coeff_a"] = g.one_of(-0.75, -0.5)
            attrs["exclude_outside"] = g.integer(0, 1)
        g.node(op, [x, "", g.const(np.array(scales, dtype=np.float32), "s")], **attrs)
    elif op == "DepthToSpace":
        assume(sx[1] % 4 == 0)
        g.node(op, [x], blocksize=2, mode=g.one_of("DCR", "CRD"))
    elif op == "SpaceToDepth":
        assume(sx[2] % 2 == 0 and sx[3] % 2 == 0)
        g.node(op, [x], blocksize=2)
    else:
        g.node(op, [x], size=g.one_of(1, 3, 5), alpha=1e-2, beta=0.75, bias=g.one_of(1.0, 2.0))


FAMILIES = {"elementwise": unary, "broadcast": binary, "matmul": matmul, "conv": conv, "pool": pool,
            "reduce": reduce, "norm": norm, "movement": movement, "other": other}


