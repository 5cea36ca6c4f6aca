"""Blocked channel layouts (NCHWc): ``layout.to_blocked``, ``layout.from_blocked``
and ``nn.conv_blocked``, which the ``layout`` pass (passes/layout.py)
introduces along conv chains.

A blocked tensor ``(N, C/b, *spatial, b)`` holds channel ``c`` of the plain
``(N, C, *spatial)`` tensor at ``[.., c // b, .., c % b]``: ``b`` channels of
one pixel are contiguous, a vector of them for a kernel that vectorizes over
channels. Elementwise ops need no blocked form: they run on the blocked
tensor as on any other (per-channel constants re-laid the same way).
"""

from __future__ import annotations

import numpy as np

from ...errors import VerifyError
from ..registry import Int, Kind, OpDef, register
from .conv import WINDOW_ATTRS, Conv, is_depthwise


def to_blocked_array(x: np.ndarray, block: int) -> np.ndarray:
    """``(N, C, *spatial)`` -> ``(N, C/block, *spatial, block)``."""
    n, c, *spatial = x.shape
    nd = len(spatial)
    return x.reshape(n, c // block, block, *spatial).transpose(0, 1, *range(3, 3 + nd), 2)


def from_blocked_array(x: np.ndarray) -> np.ndarray:
    """``(N, C/b, *spatial, b)`` -> ``(N, C, *spatial)``."""
    n, cb, *spatial, b = x.shape
    nd = len(spatial)
    return x.transpose(0, 1, 2 + nd, *range(2, 2 + nd)).reshape(n, cb * b, *spatial)


@register
class ToBlocked(OpDef):
    """``(N, C, *spatial)`` -> ``(N, C/block, *spatial, block)``: channels in
    blocks of ``block``, innermost; ``C`` must be a multiple of ``block``."""

    name = "layout.to_blocked"
    kind = Kind.INJECTIVE
    operands = ("x",)
    attrs = {"block": Int()}

    def infer(self, x, *, block):
        if x.rank < 3:
            raise VerifyError(f"needs an input of rank 3 or more (N, C, spatial...), got {x}")
        if block < 1 or x.shape[1] % block:
            raise VerifyError(f"block {block} does not divide the {x.shape[1]} channels of {x}")
        return x.with_shape((x.shape[0], x.shape[1] // block, *x.shape[2:], block))

    def evaluate(self, x, *, block):
        return np.ascontiguousarray(to_blocked_array(x, block))


@register
class FromBlocked(OpDef):
    """``(N, C/b, *spatial, b)`` -> ``(N, C, *spatial)``: the plain layout back."""

    name = "layout.from_blocked"
    kind = Kind.INJECTIVE
    operands = ("x",)

    def infer(self, x):
        if x.rank < 4:
            raise VerifyError(f"needs a blocked input of rank 4 or more (N, C/b, spatial..., b), got {x}")
        n, cb, *spatial, b = x.shape
        return x.with_shape((n, cb * b, *spatial))

    def evaluate(self, x):
        return np.ascontiguousarray(from_blocked_array(x))


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
    attrs = {**WINDOW_ATTRS, "group": Int(1), "block": Int()}

    def infer(self, x, w, bias=None, *, strides, pads, dilations, group, block):
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
        y = Conv().infer(plain, w, bias, strides=strides, pads=pads, dilations=dilations, group=group)
        n, _, oh, ow = y.shape
        return y.with_shape((n, m // block, oh, ow, block))

    def evaluate(self, x, w, bias=None, *, strides, pads, dilations, group, block):
        plain = from_blocked_array(x) if x.ndim == 5 else x
        y = Conv().evaluate(plain, w, bias, strides=strides, pads=pads, dilations=dilations, group=group)
        return np.ascontiguousarray(to_blocked_array(y, block))


def _plain_type(x, w):
    """The plain (N, C, H, W) type of a conv_blocked input."""
    if x.rank == 4:
        return x
    n, cb, h, wd, b = x.shape
    return x.with_shape((n, cb * b, h, wd))
