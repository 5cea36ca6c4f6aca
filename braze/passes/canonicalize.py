"""Canonicalization: constant folding plus local simplifications.

Folding evaluates every op whose operands are constants (this is what turns
the Shape -> Gather -> Concat -> Reshape chains of exporters into static
constants). The patterns remove no-op data movement, turn BatchNormalization
into a per-channel scale and shift, and fold such scales and shifts into the
weights and bias of the conv or matmul before them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..ir import Module, Value
from .manager import Pass, register_pass
from .rewrite import Pattern, Rewriter, apply_patterns, pattern

_PATTERNS: list[Pattern] = []


def canonical(op_name: str):
    """``pattern(op_name)``, and the pattern joins the pass's list (once, here)."""

    def register(fn) -> Pattern:
        made = pattern(op_name)(fn)
        _PATTERNS.append(made)
        return made

    return register


def _single_use(v: Value) -> bool:
    return len(v.uses) == 1


def _producer(v: Value, name: str):
    op = v.owner
    return op if op is not None and op.name == name else None


# --- no-op data movement ----------------------------------------------------------------
@canonical("tensor.identity")
def drop_identity(op, rw):
    return [op.operands[0]]


@canonical("tensor.reshape")
def drop_noop_reshape(op, rw):
    x = op.operands[0]
    return [x] if x.type == op.result.type else None


@canonical("tensor.reshape")
def merge_reshapes(op, rw):
    inner = _producer(op.operands[0], "tensor.reshape")
    if inner is None:
        return None
    return [rw.create("tensor.reshape", [inner.operands[0]], shape=op.attributes["shape"])]


@canonical("tensor.transpose")
def drop_noop_transpose(op, rw):
    perm = op.attributes["perm"]
    return [op.operands[0]] if list(perm) == list(range(len(perm))) else None


@canonical("tensor.transpose")
def merge_transposes(op, rw):
    inner = _producer(op.operands[0], "tensor.transpose")
    if inner is None:
        return None
    p1, p2 = inner.attributes["perm"], op.attributes["perm"]
    return [rw.create("tensor.transpose", [inner.operands[0]], perm=tuple(p1[i] for i in p2))]


@canonical("math.cast")
def drop_noop_cast(op, rw):
    x = op.operands[0]
    return [x] if x.type == op.result.type else None


def _neutral(identity: float, commutes: bool):
    """x op c -> x when c is all ``identity`` and the op does not broadcast x."""

    def rewrite(op, rw):
        sides = [(0, 1), (1, 0)] if commutes else [(0, 1)]
        for xi, ci in sides:
            x, c = op.operands[xi], rw.value(op.operands[ci])
            if c is not None and x.type == op.result.type and c.size and (c == identity).all():
                return [x]
        return None

    return rewrite


add_zero = canonical("math.add")(_neutral(0, True))
sub_zero = canonical("math.sub")(_neutral(0, False))
mul_one = canonical("math.mul")(_neutral(1, True))
div_one = canonical("math.div")(_neutral(1, False))


# --- BatchNormalization and per-channel affine folding ------------------------------
def per_channel(c: np.ndarray, out_rank: int, axis: int, channels: int) -> np.ndarray | None:
    """``c`` as a length-``channels`` vector if, broadcast against a tensor of
    rank ``out_rank``, it varies at most along ``axis``; else None."""
    if c.ndim > out_rank:
        return None
    shape = (1,) * (out_rank - c.ndim) + c.shape
    if any(d != 1 for i, d in enumerate(shape) if i != axis):
        return None
    flat = c.reshape(-1)
    if flat.size == 1:
        return np.full(channels, flat[0], dtype=c.dtype)
    return flat if flat.size == channels else None


@canonical("nn.batch_norm")
def batch_norm_to_affine(op, rw):
    """BN(x) = x * s + t with s = scale / sqrt(var + eps), t = bias - mean * s."""
    x = op.operands[0]
    params = [rw.value(v) for v in op.operands[1:]]
    if any(p is None for p in params) or x.type.rank < 2:
        return None
    scale, bias, mean, var = (p.astype(np.float64) for p in params)
    s = scale / np.sqrt(var + op.attributes["epsilon"])
    t = bias - mean * s
    shape = (-1,) + (1,) * (x.type.rank - 2)
    dtype = x.type.np_dtype
    name = op.loc.name if op.loc else "bn"
    scaled = rw.create("math.mul", [x, rw.const(s.astype(dtype).reshape(shape), f"{name}.scale")])
    return [rw.create("math.add", [scaled, rw.const(t.astype(dtype).reshape(shape), f"{name}.shift")])]


