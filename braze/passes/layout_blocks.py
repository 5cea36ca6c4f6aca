"""How the layout pass blocks a tensor's channels (and pads a conv's
constants to whole blocks), and what it left in a module (``braze
explain``'s layout line)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..ir import Builder, Module, Operation, Value, constant_value
from ..ir.ops.layout import blocks_of

#: uint8 channels of a quantized conv's input that one 32-bit word holds,
#: which one dot-product step takes (VPDPBUSD): its input blocks are
#: multiples of it
INT8_GROUP = 4
#: the narrowest channel block: four float32 lanes, the narrowest vector of any CPU target
MIN_BLOCK = 4
#: the share of a tensor's channels that padding to whole blocks may add:
#: up to it, full-width vectors with some zero lanes beat half-width ones
MAX_PADDING = Fraction(1, 3)
#: pools over the two spatial dims, blocked as 3-D pools with a window of 1 along the block
POOLS = frozenset({"nn.max_pool", "nn.avg_pool"})


def integer_conv(op: Operation) -> bool:
    """A quantized conv the layout pass blocks: uint8 input, int8 weight
    (what the integer conv rules take; fold-quant moves int8 inputs to uint8)."""
    return op.operands[0].type.dtype == "ui8" and op.operands[1].type.dtype == "i8"


def channel_block(channels: int, block: int) -> int | None:
    """The block a tensor of ``channels`` takes without padding: ``block``,
    else half of it (not under ``MIN_BLOCK``), else None."""
    for b in (block, block // 2):
        if b >= MIN_BLOCK and channels % b == 0:
            return b
    return None


def blocking(channels: int, block: int) -> tuple[int, int] | None:
    """(block, padded channels) for a tensor of ``channels``: whole blocks;
    else whole blocks padded, if that adds at most ``MAX_PADDING`` of the
    channels; else half blocks; else None (it stays plain)."""
    padded = blocks_of(channels, block) * block
    if padded - channels <= MAX_PADDING * channels:
        return block, padded
    half = channel_block(channels, block)
    return (half, channels) if half is not None else None


def layout_summary(module: Module) -> dict:
    """What the layout pass left in ``module`` (fused or not), for
    ``braze explain``: convs in the blocked layout (and how many of them
    have padded outputs) and in the plain one, the transforms, and the
    blocks used."""
    ops = [op for op in module.walk() if op.name in ("nn.conv", "nn.conv_blocked", "layout.to_blocked",
                                                      "layout.from_blocked")]
    blocks = sorted({op.results[0].type.shape[-1] for op in ops if op.name == "nn.conv_blocked"})
    return {"blocked_convs": sum(op.name == "nn.conv_blocked" for op in ops),
            "padded_convs": sum(op.name == "nn.conv_blocked" and "braze.channels" in op.attributes for op in ops),
            "plain_convs": sum(op.name == "nn.conv" for op in ops),
            "to_blocked": sum(op.name == "layout.to_blocked" for op in ops),
            "from_blocked": sum(op.name == "layout.from_blocked" for op in ops),
            "blocks": blocks}


def summary_line(summary: dict) -> str:
    """``layout_summary`` as one line of text."""
    if not summary["blocked_convs"]:
        return f"layout: plain ({summary['plain_convs']} convs)" if summary["plain_convs"] else ""
    blocks = ", ".join(f"NCHW{b}c" for b in summary["blocks"])
    padded = f", {summary['padded_convs']} with padded channels" if summary.get("padded_convs") else ""
    return (f"layout: {summary['blocked_convs']} of {summary['blocked_convs'] + summary['plain_convs']} convs "
            f"blocked ({blocks}{padded}), {summary['to_blocked']} to_blocked and {summary['from_blocked']} "
            f"from_blocked transforms")


def padding_fill(name: str, index: int) -> float:
    """What a per-channel constant's padding holds: zero, or one as a
    divisor (a quantize's scale divides)."""
    return 1.0 if name in ("math.div", "quant.quantize") and index == 1 else 0.0


def pad_vector(c: np.ndarray, lanes: int, fill: float = 0.0) -> np.ndarray:
    """A per-channel vector padded with ``fill`` to ``lanes`` channels."""
    if c.shape[0] == lanes:
        return c
    return np.concatenate([c, np.full(lanes - c.shape[0], fill, c.dtype)])


def padded_weights(module: Module, builder: Builder, op: Operation, xb: Value, lanes: int) -> list[Value]:
    """A conv's weight (and bias) for a padded output (``lanes`` channels:
    zero rows) or input (``xb``'s blocked channels: zero columns), at
    compile time."""
    w, *rest = op.operands[1:]
    m, cg, r, s = w.type.shape
    inputs = xb.type.shape[1] * xb.type.shape[4] if xb.type.rank == 5 else xb.type.shape[1]
    cols = cg if cg == 1 or inputs == op.operands[0].type.shape[1] else inputs  # depthwise: one a channel
    if (lanes, cols) == (m, cg):
        return [w, *rest]
    weights = np.zeros((lanes, cols, r, s), w.type.np_dtype)
    weights[:m, :cg] = constant_value(w, module)
    out = [builder.const(weights, w.name, w.owner.loc)]
    if rest and lanes != m:  # a padded output: the bias too
        bias = rest[0]
        return out + [builder.const(pad_vector(constant_value(bias, module).reshape(-1), lanes), bias.name,
                                    bias.owner.loc)]
    return out + rest
