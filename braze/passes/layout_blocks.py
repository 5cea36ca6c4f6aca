"""How the layout pass blocks a tensor's channels, and what it left in a
module (``braze explain``'s layout line)."""

from __future__ import annotations

from ..ir import Module
from ..ir.ops.layout import blocks_of


def channel_block(channels: int, block: int) -> int | None:
    """The block a tensor of ``channels`` takes without padding: ``block``,
    else half of it (not under 4), else None."""
    for b in (block, block // 2):
        if b >= 4 and channels % b == 0:
            return b
    return None


def blocking(channels: int, block: int) -> tuple[int, int] | None:
    """(block, padded channels) for a tensor of ``channels``: whole blocks;
    else whole blocks padded, if that adds at most a third of the channels;
    else half blocks; else None (it stays plain)."""
    padded = blocks_of(channels, block) * block
    if 3 * padded <= 4 * channels:
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
