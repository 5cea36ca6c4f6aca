"""ONNX DFT and STFT as products with constant cosine and sine tables.

A transform of length L along one axis is ``x @ W`` with ``W[n, k] =
exp(-+2 pi i n k / L)`` split into its real and imaginary tables, so it
runs as the matmuls braze already schedules (no FFT: O(L^2) work per
signal, which is what short audio frames and test signals need). The
products accumulate in float64 and round once, as an FFT in double would.
"""

from __future__ import annotations

import numpy as np

from ..registry import converter
from .reduce import onnx_axis


@converter("DFT", since=17)
def dft_v17(ctx, input, dft_length=None, *, axis=1, inverse=0, onesided=0):  # noqa: A002  (ONNX's input name)
    return _dft(ctx, input, dft_length, axis, inverse, onesided)


@converter("DFT", since=20)
def dft(ctx, input, dft_length=None, axis=None, *, inverse=0, onesided=0):  # noqa: A002
    return _dft(ctx, input, dft_length, ctx.scalar(axis, -2, "'axis'"), inverse, onesided)


def _dft(ctx, x, dft_length, axis: int, inverse: int, onesided: int):
    """x [..., 1 or 2] (real, or real and imaginary) -> [..., 2] ([..., 1]
    for the inverse of a one-sided spectrum, a real signal)."""
    rank = x.type.rank
    if x.type.shape[-1] not in (1, 2):
        raise ctx.error(f"the last axis of {x.type} must hold 1 (real) or 2 (complex) values")
    axis = onnx_axis(ctx, axis, rank)
    if axis == rank - 1:
        raise ctx.error("the transform axis cannot be the last one, which holds the real and imaginary parts")
    n = x.type.shape[axis]
    length = int(ctx.scalar(dft_length, n, "'dft_length'"))
    if inverse and onesided:  # a one-sided spectrum back to a real signal of length 2 (n - 1)
        length = int(ctx.scalar(dft_length, 2 * (n - 1), "'dft_length'"))
    real, imag = _parts(ctx, x)
    real, imag = (_along_last(ctx, v, axis) for v in (real, imag))
    if inverse and onesided:
        real, imag = _hermitian(ctx, real, imag, length)
    else:
        real, imag = (_fit(ctx, v, length) for v in (real, imag))
    bins = length // 2 + 1 if onesided and not inverse else length
    yr, yi = _transform(ctx, real, imag, length, bins, inverse)
    parts = (yr,) if inverse and onesided else (yr, yi)  # the inverse of a one-sided spectrum is real
    out = [_from_last(ctx, v, axis) for v in parts]
    shape = out[0].type.shape
    out = [ctx.op("tensor.reshape", [v], shape=shape + (1,)) for v in out]
    return out[0] if len(out) == 1 else ctx.op("tensor.concat", out, axis=rank - 1)


@converter("STFT", since=17)
def stft(ctx, signal, frame_step, window=None, frame_length=None, *, onesided=1):
    """Frames of ``frame_length`` every ``frame_step`` samples, times the
    window, each transformed: [batch, frames, bins, 2]."""
    step = int(ctx.scalar(frame_step, what="'frame_step'"))
    size = int(ctx.scalar(frame_length, window.type.shape[0] if window is not None else None, "'frame_length'"))
    if size is None:
        raise ctx.error("needs a window or a frame_length")
    batch, samples = signal.type.shape[:2]
    frames = (samples - size) // step + 1
    real, imag = _parts(ctx, signal)  # [batch, samples]
    index = np.arange(frames)[:, None] * step + np.arange(size)[None, :]  # [frames, size]
    real, imag = (ctx.op("tensor.gather", [v, ctx.const(index.astype(np.int64))], axis=1) for v in (real, imag))
    if window is not None:
        w = ctx.op("math.cast", [window], to=real.type.dtype) if window.type.dtype != real.type.dtype else window
        real, imag = (ctx.op("math.mul", [v, w]) for v in (real, imag))
    bins = size // 2 + 1 if onesided else size
    yr, yi = _transform(ctx, real, imag, size, bins, 0)  # [batch, frames, bins]
    out = [ctx.op("tensor.reshape", [v], shape=(batch, frames, bins, 1)) for v in (yr, yi)]
    return ctx.op("tensor.concat", out, axis=3)


