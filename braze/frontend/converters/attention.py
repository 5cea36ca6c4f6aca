"""ONNX ``Attention`` (opsets 23-25) as ``nn.attention``.

The key/value cache (``past_key``/``past_value``) is concatenated in front of
the new keys and values, which are also the ``present_*`` outputs; the
optional ``qk_matmul_output`` is ``nn.attention_scores`` at the stage that
``qk_matmul_output_mode`` names. Scores and the softmax are computed in
float32 whatever ``softmax_precision`` asks, except double, which is refused.
"""

from __future__ import annotations

import numpy as np

from ...ir.ops.attention import SCORE_STAGES
from ..registry import converter

# ONNX TensorProto data types softmax_precision may name: float, float16, bfloat16
_SOFTMAX_PRECISIONS = (1, 10, 11, 16)


def _as_4d(ctx, x, heads: int):
    """A 3-D [batch, seq, heads * size] operand as [batch, heads, seq, size]."""
    if x.type.rank == 4:
        return x
    b, s, hidden = x.type.shape
    split = ctx.op("tensor.reshape", [x], shape=(b, s, heads, hidden // heads))
    return ctx.op("tensor.transpose", [split], perm=(0, 2, 1, 3))


def _padded_mask(ctx, mask, kv_seq: int):
    """A mask whose last dim is shorter than the keys, padded with
    'do not attend' (false, or -inf) up to ``kv_seq``."""
    short = kv_seq - mask.type.shape[-1]
    if short < 0:
        raise ctx.error(f"attn_mask {mask.type} covers more keys than the {kv_seq} there are")
    if short == 0:
        return mask
    rank = mask.type.rank
    fill = 0.0 if mask.type.dtype == "i1" else float("-inf")
    return ctx.op("tensor.pad", [mask], pads=(0,) * rank + (0,) * (rank - 1) + (short,), value=fill)


@converter("Attention", since=23)
def attention(ctx, Q, K, V, attn_mask=None, past_key=None, past_value=None, nonpad_kv_seqlen=None, *,
              is_causal=0, kv_num_heads=None, q_num_heads=None, qk_matmul_output_mode=0, scale=None, softcap=0.0,
              softmax_precision=None, left_window_size=-1, right_window_size=-1):
    rank = Q.type.rank
    if rank not in (3, 4) or K.type.rank != rank or V.type.rank != rank:
        raise ctx.error(f"Q, K and V must all be 3-D or all 4-D, got {Q.type}, {K.type}, {V.type}")
    if rank == 3 and (not q_num_heads or not kv_num_heads):
        raise ctx.error("3-D inputs need the q_num_heads and kv_num_heads attributes")
    if softmax_precision is not None and softmax_precision not in _SOFTMAX_PRECISIONS:
        raise ctx.error(f"softmax_precision={softmax_precision} is not supported; braze computes the softmax in "
                        "float32 (softmax_precision 1, 10 or 16)")
    if not 0 <= qk_matmul_output_mode < len(SCORE_STAGES):
        raise ctx.error(f"qk_matmul_output_mode={qk_matmul_output_mode} is not one of 0, 1, 2, 3")
    if (past_key is None) != (past_value is None):
        raise ctx.error("past_key and past_value must be given together")
    if nonpad_kv_seqlen is not None and past_key is not None:
        raise ctx.error("nonpad_kv_seqlen cannot be combined with past_key/past_value (ONNX Attention)")
    if left_window_size < -1 or right_window_size < -1:
        raise ctx.error(f"left_window_size={left_window_size}, right_window_size={right_window_size}: "
                        "each must be -1 (unbounded) or >= 0")
    q_heads = q_num_heads or Q.type.shape[1]
    kv_heads = kv_num_heads or K.type.shape[1]
    head_size = Q.type.shape[-1] // q_heads if rank == 3 else Q.type.shape[-1]
    if scale is None:
        scale = 1.0 / float(np.sqrt(head_size))

    key, value, offset = K, V, 0
    if past_key is not None:
        offset = past_key.type.shape[2]
        key = ctx.op("tensor.concat", [past_key, _as_4d(ctx, K, kv_heads)], axis=2)
        value = ctx.op("tensor.concat", [past_value, _as_4d(ctx, V, kv_heads)], axis=2)
    kv_seq = key.type.shape[1 if key.type.rank == 3 else 2]
    operands = [Q, key, value]
    if attn_mask is not None:
        operands.append(_padded_mask(ctx, attn_mask, kv_seq))
    if nonpad_kv_seqlen is not None:
        if attn_mask is None:  # a no-op bias holds the mask's place
            operands.append(ctx.const(np.zeros((1,), Q.type.np_dtype)))
        operands.append(nonpad_kv_seqlen)
    attrs = dict(q_heads=q_heads if rank == 3 else 0, kv_heads=kv_heads if rank == 3 else 0, scale=float(scale),
                 causal=bool(is_causal), offset=offset, window_left=left_window_size,
                 window_right=right_window_size, softcap=float(softcap))
    y = ctx.op("nn.attention", operands, **attrs)
    outputs = [y]
    wanted = ctx.outputs + [""] * (4 - len(ctx.outputs))
    if wanted[1] or wanted[2]:
        outputs += [_as_4d(ctx, key, kv_heads), _as_4d(ctx, value, kv_heads)]
    if wanted[3]:
        outputs += [None] * (3 - len(outputs))
        outputs.append(ctx.op("nn.attention_scores", operands, stage=max(qk_matmul_output_mode, 1), **attrs))
    return tuple(outputs) if len(outputs) > 1 else y
