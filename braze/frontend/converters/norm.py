"""ONNX's newer normalizations and RoPE, decomposed into existing IR ops:
RMSNormalization, GroupNormalization and RotaryEmbedding.

The statistics are taken in float32 (ONNX's ``stash_type=1``; opset-18
GroupNormalization: at least float32) and the normalized result is cast
back to X's type before the scale applies, as the ops' function bodies do.
"""

from __future__ import annotations

import numpy as np

from ..registry import converter
from .reduce import onnx_axis

SIXTEEN_BIT = ("f16", "bf16")


def _stash_type(ctx, stash_type: int) -> None:
    if stash_type != 1:
        raise ctx.error(f"stash_type={stash_type} is not supported; braze keeps the statistics in "
                        "float32 (stash_type=1)")


def _as(ctx, x, dtype: str):
    return x if x.type.dtype == dtype else ctx.op("math.cast", [x], to=dtype)


def _rms(ctx, x, axes: tuple[int, ...], epsilon: float, centered: bool):
    """sqrt(mean(x ** 2) + epsilon) over ``axes`` (of x - mean(x) when
    ``centered``), kept as dims of size 1; also returns x (centered or not)."""
    if centered:
        x = ctx.op("math.sub", [x, ctx.op("reduce.mean", [x], axes=axes, keepdims=True)])
    mean_square = ctx.op("reduce.mean", [ctx.op("math.mul", [x, x])], axes=axes, keepdims=True)
    shifted = ctx.op("math.add", [mean_square, ctx.const(np.array(epsilon, x.type.np_dtype))])
    return x, ctx.op("math.sqrt", [shifted])


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Unidirectional (numpy) broadcasting of ``shape`` to ``target``."""
    return len(shape) <= len(target) and all(d in (1, t) for d, t in zip(reversed(shape), reversed(target)))


# --- RMSNormalization -------------------------------------------------------------------
@converter("RMSNormalization", since=23)
def rms_normalization(ctx, X, scale, *, axis=-1, epsilon=1e-5, stash_type=1):
    _stash_type(ctx, stash_type)
    if scale.type.dtype != X.type.dtype:
        raise ctx.error(f"scale {scale.type} must have X's element type {X.type.dtype}")
    if not _broadcasts_to(scale.type.shape, X.type.shape):
        raise ctx.error(f"scale {scale.type} does not broadcast to X {X.type}")
    axes = tuple(range(onnx_axis(ctx, axis, X.type.rank), X.type.rank))
    x, rms = _rms(ctx, _as(ctx, X, "f32"), axes, epsilon, centered=False)
    normalized = _as(ctx, ctx.op("math.div", [x, rms]), X.type.dtype)
    return ctx.op("math.mul", [normalized, scale])


# --- GroupNormalization -----------------------------------------------------------------
def _group_normalize(ctx, X, num_groups: int, epsilon: float, stash: str):
    """X (N, C, ...) normalized per (instance, group of C / num_groups
    channels), in ``stash`` precision, returned as (N, num_groups, -1)."""
    if X.type.rank < 2:
        raise ctx.error(f"needs an input of rank 2 or more (N, C, ...), got {X.type}")
    n, c = X.type.shape[:2]
    if num_groups <= 0 or c % num_groups:
        raise ctx.error(f"num_groups={num_groups} does not divide the {c} channels")
    shape = (n, num_groups, X.type.size // (n * num_groups))
    grouped = ctx.op("tensor.reshape", [_as(ctx, X, stash)], shape=shape)
    centered, std = _rms(ctx, grouped, (2,), epsilon, centered=True)
    return ctx.op("math.div", [centered, std])


def _affine(ctx, x, scale, bias, what: str, count: int):
    """x * scale + bias with (count,) parameters along x's dim 1."""
    for name, p in (("scale", scale), ("bias", bias)):
        if p.type.shape != (count,):
            raise ctx.error(f"{name} must have one value per {what} ({count},), got {p.type}")
    shape = (count,) + (1,) * (x.type.rank - 2)
    scale, bias = (ctx.op("tensor.reshape", [p], shape=shape) for p in (scale, bias))
    return ctx.op("math.add", [ctx.op("math.mul", [x, scale]), bias])


@converter("GroupNormalization", since=18)
def group_normalization_18(ctx, X, scale, bias, *, num_groups, epsilon=1e-5):
    """Opset 18: scale and bias per group (ONNX deprecated this form at 21)."""
    stash = "f32" if X.type.dtype in SIXTEEN_BIT else X.type.dtype
    y = _as(ctx, _group_normalize(ctx, X, num_groups, epsilon, stash), X.type.dtype)
    y = _affine(ctx, y, scale, bias, "group", num_groups)
    return ctx.op("tensor.reshape", [y], shape=X.type.shape)


@converter("GroupNormalization", since=21)
def group_normalization(ctx, X, scale, bias, *, num_groups, epsilon=1e-5, stash_type=1):
    """Opset 21: scale and bias per channel."""
    _stash_type(ctx, stash_type)
    y = _group_normalize(ctx, X, num_groups, epsilon, "f32")
    y = _as(ctx, ctx.op("tensor.reshape", [y], shape=X.type.shape), X.type.dtype)
    return _affine(ctx, y, scale, bias, "channel", X.type.shape[1])