def _parts(ctx, x):
    """(real, imaginary) of x [..., 1 or 2], the last axis dropped (zeros
    for a real signal)."""
    shape = x.type.shape
    parts = []
    for k in range(2):
        if k < shape[-1]:
            part = ctx.op("tensor.slice", [x], starts=(0,) * (len(shape) - 1) + (k,), ends=shape[:-1] + (k + 1,),
                          steps=(1,) * len(shape))
            parts.append(ctx.op("tensor.reshape", [part], shape=shape[:-1]))
        else:
            parts.append(ctx.const(np.zeros(shape[:-1], x.type.np_dtype)))
    return parts


def _along_last(ctx, v, axis):
    perm = [i for i in range(v.type.rank) if i != axis] + [axis]
    return v if axis == v.type.rank - 1 else ctx.op("tensor.transpose", [v], perm=tuple(perm))


def _from_last(ctx, v, axis):
    rank = v.type.rank
    if axis == rank - 1:
        return v
    perm = list(range(rank - 1))
    perm.insert(axis, rank - 1)
    return ctx.op("tensor.transpose", [v], perm=tuple(perm))


def _fit(ctx, v, length):
    """The last axis cut or zero-padded to ``length``."""
    n = v.type.shape[-1]
    if n > length:
        shape = v.type.shape
        return ctx.op("tensor.slice", [v], starts=(0,) * len(shape), ends=shape[:-1] + (length,),
                      steps=(1,) * len(shape))
    if n < length:
        return ctx.op("tensor.pad", [v], pads=(0,) * v.type.rank + (0,) * (v.type.rank - 1) + (length - n,),
                      mode="constant", value=0.0)
    return v


def _hermitian(ctx, real, imag, length):
    """A one-sided spectrum [..., n] completed to [..., length] by
    conjugate symmetry (X[L - k] = conj(X[k]))."""
    n = real.type.shape[-1]
    rest = length - n
    if rest <= 0:
        return _fit(ctx, real, length), _fit(ctx, imag, length)
    index = ctx.const(np.array([length - k for k in range(n, length)], np.int64))
    axis = real.type.rank - 1
    mirrored_r = ctx.op("tensor.gather", [real, index], axis=axis)
    mirrored_i = ctx.op("math.neg", [ctx.op("tensor.gather", [imag, index], axis=axis)])
    return (ctx.op("tensor.concat", [real, mirrored_r], axis=axis),
            ctx.op("tensor.concat", [imag, mirrored_i], axis=axis))


def _transform(ctx, real, imag, length, bins, inverse):
    """(real, imaginary) of the DFT of the last axis (``length`` values)
    at ``bins`` frequencies; the inverse divides by ``length``."""
    dtype = real.type.dtype
    angle = 2 * np.pi * np.outer(np.arange(length), np.arange(bins)) / length
    c, s = np.cos(angle), np.sin(angle) * (1 if inverse else -1)
    scale = 1 / length if inverse else 1
    real, imag = (ctx.op("math.cast", [v], to="f64") for v in (real, imag))
    C, S = ctx.const(c * scale), ctx.const(s * scale)
    yr = ctx.op("math.sub", [ctx.op("nn.matmul", [real, C]), ctx.op("nn.matmul", [imag, S])])
    yi = ctx.op("math.add", [ctx.op("nn.matmul", [imag, C]), ctx.op("nn.matmul", [real, S])])
    return tuple(ctx.op("math.cast", [v], to=dtype) for v in (yr, yi))
