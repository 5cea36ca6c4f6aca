"""``nn.attention``: scaled dot-product attention as one op.

    y = softmax(softcap(scale * q @ k^T) + bias) @ v

per batch and query head. ONNX's ``Attention`` imports to it, and fusion
level 3 raises the decomposed pattern (MatMul, scale, mask, Softmax,
MatMul) to it, so codegen has one attention kernel (docs/fusion.md).

Operands, each in one of two layouts, told apart by rank:

- 4-D ``[batch, heads, seq, head_size]`` (ONNX's 4-D form), or
- 3-D ``[batch, seq, heads * head_size]`` (ONNX's 3-D form, and what a
  projection writes before its reshape and transpose), with the head
  counts given by ``q_heads`` / ``kv_heads``.

``k`` and ``v`` have ``kv_heads`` heads, which divides ``q_heads``: query
head ``h`` reads key/value head ``h // (q_heads // kv_heads)`` (grouped-
and multi-query attention). The result has ``q``'s layout, with ``v``'s
head size. The optional ``mask`` broadcasts to ``[batch, q_heads, q_seq,
kv_seq]``: a boolean mask (true: attend) or an additive float bias of
``q``'s type. The optional ``kv_lengths`` (``[batch]`` int64, ONNX's
``nonpad_kv_seqlen``) masks the keys of batch ``b`` from ``kv_lengths[b]``
on and places query 0 at ``kv_lengths[b] - q_seq`` instead of ``offset``.

``causal`` lets query ``i`` attend key ``j`` only where ``j <= i + offset``;
``window_left`` / ``window_right`` (``-1``: unbounded) keep
``i + offset - window_left <= j <= i + offset + window_right``. ``offset``
is where query 0 sits among the keys (the cached keys before it). A query
row that no key may attend (every bias ``-inf``) gives zeros.
``softcap > 0`` maps scores to ``softcap * tanh(score / softcap)`` before
the bias is added.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import VerifyError
from ..registry import Bool, Float, Int, Kind, OpDef, broadcast_shapes, register
from ..types import FLOAT_DTYPES, TensorType
from .nn import wide


@dataclass(frozen=True)
class Heads:
    """The dims of an attention: batch, query/key-value heads, sequence
    lengths, and the q/k and v head sizes."""

    batch: int
    q_heads: int
    kv_heads: int
    q_seq: int
    kv_seq: int
    head_size: int
    v_head_size: int

    @property
    def group(self) -> int:
        """Query heads that share one key/value head."""
        return self.q_heads // self.kv_heads


def _split(t: TensorType, heads: int, what: str) -> tuple[int, int, int, int]:
    """(batch, heads, seq, head_size) of an operand in either layout."""
    if t.rank == 4:
        if heads and heads != t.shape[1]:
            raise VerifyError(f"'{what}' {t} has {t.shape[1]} heads, attribute says {heads}")
        return t.shape
    if t.rank == 3:
        if heads <= 0 or t.shape[2] % heads:
            raise VerifyError(f"'{what}' {t} is 3-D: its head count must be given and divide {t.shape[2]}")
        return t.shape[0], heads, t.shape[1], t.shape[2] // heads
    raise VerifyError(f"'{what}' must be 3-D [batch, seq, heads*size] or 4-D [batch, heads, seq, size], got {t}")


def heads_of(q: TensorType, k: TensorType, v: TensorType, q_heads: int, kv_heads: int) -> Heads:
    """The attention's dims; raises VerifyError when the operands disagree."""
    b, hq, sq, d = _split(q, q_heads, "q")
    bk, hk, sk, dk = _split(k, kv_heads, "k")
    bv, hv, sv, dv = _split(v, kv_heads, "v")
    if not b == bk == bv or hk != hv or sk != sv or d != dk:
        raise VerifyError(f"q {q}, k {k} and v {v} disagree on batch, heads, key length or head size")
    if hk == 0 or hq % hk:
        raise VerifyError(f"{hk} key/value heads do not divide {hq} query heads")
    return Heads(b, hq, hk, sq, sk, d, dv)


