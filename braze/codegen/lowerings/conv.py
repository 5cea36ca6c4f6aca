"""Lowerings of the convolutions: ``nn.conv`` and ``nn.conv_transpose``.

Both are N-d (1-D to 3-D), NC + spatial, with ONNX's ``pads`` order (all
begins, then all ends), which TOPI's generic ``topi.nn.conv`` takes as is.
16-bit floats accumulate in float32.
"""

from tvm import te, tirx, topi

from ..registry import anchor_attrs, lowering
from .reduce import cast, dtype

#: data layout of topi.nn.conv per number of spatial dims
_LAYOUTS = {1: "NCW", 2: "NCHW", 3: "NCDHW"}


def accumulator_dtype(x: te.Tensor) -> str:
    """The dtype a conv of ``x`` accumulates in: float32 for 16-bit floats,
    int32 for 8-bit integers (the result's type too)."""
    return {"float16": "float32", "bfloat16": "float32", "int8": "int32", "uint8": "int32"}.get(dtype(x), dtype(x))


def result_dtype(x: te.Tensor) -> str:
    """A conv's result type: x's, or int32 for 8-bit integers."""
    return "int32" if dtype(x) in ("int8", "uint8") else dtype(x)


def pad_spatial(x: te.Tensor, before, after, pad_value: int = 0, tail: int = 0) -> te.Tensor:
    """``x`` padded on its spatial dims (after N and C; ``tail`` dims after
    them unpadded) with ``pad_value``: the ``conv_pad`` stage."""
    if not any(before) and not any(after):
        return x
    zeros = [0] * tail
    return topi.nn.pad(x, [0, 0, *before, *zeros], [0, 0, *after, *zeros],
                       pad_value=tirx.const(pad_value, dtype(x)), name="conv_pad")


def _add_bias(y: te.Tensor, bias: te.Tensor | None) -> te.Tensor:
    """y + bias over channel dim 1."""
    if bias is None:
        return y
    return te.compute(y.shape, lambda n, c, *s: y[(n, c, *s)] + bias[c].astype(y.dtype), name="bias_add")


@lowering("nn.conv")
def conv(x, w, bias=None, *, strides, pads, dilations, group, pad_value=0):
    nd = len(x.shape) - 2
    if nd == 2:
        y = _conv2d(x, w, strides, pads, dilations, group, pad_value)
        return cast(_add_bias(y, bias), result_dtype(x))
    if pad_value:
        x, pads = pad_spatial(x, pads[:nd], pads[nd:], pad_value), [0] * len(pads)
    y = topi.nn.conv(x, w, list(strides), list(pads), list(dilations), group, _LAYOUTS[nd],
                     out_dtype=accumulator_dtype(x))
    return cast(_add_bias(y, bias), result_dtype(x))


def _conv2d(x, w, strides, pads, dilations, group, pad_value=0):
    """NCHW convolution, grouped: the block the conv schedule rules take
    (``conv``, with its padding as a separate ``conv_pad`` stage)."""
    n, c, height, width = (int(d) for d in x.shape)
    k, cg, kh, kw = (int(d) for d in w.shape)
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = strides, dilations, pads
    oh = (height + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (width + pl + pr - dw * (kw - 1) - 1) // sw + 1
    x = pad_spatial(x, (pt, pl), (pb, pr), pad_value)
    acc = accumulator_dtype(x)
    rc = te.reduce_axis((0, cg), name="rc")
    rh = te.reduce_axis((0, kh), name="rh")
    rw = te.reduce_axis((0, kw), name="rw")
    kg = k // group

    def at(b, o, i, j):
        ci = o // kg * cg + rc if group > 1 else rc
        return te.sum(x[b, ci, i * sh + rh * dh, j * sw + rw * dw].astype(acc) * w[o, rc, rh, rw].astype(acc),
                      axis=[rc, rh, rw])

    return te.compute((n, k, oh, ow), at, name="conv", attrs=anchor_attrs())


@lowering("nn.conv_transpose")
def conv_transpose(x, w, bias=None, *, strides, pads, dilations, group, output_padding, out_types):
    """A stride-1 convolution of the input spread out by ``strides`` (zeros
    between the elements, framed for the crop that ``pads`` makes) with the
    flipped kernel, transposed to the (M, C/group, *kernel) layout."""
    out = out_types[0].shape[2:]
    spread = _spread(x, w, strides, pads, dilations, out)
    y = topi.nn.conv(spread, _flip_kernel(w, group), 1, 0, list(dilations), group, _LAYOUTS[len(out)],
                     out_dtype=accumulator_dtype(x))
    return cast(_add_bias(y, bias), dtype(x))


def _spread(x, w, strides, pads, dilations, out):
    """Input spread over the frame a stride-1 correlation reads for ``out``:
    position q holds x[i] where q = i*stride + (k-1)*dilation - pad_begin
    (zero elsewhere). Output padding is the frame's zero tail."""
    spatial, kernel = [int(d) for d in x.shape[2:]], [int(d) for d in w.shape[2:]]
    nd = len(spatial)
    shift = [(k - 1) * d - p for k, d, p in zip(kernel, dilations, pads[:nd])]
    frame = [o + (k - 1) * d for o, k, d in zip(out, kernel, dilations)]

    def at(n, c, *q):
        pos = [qi - sh for qi, sh in zip(q, shift)]  # stride * input index
        index = [tirx.indexdiv(p, s) for p, s in zip(pos, strides)]
        inside = [tirx.all(p >= 0, tirx.indexmod(p, s) == 0, i < size)
                  for p, s, i, size in zip(pos, strides, index, spatial)]
        return tirx.if_then_else(tirx.all(*inside), x[(n, c, *index)], tirx.const(0, x.dtype))

    return te.compute((*x.shape[:2], *frame), at, name="spread")


def _flip_kernel(w, group):
    """(C, M/group, *k) -> (M, C/group, *k), each tap mirrored."""
    c, mg, *kernel = (int(d) for d in w.shape)
    cg = c // group

    def at(m, ci, *t):
        mirrored = [k - 1 - ti for k, ti in zip(kernel, t)]
        return w[(m // mg * cg + ci, m % mg, *mirrored)]

    return te.compute((mg * group, cg, *kernel), at, name="flip_kernel")
