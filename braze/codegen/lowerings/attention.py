"""Lowerings of ``nn.attention`` and ``nn.attention_scores`` as plain TE
stages: the scores, their softmax and the product with v, each over the
whole sequence. This is the form every target can build (CUDA, the
Ascend-like emulation, a fallback); CPU kernels take the flash schedule
instead (schedules/flash.py), which never stores the scores.
16-bit operands compute in float32.
"""

from __future__ import annotations

from tvm import te, tirx

from ..registry import lowering
from . import fast

NEG_INF = float("-inf")


def operand_reader(x: te.Tensor, heads: int):
    """``x`` read as [batch, heads, seq, size] whichever its layout (4-D, or
    3-D [batch, seq, heads * size]), widened to float32."""
    def wide(e):
        return e.astype("float32") if e.dtype in ("float16", "bfloat16") else e
    if len(x.shape) == 4:
        return lambda b, h, s, d: wide(x[b, h, s, d])
    size = int(x.shape[2]) // heads
    return lambda b, h, s, d: wide(x[b, s, h * size + d])


def dims(q: te.Tensor, k: te.Tensor, v: te.Tensor, q_heads: int, kv_heads: int) -> tuple[int, ...]:
    """(batch, q_heads, kv_heads, q_seq, kv_seq, head_size, v_head_size)."""
    def split(x, heads):
        s = [int(d) for d in x.shape]
        return s if len(s) == 4 else [s[0], heads, s[1], s[2] // heads]
    b, hq, sq, d = split(q, q_heads)
    _, hk, sk, _ = split(k, kv_heads)
    dv = split(v, kv_heads)[3]
    return b, hq, hk, sq, sk, d, dv


def bias_reader(mask, kv_lengths, q_seq: int, *, causal: bool, offset: int, window_left: int, window_right: int):
    """``bias(b, h, i, j)``: what is added to a score, in float32: -inf
    where causality, the window or ``kv_lengths`` forbid the pair, else the
    mask's bias (0 or -inf for a boolean mask); None when nothing masks."""
    if mask is None and kv_lengths is None and not causal and window_left < 0 and window_right < 0:
        return None
    zero, neg_inf = tirx.const(0.0, "float32"), tirx.const(NEG_INF, "float32")

    def mask_value(b, h, i, j):
        if mask is None:
            return zero
        shape = [int(d) for d in mask.shape]
        full = (b, h, i, j)[4 - len(shape):]
        m = mask[tuple(0 if n == 1 else x for n, x in zip(shape, full))]
        if m.dtype == "bool":
            return tirx.Select(m, zero, neg_inf)
        return m.astype("float32") if m.dtype != "float32" else m

    def bias(b, h, i, j):
        ok = []
        start = offset if kv_lengths is None else kv_lengths[b].astype("int32") - q_seq
        if kv_lengths is not None:
            ok.append(j < kv_lengths[b].astype("int32"))
        if causal:
            ok.append(j <= i + start)
        if window_left >= 0:
            ok.append(j >= i + start - window_left)
        if window_right >= 0:
            ok.append(j <= i + start + window_right)
        value = mask_value(b, h, i, j)
        return tirx.Select(tirx.all(*ok), value, neg_inf) if ok else value

    return bias


def _scores(q, k, v, mask, kv_lengths, *, q_heads, kv_heads, scale, causal, offset, window_left, window_right,
            softcap):
    """The stages of the scores, [batch, q_heads, q_seq, kv_seq] float32:
    (scaled, softcapped, biased, softmax) and the dims."""
    b, hq, hk, sq, sk, d, _ = dims(q, k, v, q_heads, kv_heads)
    group = hq // hk
    qr, kr = operand_reader(q, hq), operand_reader(k, hk)
    r = te.reduce_axis((0, d), name="d")
    dot = te.compute((b, hq, sq, sk), lambda n, h, i, j: te.sum(qr(n, h, i, r) * kr(n, h // group, j, r), axis=r),
                     name="attn_dot")
    scaled = te.compute(dot.shape, lambda *i: dot(*i) * tirx.const(scale, "float32"), name="attn_scores")
    capped = scaled
    if softcap > 0:
        c = tirx.const(softcap, "float32")
        capped = te.compute(scaled.shape, lambda *i: c * tirx.tanh(scaled(*i) / c), name="attn_softcap")
    bias = bias_reader(mask, kv_lengths, sq, causal=causal, offset=offset, window_left=window_left,
                       window_right=window_right)
    biased = capped if bias is None else te.compute(capped.shape, lambda *i: capped(*i) + bias(*i), name="attn_bias")
    j = te.reduce_axis((0, sk), name="j")
    top = te.compute((b, hq, sq), lambda n, h, i: te.max(biased[n, h, i, j], axis=j), name="attn_max")
    neg_inf, zero = tirx.const(NEG_INF, "float32"), tirx.const(0.0, "float32")
    # a row no key may attend: its max is -inf; shift by 0 so that exp gives 0, not NaN
    shifted = te.compute(biased.shape, lambda n, h, i, jj: biased[n, h, i, jj]
                         - tirx.Select(top[n, h, i] == neg_inf, zero, top[n, h, i]), name="attn_shift")
    e = fast.exp(shifted)
    j2 = te.reduce_axis((0, sk), name="j")
    total = te.compute((b, hq, sq), lambda n, h, i: te.sum(e[n, h, i, j2], axis=j2), name="attn_sum")
    p = te.compute(e.shape, lambda n, h, i, jj: tirx.Select(total[n, h, i] > zero, e[n, h, i, jj] / total[n, h, i],
                                                            zero), name="attn_probs")
    return (scaled, capped, biased, p), (b, hq, hk, sq, sk, d)


@lowering("nn.attention")
def attention(q, k, v, mask=None, kv_lengths=None, **attrs):
    (*_, p), (b, hq, hk, sq, sk, _) = _scores(q, k, v, mask, kv_lengths, **attrs)
    dv = dims(q, k, v, attrs["q_heads"], attrs["kv_heads"])[6]
    vr, group = operand_reader(v, hk), hq // hk
    j = te.reduce_axis((0, sk), name="j")
    y = te.compute((b, hq, sq, dv), lambda n, h, i, c: te.sum(p[n, h, i, j] * vr(n, h // group, j, c), axis=j),
                   name="attn_out")
    if len(q.shape) == 3:
        y4 = y
        y = te.compute((b, sq, hq * dv), lambda n, i, c: y4[n, c // dv, i, c % dv], name="attn_merge_heads")
    return y.astype(q.dtype) if q.dtype != "float32" else y


@lowering("nn.attention_scores")
def attention_scores(q, k, v, mask=None, kv_lengths=None, *, stage, **attrs):
    stages, _ = _scores(q, k, v, mask, kv_lengths, **attrs)
    out = stages[stage]
    return out.astype(q.dtype) if q.dtype != "float32" else out
