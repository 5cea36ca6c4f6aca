"""Lowerings of the pooling ops: ``nn.max_pool`` and ``nn.avg_pool``.

``avg_pool`` is TOPI's pool (its ``ceil_mode`` and ``count_include_pad``
follow onnxruntime's rules). ``max_pool`` is hand-written so that it
follows the reference on NaN (it wins, in any order) and on padding (-inf,
never the lowest finite float); its output shape comes from the IR type.
"""

from tvm import te, topi

from ..registry import lowering
from .reduce import accumulate, cast, dtype, extreme, worst

_TOPI_POOL = {1: (topi.nn.pool1d, "NCW"), 2: (topi.nn.pool2d, "NCHW"), 3: (topi.nn.pool3d, "NCDHW")}


@lowering("nn.max_pool")
def max_pool(x, *, kernel, strides, pads, dilations, ceil_mode, out_types):
    if dtype(x) == "bfloat16":  # TVM's bf16 legalization cannot store this pool's vectors:
        # the max in float32 (exact), rounded back (exact too)
        y = max_pool(accumulate(x), kernel=kernel, strides=strides, pads=pads, dilations=dilations,
                     ceil_mode=ceil_mode, out_types=out_types)
        return cast(y, "bfloat16")
    out = out_types[0].shape[2:]
    nd, spatial = len(kernel), [int(d) for d in x.shape[2:]]
    # pad the ends as far as the last window reaches (ceil_mode may reach past the pads)
    ends = [max(pads[nd + i], (out[i] - 1) * strides[i] + dilations[i] * (kernel[i] - 1) + 1
                - spatial[i] - pads[i]) for i in range(nd)]
    padded = topi.nn.pad(x, [0, 0, *pads[:nd]], [0, 0, *ends], pad_value=worst(True, dtype(x)), name="pool_pad")
    largest = extreme(True, dtype(x))
    if nd == 2:
        return _separable_max_pool(padded, largest, kernel, strides, dilations, out_types[0].shape)
    taps = [te.reduce_axis((0, k), name=f"r{i}") for i, k in enumerate(kernel)]

    def at(n, c, *o):
        where = [oi * s + r * d for oi, s, r, d in zip(o, strides, taps, dilations)]
        return largest(padded[(n, c, *where)], axis=taps)

    # the output row is innermost in the input too: the schedule vectorizes along it (schedules/generic.py)
    return te.compute(out_types[0].shape, at, name="max_pool", attrs={"braze.trailing": 1})


def _separable_max_pool(padded, largest, kernel, strides, dilations, shape):
    """A 2-D max pool as a max down the columns (whole rows, contiguous
    vectors) then along the row: the same value (max is associative, NaN
    wins in either order) with kh + kw taps per output instead of kh * kw.
    The first stage is computed one row at a time inside the second's loop
    (``braze.at_consumer``), so the row stays in L1."""
    n, c, oh, ow = (int(d) for d in shape)
    width = int(padded.shape[3])

    r0 = te.reduce_axis((0, kernel[0]), name="r0")
    rows = te.compute((n, c, oh, width),
                      lambda b, ch, i, j: largest(padded[b, ch, i * strides[0] + r0 * dilations[0], j], axis=[r0]),
                      name="max_pool_rows", attrs={"braze.at_consumer": 1, "braze.trailing": 1})
    r1 = te.reduce_axis((0, kernel[1]), name="r1")
    return te.compute((n, c, oh, ow),
                      lambda b, ch, i, j: largest(rows[b, ch, i, j * strides[1] + r1 * dilations[1]], axis=[r1]),
                      name="max_pool", attrs={"braze.trailing": 1})


@lowering("nn.avg_pool")
def avg_pool(x, *, kernel, strides, pads, dilations, ceil_mode, count_include_pad):
    pool, layout = _TOPI_POOL[len(kernel)]
    y = pool(accumulate(x), list(kernel), list(strides), list(dilations), list(pads), "avg", ceil_mode, layout,
             count_include_pad)
    return cast(y, dtype(x))