def _anchor_channels(v: Value, rw: Rewriter):
    """(op, channel axis) when ``v`` is the single-use result of a conv or a
    matmul with a constant 2-D weight: ops whose weights can absorb a scale."""
    if not _single_use(v) or v.owner is None:
        return None
    op = v.owner
    if op.name == "nn.conv" and rw.value(op.operands[1]) is not None:
        return op, 1
    if op.name == "nn.matmul" and op.operands[1].type.rank == 2 and rw.value(op.operands[1]) is not None:
        return op, v.type.rank - 1
    return None


def _split_const(op, rw):
    """(value, constant) for a binary op with one constant operand."""
    a, b = op.operands
    cb = rw.value(b)
    if cb is not None:
        return a, cb
    ca = rw.value(a)
    return (b, ca) if ca is not None else (None, None)


@canonical("math.mul")
def scale_into_anchor(op, rw):
    """conv(x, W, b) * s -> conv(x, W*s, b*s); matmul(x, W) * s -> matmul(x, W*s)."""
    y, c = _split_const(op, rw)
    if y is None or op.result.type != y.type:
        return None
    found = _anchor_channels(y, rw)
    if found is None:
        return None
    anchor, axis = found
    s = per_channel(c, y.type.rank, axis, y.type.shape[axis])
    if s is None:
        return None
    w = rw.value(anchor.operands[1])
    name = anchor.loc.name if anchor.loc else "w"
    if anchor.name == "nn.conv":
        w_new = w * s.reshape((-1,) + (1,) * (w.ndim - 1))
        operands = [anchor.operands[0], rw.const(w_new.astype(w.dtype), f"{name}.weight", anchor.loc)]
        if len(anchor.operands) > 2:
            b = rw.value(anchor.operands[2])
            if b is None:
                return None
            operands.append(rw.const((b * s).astype(b.dtype), f"{name}.bias", anchor.loc))
        return [rw.create("nn.conv", operands, loc=anchor.loc, **anchor.attributes)]
    w_new = (w * s.reshape(1, -1)).astype(w.dtype)
    weight = rw.const(w_new, f"{name}.weight", anchor.loc)
    return [rw.create("nn.matmul", [anchor.operands[0], weight], loc=anchor.loc, **anchor.attributes)]


@canonical("math.add")
def shift_into_conv_bias(op, rw):
    """conv(x, W, b) + t -> conv(x, W, b + t) for a per-channel constant t."""
    y, c = _split_const(op, rw)
    if y is None or op.result.type != y.type:
        return None
    found = _anchor_channels(y, rw)
    if found is None or found[0].name != "nn.conv":
        return None
    conv = found[0]
    t = per_channel(c, y.type.rank, 1, y.type.shape[1])
    if t is None:
        return None
    old = rw.value(conv.operands[2]) if len(conv.operands) > 2 else np.zeros_like(t)
    if old is None:
        return None
    bias = rw.const((old + t).astype(t.dtype), f"{conv.loc.name if conv.loc else 'conv'}.bias", conv.loc)
    return [rw.create("nn.conv", [conv.operands[0], conv.operands[1], bias], loc=conv.loc, **conv.attributes)]


def _reassociate(outer_name: str, combine):
    """(y op c1) op c2 -> y op combine(c1, c2) when the inner result has one use."""

    def rewrite(op, rw):
        inner_v, c2 = _split_const(op, rw)
        if inner_v is None or not _single_use(inner_v) or _producer(inner_v, outer_name) is None:
            return None
        y, c1 = _split_const(inner_v.owner, rw)
        if y is None or op.result.type != inner_v.type:
            return None
        c = combine(c1, c2).astype(c2.dtype)
        if c.ndim > op.result.type.rank or np.broadcast_shapes(c.shape, y.type.shape) != op.result.type.shape:
            return None
        return [rw.create(outer_name, [y, rw.const(c, "combined")])]

    return rewrite


merge_adds = canonical("math.add")(_reassociate("math.add", np.add))
merge_muls = canonical("math.mul")(_reassociate("math.mul", np.multiply))


@canonical("math.mul")
def scale_through_shift(op, rw):
    """(y + c) * s -> y * s + c * s, so the scale can reach the anchor before y."""
    inner_v, s = _split_const(op, rw)
    if inner_v is None or not _single_use(inner_v) or _producer(inner_v, "math.add") is None:
        return None
    y, c = _split_const(inner_v.owner, rw)
    found = None if y is None else _anchor_channels(y, rw)
    if found is None or op.result.type != inner_v.type:
        return None
    axis = found[1]
    if per_channel(s, y.type.rank, axis, y.type.shape[axis]) is None:
        return None  # the scale could not reach the anchor's weights
    scaled = rw.create("math.mul", [y, rw.const(s, "scale")])
    return [rw.create("math.add", [scaled, rw.const((c * s).astype(c.dtype), "shift")])]


