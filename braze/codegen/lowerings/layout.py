"""Lowerings of the blocked layout ops (ir/ops/layout.py): the two layout
transforms and ``nn.conv_blocked``, whose block the ``blocked`` schedule
rule takes (schedules/blocked.py)."""

from tvm import te, tirx, topi

from ..registry import anchor_attrs, lowering
from .conv import accumulator_dtype, cast, dtype, pad_spatial, result_dtype


@lowering("layout.to_blocked")
def to_blocked(x, *, block):
    n, c, *spatial = (int(d) for d in x.shape)
    cb = -(-c // block)

    def at(b, co, *rest):
        channel = co * block + rest[-1]
        if cb * block == c:
            return x[(b, channel, *rest[:-1])]
        # the last block's padding: zeros (no read beyond the channels)
        return te.if_then_else(channel < c, x[(b, channel, *rest[:-1])], tirx.const(0, x.dtype))

    return te.compute((n, cb, *spatial, block), at, name="to_blocked")


@lowering("layout.from_blocked")
def from_blocked(x, *, channels=0):
    n, cb, *spatial, b = (int(d) for d in x.shape)
    return te.compute((n, channels or cb * b, *spatial),
                      lambda i, c, *rest: x[(i, c // b, *rest, c % b)], name="from_blocked")


@lowering("nn.conv_blocked")
def conv_blocked(x, w, bias=None, *, strides, pads, dilations, group, block, pad_value=0, widen: bool = False):
    """out[n, ko, h, w, kl] for output channel ko*block + kl; the padding is
    a stage of its own (``conv_pad``), as in NCHW's conv2d. With ``widen``,
    a 16-bit input is read from a float32 copy, padded if the conv pads
    (``padded``)."""
    plain, result = len(x.shape) == 4, result_dtype(x)
    m, cg, kh, kw = (int(d) for d in w.shape)
    n, height, width = int(x.shape[0]), int(x.shape[2]), int(x.shape[3])
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = strides, dilations, pads
    oh = (height + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (width + pl + pr - dw * (kw - 1) - 1) // sw + 1
    acc = accumulator_dtype(x)
    if widen and acc != x.dtype:
        x = padded(x, pt, pl, pb, pr, acc)
    else:
        x = pad_spatial(x, (pt, pl), (pb, pr), pad_value, tail=0 if plain else 1)
    rh = te.reduce_axis((0, kh), name="rh")
    rw = te.reduce_axis((0, kw), name="rw")
    if group > 1 and cg == 1:  # depthwise: channel ko*block + kl reads its own input channel
        def at(b, ko, i, j, kl):
            return te.sum(x[b, ko, i * sh + rh * dh, j * sw + rw * dw, kl].astype(acc)
                          * w[ko * block + kl, 0, rh, rw].astype(acc), axis=[rh, rw])
    elif plain:
        rc = te.reduce_axis((0, cg), name="rc")

        def at(b, ko, i, j, kl):
            return te.sum(x[b, rc, i * sh + rh * dh, j * sw + rw * dw].astype(acc)
                          * w[ko * block + kl, rc, rh, rw].astype(acc), axis=[rc, rh, rw])
    else:
        bi = int(x.shape[4])
        rco = te.reduce_axis((0, cg // bi), name="rco")
        rci = te.reduce_axis((0, bi), name="rci")
        # grouped: output block ko reads the input blocks of its group
        out_blocks, in_blocks = m // group // block, cg // bi

        def at(b, ko, i, j, kl):
            first = ko // out_blocks * in_blocks if group > 1 else 0
            return te.sum(x[b, first + rco, i * sh + rh * dh, j * sw + rw * dw, rci].astype(acc)
                          * w[ko * block + kl, rco * bi + rci, rh, rw].astype(acc), axis=[rco, rh, rw, rci])

    y = te.compute((n, m // block, oh, ow, block), at, name="conv", attrs=anchor_attrs())
    if bias is not None:
        y = te.compute(y.shape, lambda b, ko, i, j, kl: y[b, ko, i, j, kl] + bias[ko * block + kl].astype(y.dtype),
                       name="bias_add")
    return cast(y, result)


def padded(x: te.Tensor, pt: int, pl: int, pb: int, pr: int, to: str) -> te.Tensor:
    """``x`` (N, C, H, W[, c]) zero-padded in H and W (by nothing: a copy)
    and converted to ``to`` in the same pass: the ``conv_pad`` stage of a
    16-bit conv whose micro-kernel then broadcasts float32 values."""
    n, c, height, width, *tail = (int(d) for d in x.shape)
    if not any((pt, pl, pb, pr)):
        return te.compute(x.shape, lambda *i: x(*i).astype(to), name="conv_pad")

    def at(b, ch, i, j, *rest):
        inside = tirx.all(i >= pt, i < pt + height, j >= pl, j < pl + width)
        return tirx.if_then_else(inside, x[(b, ch, i - pt, j - pl, *rest)].astype(to), tirx.const(0, to))

    return te.compute((n, c, height + pt + pb, width + pl + pr, *tail), at, name="conv_pad")