# --- RotaryEmbedding --------------------------------------------------------------------
@converter("RotaryEmbedding", since=23)
def rotary_embedding(ctx, X, cos_cache, sin_cache, position_ids=None, *, interleaved=0, num_heads=0,
                     rotary_embedding_dim=0):
    """X is (B, H, S, D), or (B, S, H * D) with ``num_heads``; the first
    ``rotary_embedding_dim`` (0: all D) of each head rotate, by pairs
    (i, i + dim / 2), or (2i, 2i + 1) when ``interleaved``."""
    if interleaved not in (0, 1):
        raise ctx.error(f"interleaved={interleaved} is not supported; it must be 0 or 1")
    x, heads_axis = _heads(ctx, X, num_heads)
    head = x.type.shape[-1]
    rotary = rotary_embedding_dim or head
    if rotary < 0 or rotary % 2 or rotary > head:
        raise ctx.error(f"rotary_embedding_dim={rotary_embedding_dim} must be even and at most the "
                        f"head size {head}")
    cos, sin = (_cache(ctx, c, position_ids, x, heads_axis, rotary // 2) for c in (cos_cache, sin_cache))
    x1, x2, rest = _halves(ctx, x, rotary, interleaved)
    real = ctx.op("math.sub", [ctx.op("math.mul", [cos, x1]), ctx.op("math.mul", [sin, x2])])
    imag = ctx.op("math.add", [ctx.op("math.mul", [sin, x1]), ctx.op("math.mul", [cos, x2])])
    y = _interleave(ctx, real, imag) if interleaved else ctx.op("tensor.concat", [real, imag], axis=3)
    if rest is not None:
        y = ctx.op("tensor.concat", [y, rest], axis=3)
    return ctx.op("tensor.reshape", [y], shape=X.type.shape) if X.type.rank == 3 else y


def _heads(ctx, X, num_heads: int):
    """X as 4-D with the head dim last, and the axis of its heads: (B, H, S, D)
    as it is, (B, S, H * D) viewed as (B, S, H, D)."""
    if X.type.rank == 4:  # num_heads is not needed
        return X, 1
    if X.type.rank != 3:
        raise ctx.error(f"needs a 3-D (batch, seq, hidden) or 4-D (batch, heads, seq, head) input, "
                        f"got {X.type}")
    b, s, hidden = X.type.shape
    if num_heads <= 0 or hidden % num_heads:
        raise ctx.error(f"num_heads={num_heads} must be positive and divide the hidden size {hidden} of a "
                        "3-D input")
    return ctx.op("tensor.reshape", [X], shape=(b, s, num_heads, hidden // num_heads)), 2


def _cache(ctx, cache, position_ids, x, heads_axis: int, half: int):
    """The (batch, seq, half) cos or sin values, picked by position_ids when
    given, with a dim of 1 inserted at ``heads_axis`` to broadcast over x."""
    if position_ids is not None:
        if cache.type.rank != 2:
            raise ctx.error(f"with position_ids, the caches must be 2-D (max position, "
                            f"rotary_embedding_dim / 2), got {cache.type}")
        cache = ctx.op("tensor.gather", [cache, position_ids], axis=0)
    batch, seq = x.type.shape[0], x.type.shape[3 - heads_axis]
    shape = cache.type.shape
    if cache.type.rank != 3 or shape[0] not in (1, batch) or shape[1] not in (1, seq) or shape[2] != half:
        raise ctx.error(f"the caches must be ({batch}, {seq}, {half}) (batch, seq, rotary_embedding_dim / 2) "
                        f"once gathered, got {cache.type}")
    return ctx.op("tensor.reshape", [cache], shape=shape[:heads_axis] + (1,) + shape[heads_axis:])


def _halves(ctx, x, rotary: int, interleaved: int):
    """The two halves of x's first ``rotary`` values on the last dim (every
    other one when ``interleaved``) and the values after them (None if none)."""
    head = x.type.shape[-1]

    def last(start, end, step=1):
        starts, ends = (0, 0, 0, start), (*x.type.shape[:3], end)
        return ctx.op("tensor.slice", [x], starts=starts, ends=ends, steps=(1, 1, 1, step))

    rest = last(rotary, head) if rotary < head else None
    if interleaved:
        return last(0, rotary, 2), last(1, rotary, 2), rest
    return last(0, rotary // 2), last(rotary // 2, rotary), rest


def _interleave(ctx, a, b):
    """(..., n) and (..., n) -> (..., 2n) as a0, b0, a1, b1, ..."""
    pairs = [ctx.op("tensor.reshape", [v], shape=(*v.type.shape, 1)) for v in (a, b)]
    stacked = ctx.op("tensor.concat", pairs, axis=a.type.rank)
    return ctx.op("tensor.reshape", [stacked], shape=(*a.type.shape[:-1], 2 * a.type.shape[-1]))
