"""The fold-quant pass: dequantize → conv/matmul as a product of the integers.

A quantized model in QDQ form (``onnxruntime.quantization``'s static
quantization, torch's exporter) computes each conv and matmul in float on
dequantized operands::

    DequantizeLinear(x_q, sx, zx) ─┐
    DequantizeLinear(w_q, sw, 0)  ─┴→ Conv/MatMul/Gemm (→ bias, Relu ...) → QuantizeLinear

Since ``(x - zx) * sx`` times ``w * sw`` summed is ``sx * sw`` times the
integer sum ``Σ (x - zx) w``, the pass rewrites the product to::

    acc = nn.conv/nn.matmul(x_q, w_q)          8-bit operands, exact int32 sums
    acc = acc - zx * Σw                          the zero point's term, a constant
    y   = f32(acc) * (sx * sw)                   per tensor or per output channel

(a classifier's 1000 columns computed as 1024, the zero columns cut off
after the product) and leaves everything after it (the bias add, the activation, the next
QuantizeLinear) as it was: elementwise ops that fusion puts in the product's
kernel as its epilogue. A conv pads its input with ``zx`` (``pad_value``),
the integer that stands for 0. Each folded product is marked
``braze.quant = "folded"`` and ``braze.quant_from`` (the ONNX nodes of the
two dequantizes); ``braze explain`` lists them.

In a model with a folded product, every quantize by a constant float32
scale multiplies by the scale's reciprocal (``reciprocal``), as
onnxruntime's fused int8 kernels requantize: a division each element costs
more than the integer product it follows.

A product stays in float (as onnxruntime leaves it) when its operands are
not both dequantized, or the dequantizes are not of the folded form. The
reason is recorded on the op (``braze.quant = "kept: ..."``):

- ``activation scale is not one constant``: the input's scale or zero point
  is per axis or computed at run time;
- ``weight is not a constant``, ``weight scale is not per output channel``;
- ``weight zero point is not zero`` (``onnxruntime.quantization`` writes
  symmetric int8 weights: zero);
- ``uint8 weights``: the integer kernels multiply uint8 by int8;
- ``batched weight``: a matmul's weight must be 2-D;
- ``no int8 conv (matmul) kernel on this target``: the pass's ``convs``
  (``matmuls``) option is off. The pipeline turns convs off on CPUs
  without VNNI (with no int8 dot product, the exact int8 conv does not beat
  the float one) and both on non-CPU targets.

An int8 input is moved to uint8 (``x + 128``, with ``zx + 128``). The pass
runs first, at fusion levels 1 to 3, before constant folding turns the
weights' dequantizes into float constants; level 0 computes the float
graph as written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..ir import Builder, Module, Operation, Value
from ..ir.fold import Evaluator
from ..ir.ops.nn import INT8_DTYPES
from .dce import prune_blobs
from .manager import Pass, register_pass
from .rewrite import remove_dead

#: the attribute on a product op: "folded", or "kept: REASON"
QUANT = "braze.quant"
#: the ONNX nodes of the dequantizes a folded product replaced
QUANT_FROM = "braze.quant_from"
PRODUCTS = ("nn.conv", "nn.matmul")
#: a matmul weight whose columns the first does not divide is padded with
#: zero columns to a multiple of the second (the int8 rules take whole
#: vectors of columns, up to 16 int32 lanes, and AMX tiles of 32)
COLUMN_BLOCK = (16, 32)


@register_pass
@dataclass(frozen=True)
class FoldQuant(Pass):
    """Rewrite dequantize → conv/matmul into integer products (docs/passes.md)."""

    name: ClassVar[str] = "fold-quant"
    title: ClassVar[str] = "FoldQuant"
    #: fold convs (matmuls): off where the target's int8 kernel would not beat its float one
    convs: bool = True
    matmuls: bool = True

    def run(self, module: Module) -> bool:
        func = module.main
        value = Evaluator(module)
        folded = 0
        for op in [op for op in func.body.ops if op.name in PRODUCTS]:
            if not (self.convs if op.name == "nn.conv" else self.matmuls):
                if _dequantized(op.operands[0], value) is not None:
                    op.attributes[QUANT] = f"kept: no int8 {op.name.removeprefix('nn.')} kernel on this target"
                continue
            reason = _fold(op, module, value)
            if reason is None:
                folded += 1
            elif reason:
                op.attributes[QUANT] = f"kept: {reason}"
        if folded:
            for op in func.body.ops:  # requantize as onnxruntime's int8 kernels do
                if op.name == "quant.quantize" and op.attributes.get("compute", "f32") == "f32" \
                        and value(op.operands[1]) is not None:
                    op.attributes["reciprocal"] = True
            remove_dead(func.body)
            prune_blobs(module)
        return bool(folded)


@dataclass
class _Operand:
    """A dequantized operand: the quantized value, its scale and zero point (constants)."""

    op: Operation  # the quant.dequantize
    q: Value
    scale: np.ndarray | None
    zero: np.ndarray | None  # None: no zero point (0)
    data: np.ndarray | None = None  # the quantized weight, where it is not q's value (transposed)


def _dequantized(v: Value, value: Evaluator) -> _Operand | None:
    op = v.owner
    if op is None or op.name != "quant.dequantize":
        return None
    scale = value(op.operands[1])
    zero = value(op.operands[2]) if len(op.operands) > 2 else np.zeros((), op.operands[0].type.np_dtype)
    return _Operand(op, op.operands[0], scale, zero)


def _transposed(v: Value, value: Evaluator) -> _Operand | None:
    """A matrix weight that a transpose of a dequantized constant makes
    (Gemm's ``transB``): the dequantize's operand with the transpose applied."""
    op = v.owner
    if op is None or op.name != "tensor.transpose" or tuple(op.attributes.get("perm", ())) != (1, 0):
        return None
    w = _dequantized(op.operands[0], value)
    if w is None:
        return None

    def t(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else a.reshape((1,) * (2 - a.ndim) + a.shape).T if a.ndim <= 2 else None

    weight = value(w.q)
    return _Operand(w.op, w.q, t(w.scale), t(w.zero), None if weight is None else weight.T)


def _fold(op: Operation, module: Module, value: Evaluator) -> str | None:
    """Fold ``op``; None when folded, else why not ("" when it is no quantized product)."""
    x = _dequantized(op.operands[0], value)
    w = _dequantized(op.operands[1], value) or (_transposed(op.operands[1], value) if op.name == "nn.matmul" else None)
    if x is None and w is None:
        return ""
    if x is None or w is None:
        return "an operand is not dequantized"
    if x.scale is None or x.zero is None or x.scale.size != 1 or x.zero.size != 1:
        return "activation scale is not one constant"
    weight = w.data if w.data is not None else value(w.q)
    if weight is None:
        return "weight is not a constant"
    if weight.dtype != np.int8:
        return "uint8 weights" if weight.dtype == np.uint8 else f"{w.q.type.dtype} weights"
    if w.zero is None or w.zero.any():
        return "weight zero point is not zero"
    if x.q.type.dtype not in INT8_DTYPES:
        return f"{x.q.type.dtype} activations"
    conv = op.name == "nn.conv"
    if not conv and weight.ndim != 2:
        return "batched weight"
    channels = weight.shape[0] if conv else weight.shape[-1]
    scale = _per_channel(w.scale, weight.ndim, 0 if conv else weight.ndim - 1, channels)
    if scale is None:
        return "weight scale is not per output channel"
    _rewrite(op, module, x, w.op, weight, scale * np.float32(x.scale.reshape(())), conv)
    return None


def _per_channel(scale: np.ndarray | None, rank: int, axis: int, channels: int) -> np.ndarray | None:
    """``scale`` as a float32 vector of ``channels`` (a scalar repeated), or
    None when it varies along another axis (or is unknown)."""
    if scale is None:
        return None
    if scale.size == 1:
        return np.full(channels, scale.reshape(()), np.float32)
    shape = (1,) * (rank - scale.ndim) + scale.shape
    if shape[axis] != channels or scale.size != channels:
        return None
    return scale.reshape(channels).astype(np.float32)


def _rewrite(op: Operation, module: Module, x: _Operand, w_op: Operation, weight: np.ndarray, scale: np.ndarray,
             conv: bool):
    b = Builder(module, op.parent, before=op)
    loc = op.loc
    zero = int(x.zero.reshape(()))
    q = x.q
    if q.type.dtype == "i8":  # to uint8: x + 128, with the zero point moved as far
        wide = b.value("math.cast", [q], {"to": "i32"}, loc=loc)
        shifted = b.value("math.add", [wide, b.const(np.int32(128), None, loc)], {}, loc=loc)
        q, zero = b.value("math.cast", [shifted], {"to": "ui8"}, loc=loc), zero + 128
    attrs = dict(op.attributes)
    bias = op.operands[2] if conv and len(op.operands) > 2 else None
    if conv:
        if zero:
            attrs["pad_value"] = zero
        sums = weight.astype(np.int64).reshape(weight.shape[0], -1).sum(axis=1)
        along = (weight.shape[0],) + (1,) * (weight.ndim - 2)  # per output channel, before the spatial dims
    else:
        sums = weight.astype(np.int64).sum(axis=0)
        along = (weight.shape[-1],)
    attrs[QUANT] = "folded"
    attrs[QUANT_FROM] = tuple(n for n in (_node(x.op), _node(w_op)) if n)
    columns, stored = weight.shape[-1], weight
    if not conv and columns % COLUMN_BLOCK[0]:
        # zero columns up to whole blocks (the integer rules take whole vectors), cut off after the product
        wide = -(-columns // COLUMN_BLOCK[1]) * COLUMN_BLOCK[1]
        stored = np.pad(weight, ((0, 0), (0, wide - columns)))
    w = b.const(stored, f"{loc.name}.weight_q" if loc else None, loc)
    acc = b.value(op.name, [q, w], attrs, loc=loc)
    if not conv and acc.type.shape[-1] != columns:
        rank = acc.type.rank
        acc = b.value("tensor.slice", [acc], {"starts": (0,) * rank, "ends": (*acc.type.shape[:-1], columns),
                                             "steps": (1,) * rank}, loc=loc)
    if zero:
        compensation = (zero * sums).astype(np.int32).reshape(along)
        acc = b.value("math.sub", [acc, b.const(compensation, None, loc)], {}, loc=loc)
    y = b.value("math.cast", [acc], {"to": "f32"}, loc=loc)
    y = b.value("math.mul", [y, b.const(scale.reshape(along), None, loc)], {}, loc=loc)
    if bias is not None:
        bias = bias if bias.type.dtype == "f32" else b.value("math.cast", [bias], {"to": "f32"}, loc=loc)
        y = b.value("math.add", [y, b.value("tensor.reshape", [bias], {"shape": along}, loc=loc)], {}, loc=loc)
    if op.result.type.dtype != "f32":
        y = b.value("math.cast", [y], {"to": op.result.type.dtype}, loc=loc)
    op.result.replace_all_uses_with(y)
    op.erase()


def _node(op: Operation | None) -> str | None:
    return op.loc.name if op is not None and op.loc is not None else None