def as_heads(x: np.ndarray, heads: int) -> np.ndarray:
    """An operand as [batch, heads, seq, size] (numpy)."""
    if x.ndim == 4:
        return x
    b, s, hidden = x.shape
    return x.reshape(b, s, heads, hidden // heads).transpose(0, 2, 1, 3)


def allowed(q_seq: int, kv_seq: int, causal: bool, offset: int, left: int, right: int) -> np.ndarray:
    """The [q_seq, kv_seq] boolean of the (query, key) pairs that causality
    and the window let attend."""
    i = np.arange(q_seq)[:, None] + offset
    j = np.arange(kv_seq)[None, :]
    ok = np.ones((q_seq, kv_seq), bool)
    if causal:
        ok &= j <= i
    if left >= 0:
        ok &= j >= i - left
    if right >= 0:
        ok &= j <= i + right
    return ok


@register
class Attention(OpDef):
    """``softmax(softcap(scale * q @ k^T) + bias) @ v`` per batch and query
    head; layouts, heads and masks in docs/ir.md, "Attention"."""

    name = "nn.attention"
    kind = Kind.OPAQUE
    operands = ("q", "k", "v", "mask?", "kv_lengths?")
    attrs = {"q_heads": Int(0), "kv_heads": Int(0), "scale": Float(), "causal": Bool(False), "offset": Int(0),
             "window_left": Int(-1), "window_right": Int(-1), "softcap": Float(0.0)}

    def infer(self, q, k, v, mask=None, kv_lengths=None, *, q_heads, kv_heads, scale, causal, offset, window_left, window_right,
              softcap):
        if q.dtype not in FLOAT_DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
            raise VerifyError(f"q, k and v must share one float type, got {q}, {k}, {v}")
        h = heads_of(q, k, v, q_heads, kv_heads)
        if mask is not None:
            full = (h.batch, h.q_heads, h.q_seq, h.kv_seq)
            if mask.dtype not in ("i1", q.dtype) or broadcast_shapes(full, mask.shape) != full:
                raise VerifyError(f"'mask' {mask} must be i1 or {q.dtype} and broadcast to {list(full)}")
        if kv_lengths is not None and (kv_lengths.shape != (h.batch,) or kv_lengths.dtype != "i64"):
            raise VerifyError(f"'kv_lengths' must be i64 [{h.batch}], got {kv_lengths}")
        if window_left < -1 or window_right < -1 or softcap < 0:
            raise VerifyError("window sizes must be -1 (unbounded) or >= 0, and softcap >= 0")
        if q.rank == 4:
            return TensorType((h.batch, h.q_heads, h.q_seq, h.v_head_size), q.dtype)
        return TensorType((h.batch, h.q_seq, h.q_heads * h.v_head_size), q.dtype)

    def evaluate(self, q, k, v, mask=None, kv_lengths=None, **attrs):
        h, stages, v4 = _stages(q, k, v, mask, kv_lengths, **attrs)
        y = np.einsum("bhqk,bhkd->bhqd", stages[3], v4)
        if q.ndim == 3:
            y = y.transpose(0, 2, 1, 3).reshape(h.batch, h.q_seq, -1)
        return y.astype(q.dtype)


#: the stages of an attention's scores that ``nn.attention_scores`` gives
SCORE_STAGES = ("scaled", "softcapped", "biased", "softmax")


@register
class AttentionScores(OpDef):
    """One stage of ``nn.attention``'s scores, ``[batch, q_heads, q_seq,
    kv_seq]`` (ONNX Attention's optional ``qk_matmul_output``):
    ``scaled`` (``scale * q @ k^T``), ``softcapped``, ``biased`` (plus the
    mask, causality and window) or ``softmax`` (the probabilities)."""

    name = "nn.attention_scores"
    kind = Kind.OPAQUE
    operands = Attention.operands
    attrs = {**Attention.attrs, "stage": Int(0)}

    def infer(self, q, k, v, mask=None, kv_lengths=None, *, stage, **attrs):
        Attention().infer(q, k, v, mask, kv_lengths, **attrs)
        if not 0 <= stage < len(SCORE_STAGES):
            raise VerifyError(f"stage must be in [0, {len(SCORE_STAGES)}), got {stage}")
        h = heads_of(q, k, v, attrs["q_heads"], attrs["kv_heads"])
        return TensorType((h.batch, h.q_heads, h.q_seq, h.kv_seq), q.dtype)

    def evaluate(self, q, k, v, mask=None, kv_lengths=None, *, stage, **attrs):
        return _stages(q, k, v, mask, kv_lengths, **attrs)[1][stage].astype(q.dtype)


def _stages(q, k, v, mask, kv_lengths, *, q_heads, kv_heads, scale, causal, offset, window_left, window_right,
            softcap):
    """(dims, the four score stages of SCORE_STAGES, v as [b, q_heads, kv_seq, size]), in float64."""
    h = heads_of(*(TensorType(x.shape, "f32") for x in (q, k, v)), q_heads, kv_heads)
    q4, k4, v4 = (wide(as_heads(x, n)) for x, n in ((q, h.q_heads), (k, h.kv_heads), (v, h.kv_heads)))
    k4, v4 = np.repeat(k4, h.group, axis=1), np.repeat(v4, h.group, axis=1)
    scaled = scale * np.einsum("bhqd,bhkd->bhqk", q4, k4)
    capped = softcap * np.tanh(scaled / softcap) if softcap > 0 else scaled
    if kv_lengths is None:
        ok = allowed(h.q_seq, h.kv_seq, causal, offset, window_left, window_right)
    else:
        ok = np.stack([allowed(h.q_seq, h.kv_seq, causal, int(n) - h.q_seq, window_left, window_right)
                       & (np.arange(h.kv_seq) < n) for n in kv_lengths])[:, None]
    bias = np.where(ok, 0.0, -np.inf)
    if mask is not None:
        bias = bias + (np.where(mask, 0.0, -np.inf) if mask.dtype == bool else wide(mask))
    biased = capped + bias
    top = biased.max(axis=-1, keepdims=True)
    empty = np.isneginf(np.broadcast_to(bias, biased.shape).max(axis=-1, keepdims=True))
    e = np.exp(biased - np.where(np.isneginf(top), 0.0, top))
    p = np.where(empty, 0.0, e / np.where(empty, 1.0, e.sum(axis=-1, keepdims=True)))
    return h, (scaled, capped, biased, p), v4
