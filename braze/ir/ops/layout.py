"""Blocked channel layouts (NCHWc): ``layout.to_blocked``, ``layout.from_blocked``
and ``nn.conv_blocked``, which the ``layout`` pass (passes/layout.py)
introduces along conv chains.

A blocked tensor ``(N, C/b, *spatial, b)`` holds channel ``c`` of the plain
``(N, C, *spatial)`` tensor at ``[.., c // b, .., c % b]``: ``b`` channels of
one pixel are contiguous, a vector of them for a kernel that vectorizes over
channels. Elementwise ops need no blocked form: they run on the blocked
tensor as on any other (per-channel constants re-laid the same way).

A tensor whose channels ``b`` does not divide is *padded*: its last block
holds ``C % b`` channels and then padding channels up to the block.
``to_blocked`` fills them with zeros; ``from_blocked{channels=C}`` drops
them. In between they are channels like any other to every op (the layout
pass pads the weights and constants it re-lays with zeros, so a conv's
padding channels read and write nothing that counts; passes/layout.py).
"""

from __future__ import annotations

import numpy as np

from ...errors import VerifyError
from ..registry import Int, Kind, OpDef, register
from .conv import CONV_ATTRS, WINDOW_ATTRS, Conv, is_depthwise


def blocks_of(channels: int, block: int) -> int:
    """The blocks ``channels`` take (the last one padded when ``block`` does not divide them)."""
    return -(-channels // block)


def to_blocked_array(x: np.ndarray, block: int) -> np.ndarray:
    """``(N, C, *spatial)`` -> ``(N, ceil(C/block), *spatial, block)``, padded with zeros."""
    n, c, *spatial = x.shape
    nd = len(spatial)
    cb = blocks_of(c, block)
    if cb * block != c:
        x = np.concatenate([x, np.zeros((n, cb * block - c, *spatial), x.dtype)], axis=1)
    return x.reshape(n, cb, block, *spatial).transpose(0, 1, *range(3, 3 + nd), 2)


def from_blocked_array(x: np.ndarray, channels: int = 0) -> np.ndarray:
    """``(N, C/b, *spatial, b)`` -> ``(N, C, *spatial)``; the first ``channels`` (0: all)."""
    n, cb, *spatial, b = x.shape
    nd = len(spatial)
    plain = x.transpose(0, 1, 2 + nd, *range(2, 2 + nd)).reshape(n, cb * b, *spatial)
    return plain[:, :channels] if channels else plain


@register
class ToBlocked(OpDef):
    """``(N, C, *spatial)`` -> ``(N, ceil(C/block), *spatial, block)``:
    channels in blocks of ``block``, innermost; when ``block`` does not
    divide ``C``, the last block is padded with zeros."""

    name = "layout.to_blocked"
    kind = Kind.INJECTIVE
    operands = ("x",)
    attrs = {"block": Int()}

    def infer(self, x, *, block):
        if x.rank < 3:
            raise VerifyError(f"needs an input of rank 3 or more (N, C, spatial...), got {x}")
        if block < 1:
            raise VerifyError(f"block must be at least 1, got {block}")
        return x.with_shape((x.shape[0], blocks_of(x.shape[1], block), *x.shape[2:], block))

    def evaluate(self, x, *, block):
        return np.ascontiguousarray(to_blocked_array(x, block))


@register
class FromBlocked(OpDef):
    """``(N, C/b, *spatial, b)`` -> ``(N, C, *spatial)``: the plain layout
    back, its first ``channels`` channels (0: all ``C/b * b``; fewer drop
    a padded tensor's padding)."""

    name = "layout.from_blocked"
    kind = Kind.INJECTIVE
    operands = ("x",)
    attrs = {"channels": Int(0)}

    def infer(self, x, *, channels):
        if x.rank < 4:
            raise VerifyError(f"needs a blocked input of rank 4 or more (N, C/b, spatial..., b), got {x}")
        n, cb, *spatial, b = x.shape
        if channels and not (cb * b - b < channels <= cb * b):
            raise VerifyError(f"channels={channels} must fill the last of the {cb} blocks of {b} of {x}")
        return x.with_shape((n, channels or cb * b, *spatial))

    def evaluate(self, x, *, channels):
        return np.ascontiguousarray(from_blocked_array(x, channels))


@register
class ConvBlocked(OpDef):
    """2-D convolution (``nn.conv``) from and to blocked layouts: ``x`` is
    blocked ``(N, C/bi, H, W, bi)``, or plain ``(N, C, H, W)`` (a first conv
    whose few input channels fill no block); ``w`` is ``(M, C/group, R, S)``
    as in ``nn.conv`` (a schedule rule packs it at compile time); optional
    ``bias`` ``(M,)``. The result is ``(N, M/block, OH, OW, block)``.
    ``group`` is 1 (dense), the channel count (depthwise, one weight per
    channel), or a count whose groups are whole blocks of input and output
    channels (grouped: RegNet's convs); both with ``bi == block``."""

    name = "nn.conv_blocked"
    contraction = "conv"
    kind = Kind.ANCHOR
    operands = ("x", "w", "bias?")
    attrs = {**WINDOW_ATTRS, **CONV_ATTRS, "block": Int()}

    def infer(self, x, w, bias=None, *, strides, pads, dilations, group, block, pad_value=0):
        if w.rank != 4 or x.rank not in (4, 5):
            raise VerifyError(f"needs a 2-D conv: weight of rank 4 and an input of rank 4 (plain) or 5 "
                              f"(blocked), got {x} and {w}")
        plain = _plain_type(x, w)
        m = w.shape[0]
        if block < 1 or m % block:
            raise VerifyError(f"block {block} does not divide the {m} output channels")
        depthwise = is_depthwise(group, plain.shape[1], m, w.shape[1])
        whole = group > 0 and w.shape[1] % block == 0 and (m // group) % block == 0
        if group != 1 and not ((depthwise or whole) and x.rank == 5 and x.shape[-1] == block):
            raise VerifyError(f"group must be 1, or (depthwise, or groups of whole blocks of input and output "
                              f"channels) with a blocked input of the output's block; got group={group} for "
                              f"{x} and {w}")
        y = Conv().infer(plain, w, bias, strides=strides, pads=pads, dilations=dilations, group=group,
                         pad_value=pad_value)
        n, _, oh, ow = y.shape
        return y.with_shape((n, m // block, oh, ow, block))

    def evaluate(self, x, w, bias=None, *, strides, pads, dilations, group, block, pad_value=0):
        plain = from_blocked_array(x) if x.ndim == 5 else x
        y = Conv().evaluate(plain, w, bias, strides=strides, pads=pads, dilations=dilations, group=group,
                            pad_value=pad_value)
        return np.ascontiguousarray(to_blocked_array(y, block))


def blocked_depthwise(op) -> bool:
    """Whether ``op`` is a depthwise ``nn.conv_blocked`` (one weight a channel)."""
    if op.name != "nn.conv_blocked":
        return False
    x, w = op.operands[0].type, op.operands[1].type
    channels = x.shape[1] * x.shape[4] if x.rank == 5 else x.shape[1]
    return is_depthwise(ConvBlocked().normalize_attrs(op.attributes)["group"], channels, w.shape[0], w.shape[1])


def blocked_pointwise(op) -> bool:
    """Whether ``op`` is a 1x1, stride-1, unpadded dense ``nn.conv_blocked``
    with a blocked input (an inverted residual block's expansion)."""
    if op.name != "nn.conv_blocked" or op.operands[0].type.rank != 5:
        return False
    a = ConvBlocked().normalize_attrs(op.attributes)
    return (tuple(op.operands[1].type.shape[2:]) == (1, 1) and set(a["strides"]) == {1}
            and set(a["pads"]) == {0} and a["group"] == 1)


def _plain_type(x, w):
    """The plain (N, C, H, W) type of a conv_blocked input."""
    if x.rank == 4:
        return x
    n, cb, h, wd, b = x.shape
    return x.with_shape((n, cb * b, h, wd))