# --- 1-D convolutions as 2-D ones ---------------------------------------------------------
@canonical("nn.conv")
def conv_1d_as_2d(op, rw):
    """conv1d(x[N, C, W]) -> reshape(conv2d(x[N, C, 1, W])): every backend's
    2-D conv kernels (and the layout pass) take it. The reshapes around it
    sink below the elementwise ops after it (sink_unit_reshape) and cancel
    between two convs."""
    x, w = op.operands[0], op.operands[1]
    if x.type.rank != 3 or w.type.rank != 3:
        return None
    attrs = op.attributes
    (stride,), (dilation,), (begin, end) = attrs["strides"], attrs["dilations"], attrs["pads"]
    n, c, width = x.type.shape
    x4 = rw.create("tensor.reshape", [x], shape=(n, c, 1, width))
    w4 = rw.create("tensor.reshape", [w], shape=(*w.type.shape[:2], 1, w.type.shape[2]))
    conv = rw.create("nn.conv", [x4, w4, *op.operands[2:]], **{
        **attrs, "strides": (1, stride), "dilations": (1, dilation), "pads": (0, begin, 0, end)})
    return [rw.create("tensor.reshape", [conv], shape=op.result.type.shape)]


def _unit_map(src: tuple, dst: tuple) -> list[int] | None:
    """For a reshape from ``src`` to ``dst`` that only adds or drops unit
    dims: the ``src`` dim of each dim of ``dst`` that is not 1 (None for
    the 1s); None when the reshape moves data otherwise."""
    if [d for d in src if d != 1] != [d for d in dst if d != 1]:
        return None
    others = iter(i for i, d in enumerate(src) if d != 1)
    return [None if d == 1 else next(others) for d in dst]


def _sinkable(op) -> bool:
    from ..ir.registry import Kind, lookup

    d = lookup(op.name)
    return (d is not None and d.kind in (Kind.ELEMWISE, Kind.BROADCAST) and len(op.results) == 1
            and not op.regions and not any(spec.type in ("int", "ints") for spec in d.attrs.values()))


@canonical("*")
def sink_unit_reshape(op, rw):
    """f(reshape(x), c) -> reshape(f(x, c')) for an elementwise ``f`` and a
    reshape that only adds or drops unit dims, its other operands the same
    reshape of values of x's shape or constants (re-laid out for x's
    shape). So the ops after a 1-D conv made 2-D join its epilogue, and
    BatchNorm's per-channel scale meets the conv's weights."""
    if not _sinkable(op):
        return None
    out = op.result.type.shape
    source = None
    for v in op.operands:
        r = _producer(v, "tensor.reshape")
        if r is not None and _unit_map(r.operands[0].type.shape, v.type.shape) is not None:
            source = r.operands[0].type.shape
            break
    if source is None or source == out:
        return None
    mapping = _unit_map(source, out)
    if mapping is None:
        return None
    operands = []
    for v in op.operands:
        r = _producer(v, "tensor.reshape")
        if r is not None and r.operands[0].type.shape == source and v.type.shape == out:
            operands.append(r.operands[0])
            continue
        c = rw.value(v)
        if c is None or c.ndim > len(out):
            return None
        full = c.reshape((1,) * (len(out) - c.ndim) + c.shape)
        if any(m is None and k != 1 for m, k in zip(mapping, full.shape)):
            return None
        shape = [1] * len(source)
        for m, k in zip(mapping, full.shape):
            if m is not None:
                shape[m] = k
        operands.append(rw.const(full.reshape(shape), "const"))
    inner = rw.create(op.name, operands, **op.attributes)
    if inner.type.shape != source:
        return None
    return [rw.create("tensor.reshape", [inner], shape=out)]


#: every pattern above, in the order they were defined (the order they are tried in)
PATTERNS = tuple(_PATTERNS)


@register_pass
@dataclass(frozen=True)
class Canonicalize(Pass):
    """Fold constants, remove no-op data movement, fold BatchNorm and
    per-channel scales/shifts into conv and matmul weights."""

    name: ClassVar[str] = "canonicalize"
    title: ClassVar[str] = "Canonicalizer"
    fold: bool = True

    def run(self, module: Module) -> bool:
        from .dce import prune_blobs

        changed = apply_patterns(module, PATTERNS, fold=self.fold)
        return prune_blobs(module) or changed
