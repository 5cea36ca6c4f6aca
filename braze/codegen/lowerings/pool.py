"""Lowerings of the pooling ops: ``nn.max_pool`` and ``nn.avg_pool``.

Hand-written windows rather than ``topi.nn.pool*d``: TOPI's ``ceil_mode``
keeps a last window that starts in the end padding (onnxruntime drops it),
and its ``count_include_pad`` divisor counts the room that ``ceil_mode``
adds, which onnxruntime never counts. The output shape comes from the IR
type (the op's ``infer`` applies onnxruntime's rules).
"""

from tvm import te, topi

from ..registry import lowering
from .reduce import accumulate, cast, dtype, extreme, worst


def _padded(x, pads, out, kernel, strides, dilations, value):
    """``x`` padded by ``pads`` and, at the ends, as far as the last window reaches."""
    nd = len(kernel)
    spatial = [int(d) for d in x.shape[2:]]
    ends = [max(pads[nd + i], (out[i] - 1) * strides[i] + dilations[i] * (kernel[i] - 1) + 1
                - spatial[i] - pads[i]) for i in range(nd)]
    return topi.nn.pad(x, [0, 0, *pads[:nd]], [0, 0, *ends], pad_value=value, name="pool_pad")


def _taps(kernel):
    return [te.reduce_axis((0, k), name=f"r{i}") for i, k in enumerate(kernel)]


@lowering("nn.max_pool")
def max_pool(x, *, kernel, strides, pads, dilations, ceil_mode, out_types):
    # as the reference's: padding is -inf (never wins) and NaN wins
    out = out_types[0].shape[2:]
    largest = extreme(True, dtype(x))
    padded = _padded(x, pads, out, kernel, strides, dilations, worst(True, dtype(x)))
    taps = _taps(kernel)

    def at(n, c, *o):
        where = [oi * s + r * d for oi, s, r, d in zip(o, strides, taps, dilations)]
        return largest(padded[(n, c, *where)], axis=taps)

    return te.compute(out_types[0].shape, at, name="max_pool")


@lowering("nn.avg_pool")
def avg_pool(x, *, kernel, strides, pads, ceil_mode, count_include_pad, out_types):
    out = out_types[0].shape[2:]
    nd, ones = len(kernel), (1,) * len(kernel)
    padded = _padded(accumulate(x), pads, out, kernel, strides, ones, 0.0)
    taps = _taps(kernel)
    spatial = [int(d) for d in x.shape[2:]]
    # the counted range of each spatial dim, in input coordinates
    lows = [-pads[i] if count_include_pad else 0 for i in range(nd)]
    highs = [spatial[i] + (pads[nd + i] if count_include_pad else 0) for i in range(nd)]

    def total(n, c, *o):
        return te.sum(padded[(n, c, *[oi * s + r for oi, s, r in zip(o, strides, taps)])], axis=taps)

    sums = te.compute(out_types[0].shape, total, name="avg_pool_sum")

    def mean(n, c, *o):
        count = 1
        for oi, k, s, p, lo, hi in zip(o, kernel, strides, pads, lows, highs):
            start = oi * s - p
            count *= te.min(start + k, hi) - te.max(start, lo)
        return sums[(n, c, *o)] / count.astype(sums.dtype)

    return cast(te.compute(sums.shape, mean, name="avg_pool"), dtype(x))
