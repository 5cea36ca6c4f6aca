"""The flash kernel's TIR, written out (schedules/flash.py decides when and
with which tiles): K^T and V packed in panels, then per task and key block
the score tile, the online softmax and the P V tile (docs/schedules.md,
"flash")."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import reduce

from tvm.script import tirx as T

from ...ir.ops.attention import Heads

NEG_INF = float("-inf")


@dataclass(frozen=True)
class Layout:
    """What the kernel reads: the attention's dims, and its operands' dtypes and layouts."""

    heads: Heads
    dtype: str  # TVM dtype of q, k, v and y
    q4: bool
    k4: bool
    v4: bool
    mask_shape: tuple | None
    mask_dtype: str | None
    kv_lengths: bool


def _is_vec(j, lanes_: int) -> bool:
    """Whether a key index expression is a vector (a ramp) of ``lanes_`` keys."""
    return str(getattr(j, "ty", "")).endswith(f"x{lanes_}")


#: 2^f = e^(f ln 2) for |f| <= 1/2: Taylor's coefficients (ln 2)^k / k!, k = 0..7
#: (truncation under 1e-8)
_EXP2 = tuple(math.log(2) ** k / math.factorial(k) for k in range(8))
#: below this e^x is under the smallest normal float: 0 (also for -inf)
_EXP_FLOOR = -87.3


def _fexp(x, lanes_: int):
    """e^x for x <= 0 (a softmax's shifted scores, a rescale factor), as
    2^n * 2^f with n = round(x log2 e): a polynomial that vectorizes where
    LLVM's exp calls libm once per element. Relative error a few float32
    ulps times |x log2 e| (~1e-6 at x = -20, where e^x is 2e-9); 0 below
    -87.3, -inf included."""
    def c(value):
        return T.broadcast(T.float32(value), lanes_) if lanes_ > 1 else T.float32(value)
    t = x * c(1.0 / math.log(2))
    n = T.floor(t + c(0.5))
    f = t - n
    p = c(_EXP2[-1])
    for coefficient in reversed(_EXP2[:-1]):
        p = p * f + c(coefficient)
    itype = "int32" if lanes_ == 1 else f"int32x{lanes_}"
    ftype = "float32" if lanes_ == 1 else f"float32x{lanes_}"
    bias = T.broadcast(T.int32(127), lanes_) if lanes_ > 1 else T.int32(127)
    shift = T.broadcast(T.int32(23), lanes_) if lanes_ > 1 else T.int32(23)
    two_n = T.reinterpret(ftype, T.shift_left(T.Cast(itype, n) + bias, shift))
    return T.Select(x < c(_EXP_FLOOR), c(0.0), p * two_n)


def flash_kernel(L: Layout, V: int, params: dict, *, scale, causal, offset, left, right, softcap, use_mask):
    TQ, NKV, NDV = params["tile_q"], params["key_vectors"], params["value_vectors"]
    BK, BQ = params["block_k"], params["block_q"]
    h = L.heads
    B, HQ, HK, SQ, SK, D, DV = h.batch, h.q_heads, h.kv_heads, h.q_seq, h.kv_seq, h.head_size, h.v_head_size
    G = HQ // HK
    KT = NKV * V
    CW = NDV * V
    DVP = -(-DV // V) * V  # v's head size padded to whole vectors (zero columns, never written out)
    NB = -(-SK // BK)
    SKP = NB * BK
    NQB = -(-SQ // BQ)
    dt = L.dtype
    f32 = "float32"
    guard = SKP != SK  # key vectors past the end exist: read the mask lane by lane there

    q_shape = (B, HQ, SQ, D) if L.q4 else (B, SQ, HQ * D)
    k_shape = (B, HK, SK, D) if L.k4 else (B, SK, HK * D)
    v_shape = (B, HK, SK, DV) if L.v4 else (B, SK, HK * DV)
    y_shape = (B, HQ, SQ, DV) if L.q4 else (B, SQ, HQ * DV)
    m_shape = L.mask_shape if use_mask else (1,)
    m_dtype = L.mask_dtype if use_mask else f32

    def widen(e):
        return e.astype(f32) if dt != f32 else e

    def q_at(Q, b, h, s, d):
        return widen(Q[b, h, s, d] if L.q4 else Q[b, s, h * D + d])

    def k_at(K, b, h, s, d):
        return widen(K[b, h, s, d] if L.k4 else K[b, s, h * D + d])

    def v_at(Vb, b, h, s, d):
        return widen(Vb[b, h, s, d] if L.v4 else Vb[b, s, h * DV + d])

    def bcast(x):
        return T.broadcast(x, V)

    def rows(x):
        return T.broadcast(x, TQ) if TQ > 1 else x

    def start(KL, b):
        """Where query 0 sits among the keys."""
        return T.Cast("int32", KL[b]) - SQ if L.kv_lengths else T.int32(offset)

    def allowed(KL, b, row, j):
        """The (row, key) pairs causality, the window and the key lengths let
        attend, for a key index or a vector of them (``j``), or None."""
        vec = _is_vec(j, V)
        def s(x):
            return bcast(x) if vec else x
        at = row + start(KL, b)
        conds = []
        if L.kv_lengths:
            conds.append(j < s(T.Cast("int32", KL[b])))
        if causal:
            conds.append(j <= s(at))
        if left >= 0:
            conds.append(j >= s(at - left))
        if right >= 0:
            conds.append(j <= s(at + right))
        return reduce(lambda x, y: T.And(x, y), conds) if conds else None

    def mask_at(M, b, h, row, j):
        """The mask's bias at (row, key j), j a key index or a ramp of them."""
        shape = m_shape
        full = (b, h, row, j)[4 - len(shape):]
        index = []
        for n, x in zip(shape, full):
            index.append(0 if n == 1 else x)
        value = M[tuple(index)]
        vec = _is_vec(j, V)
        if vec and shape[-1] == 1:
            value = bcast(value)
        zero = bcast(T.float32(0)) if vec else T.float32(0)
        ninf = bcast(T.float32(NEG_INF)) if vec else T.float32(NEG_INF)
        if m_dtype == "bool":
            return T.Select(value, zero, ninf)
        return value.astype(f"float32x{V}" if vec else f32) if m_dtype != f32 else value

    def finish(M, KL, b, h, row, j, raw):
        """A score leaving the registers: softcap, then the bias."""
        vec = _is_vec(j, V)
        if softcap > 0:
            cap = bcast(T.float32(softcap)) if vec else T.float32(softcap)
            raw = cap * T.tanh(raw / cap)
        if use_mask:
            raw = raw + mask_at(M, b, h, row, j)
        ok = allowed(KL, b, row, j)
        if ok is None:
            return raw
        return T.Select(ok, raw, bcast(T.float32(NEG_INF)) if vec else T.float32(NEG_INF))

    def live(KL, b, first_row, last_row, j0):
        """Whether a key block may hold a pair some row in [first_row, last_row] attends."""
        conds = []
        if L.kv_lengths:
            conds.append(j0 < T.Cast("int32", KL[b]))
        if causal:
            conds.append(j0 <= last_row + start(KL, b))
        if left >= 0:
            conds.append(j0 + BK - 1 >= first_row + start(KL, b) - left)
        if right >= 0:
            conds.append(j0 <= last_row + start(KL, b) + right)
        return reduce(lambda x, y: T.And(x, y), conds) if conds else T.bool(True)

    def across(x, op):
        """``op`` over a vector's lanes, halving it each step (log2(lanes) shuffles)."""
        lanes_ = V
        while lanes_ > 1:
            half = lanes_ // 2
            x = op(T.Shuffle([x], list(range(half))), T.Shuffle([x], list(range(half, lanes_))))
            lanes_ = half
        return x

    scale_ = float(scale)

    @T.macro
    def qk_step(cb, u, q, kt, b, hk, g, qb, qt, kb, kk, i, d):
        cb[i, T.ramp(0, 1, V)] = cb[i, T.ramp(0, 1, V)] + bcast(
            q_at(q, b, hk * G + g, T.min(qb * BQ + qt * TQ + i, SQ - 1), d)) * kt[
            b, hk, kb * (BK // KT) + kk, d, T.ramp(u * V, 1, V)]

    @T.macro
    def scores_out(cb, u, sc, mx, mask, kv_len, b, hk, g, qb, qt, kb, kk):
        for i in T.unroll(TQ):
            if guard:
                if kb * BK + kk * KT + u * V + V <= SK:
                    sc[i, T.ramp(kk * KT + u * V, 1, V)] = finish(
                        mask, kv_len, b, hk * G + g, qb * BQ + qt * TQ + i, T.ramp(kb * BK + kk * KT + u * V, 1, V),
                        cb[i, T.ramp(0, 1, V)] * bcast(T.float32(scale_)))
                elif kb * BK + kk * KT + u * V >= SK:
                    sc[i, T.ramp(kk * KT + u * V, 1, V)] = bcast(T.float32(NEG_INF))
                else:  # unrolled: constant lane indices keep the register tile in registers
                    for lane in T.unroll(V):
                        if kb * BK + kk * KT + u * V + lane < SK:
                            sc[i, kk * KT + u * V + lane] = finish(
                                mask, kv_len, b, hk * G + g, qb * BQ + qt * TQ + i, kb * BK + kk * KT + u * V + lane,
                                cb[i, lane] * T.float32(scale_))
                        else:
                            sc[i, kk * KT + u * V + lane] = T.float32(NEG_INF)
            else:
                sc[i, T.ramp(kk * KT + u * V, 1, V)] = finish(
                    mask, kv_len, b, hk * G + g, qb * BQ + qt * TQ + i, T.ramp(kb * BK + kk * KT + u * V, 1, V),
                    cb[i, T.ramp(0, 1, V)] * bcast(T.float32(scale_)))
            # the row's running max over the block, while the scores are in registers
            mx[i, T.ramp(0, 1, V)] = T.max(mx[i, T.ramp(0, 1, V)], sc[i, T.ramp(kk * KT + u * V, 1, V)])

    @T.macro
    def pv_load(ob, u, acc, alpha, g, qt, ch):
        for i in T.unroll(TQ):
            ob[i, T.ramp(0, 1, V)] = acc[g * BQ + qt * TQ + i, T.ramp(ch * NDV * V + u * V, 1, V)] * bcast(alpha[i])

    @T.macro
    def pv_step(ob, u, sc, vp, b, hk, kb, ch, i, jj):
        ob[i, T.ramp(0, 1, V)] = ob[i, T.ramp(0, 1, V)] + bcast(sc[i, jj]) * vp[
            b, hk, ch, kb * BK + jj, T.ramp(u * V, 1, V)]

    @T.macro
    def pv_store(ob, u, acc, g, qt, ch):
        for i in T.unroll(TQ):
            acc[g * BQ + qt * TQ + i, T.ramp(ch * NDV * V + u * V, 1, V)] = ob[i, T.ramp(0, 1, V)]

    @T.prim_func
    def flash(q: T.Buffer(q_shape, dt), k: T.Buffer(k_shape, dt), v: T.Buffer(v_shape, dt),
              mask: T.Buffer(m_shape, m_dtype), kv_len: T.Buffer((B,), "int64"), y: T.Buffer(y_shape, dt)):
        # K^T in panels of KT keys ([key panel, d, key]) and V in panels of CW
        # columns ([column panel, key, column]): each micro-kernel streams one
        # contiguous panel
        kt = T.decl_buffer((B, HK, SKP // KT, D, KT), f32, scope="global")
        vp = T.decl_buffer((B, HK, DVP // CW, SKP, CW), f32, scope="global")
        for t in T.parallel(B * HK):
            for sp, d, s in T.grid(SKP // KT, D, KT):
                kt[t // HK, t % HK, sp, d, s] = T.Select(
                    sp * KT + s < SK, k_at(k, t // HK, t % HK, T.min(sp * KT + s, SK - 1), d), T.float32(0))
            for cp, s, c in T.grid(DVP // CW, SKP, CW):
                vp[t // HK, t % HK, cp, s, c] = T.Select(
                    T.And(s < SK, cp * CW + c < DV),
                    v_at(v, t // HK, t % HK, T.min(s, SK - 1), T.min(cp * CW + c, DV - 1)), T.float32(0))
        for task in T.parallel(B * HK * NQB):
            b = task // (HK * NQB)
            hk = task // NQB % HK
            qb = task % NQB
            m = T.decl_buffer((G * BQ,), f32, scope="global")
            l = T.decl_buffer((G * BQ,), f32, scope="global")
            acc = T.decl_buffer((G * BQ, DVP), f32, scope="global")
            sc = T.decl_buffer((TQ, BK), f32, scope="global")
            alpha = T.decl_buffer((TQ,), f32, scope="global")
            red = T.decl_buffer((1, V), f32, scope="global")
            mx = T.decl_buffer((TQ, V), f32, scope="global")
            tops = T.decl_buffer((TQ,), f32, scope="global")
            shifts = T.decl_buffer((TQ,), f32, scope="global")
            sums = T.decl_buffer((TQ,), f32, scope="global")
            for r in range(G * BQ):
                m[r] = T.float32(NEG_INF)
                l[r] = T.float32(0)
                for c in range(DVP // V):
                    acc[r, T.ramp(c * V, 1, V)] = bcast(T.float32(0))
            for kb in range(NB):
                if live(kv_len, b, qb * BQ, T.min(qb * BQ + BQ, SQ) - 1, kb * BK):
                    for g in range(G):
                        for qt in range(BQ // TQ):
                            if qb * BQ + qt * TQ < SQ:
                                if live(kv_len, b, qb * BQ + qt * TQ, T.min(qb * BQ + qt * TQ + TQ, SQ) - 1,
                                        kb * BK):
                                    # 1. scores of tile_q rows x block_k keys, key_vectors vectors at a time
                                    for i in T.unroll(TQ):
                                        mx[i, T.ramp(0, 1, V)] = bcast(T.float32(NEG_INF))
                                    for kk in range(BK // KT):
                                        c0 = T.decl_buffer((TQ, V), f32, scope="global")
                                        c1 = T.decl_buffer((TQ, V), f32, scope="global")
                                        c2 = T.decl_buffer((TQ, V), f32, scope="global")
                                        for i in T.unroll(TQ):
                                            c0[i, T.ramp(0, 1, V)] = bcast(T.float32(0))
                                            c1[i, T.ramp(0, 1, V)] = bcast(T.float32(0))
                                            c2[i, T.ramp(0, 1, V)] = bcast(T.float32(0))
                                        for d in range(D):
                                            for i in T.unroll(TQ):
                                                qk_step(c0, 0, q, kt, b, hk, g, qb, qt, kb, kk, i, d)
                                                if NKV > 1:
                                                    qk_step(c1, 1, q, kt, b, hk, g, qb, qt, kb, kk, i, d)
                                                if NKV > 2:
                                                    qk_step(c2, 2, q, kt, b, hk, g, qb, qt, kb, kk, i, d)
                                        scores_out(c0, 0, sc, mx, mask, kv_len, b, hk, g, qb, qt, kb, kk)
                                        if NKV > 1:
                                            scores_out(c1, 1, sc, mx, mask, kv_len, b, hk, g, qb, qt, kb, kk)
                                        if NKV > 2:
                                            scores_out(c2, 2, sc, mx, mask, kv_len, b, hk, g, qb, qt, kb, kk)
                                    # 2. the online softmax: the rows' new maxima and rescale
                                    #    factors as vectors of tile_q lanes, then each row's exp and sum
                                    for i in range(TQ):
                                        tops[i] = T.max(m[g * BQ + qt * TQ + i], across(mx[i, T.ramp(0, 1, V)], T.max))
                                    shifts[T.ramp(0, 1, TQ)] = T.Select(
                                        tops[T.ramp(0, 1, TQ)] == rows(T.float32(NEG_INF)), rows(T.float32(0)),
                                        tops[T.ramp(0, 1, TQ)])
                                    alpha[T.ramp(0, 1, TQ)] = _fexp(
                                        m[T.ramp(g * BQ + qt * TQ, 1, TQ)] - shifts[T.ramp(0, 1, TQ)], TQ)
                                    m[T.ramp(g * BQ + qt * TQ, 1, TQ)] = tops[T.ramp(0, 1, TQ)]
                                    for i in range(TQ):
                                        red[0, T.ramp(0, 1, V)] = bcast(T.float32(0))
                                        for c in range(BK // V):
                                            sc[i, T.ramp(c * V, 1, V)] = _fexp(
                                                sc[i, T.ramp(c * V, 1, V)] - bcast(shifts[i]), V)
                                            red[0, T.ramp(0, 1, V)] = red[0, T.ramp(0, 1, V)] + sc[
                                                i, T.ramp(c * V, 1, V)]
                                        sums[i] = across(red[0, T.ramp(0, 1, V)], lambda x, y: x + y)
                                    l[T.ramp(g * BQ + qt * TQ, 1, TQ)] = (
                                        l[T.ramp(g * BQ + qt * TQ, 1, TQ)] * alpha[T.ramp(0, 1, TQ)]
                                        + sums[T.ramp(0, 1, TQ)])
                                    # 3. acc = acc * alpha + P @ V, value_vectors vectors at a time
                                    for ch in range(DVP // CW):
                                        o0 = T.decl_buffer((TQ, V), f32, scope="global")
                                        o1 = T.decl_buffer((TQ, V), f32, scope="global")
                                        o2 = T.decl_buffer((TQ, V), f32, scope="global")
                                        o3 = T.decl_buffer((TQ, V), f32, scope="global")
                                        pv_load(o0, 0, acc, alpha, g, qt, ch)
                                        if NDV > 1:
                                            pv_load(o1, 1, acc, alpha, g, qt, ch)
                                        if NDV > 2:
                                            pv_load(o2, 2, acc, alpha, g, qt, ch)
                                        if NDV > 3:
                                            pv_load(o3, 3, acc, alpha, g, qt, ch)
                                        for jj in range(BK):
                                            for i in T.unroll(TQ):
                                                pv_step(o0, 0, sc, vp, b, hk, kb, ch, i, jj)
                                                if NDV > 1:
                                                    pv_step(o1, 1, sc, vp, b, hk, kb, ch, i, jj)
                                                if NDV > 2:
                                                    pv_step(o2, 2, sc, vp, b, hk, kb, ch, i, jj)
                                                if NDV > 3:
                                                    pv_step(o3, 3, sc, vp, b, hk, kb, ch, i, jj)
                                        pv_store(o0, 0, acc, g, qt, ch)
                                        if NDV > 1:
                                            pv_store(o1, 1, acc, g, qt, ch)
                                        if NDV > 2:
                                            pv_store(o2, 2, acc, g, qt, ch)
                                        if NDV > 3:
                                            pv_store(o3, 3, acc, g, qt, ch)
            for g, rr in T.grid(G, BQ):
                if qb * BQ + rr < SQ:
                    inv = T.Select(l[g * BQ + rr] > T.float32(0), T.float32(1) / l[g * BQ + rr], T.float32(0))
                    for c in range(DV // V):  # whole vectors of the result
                        if L.q4:
                            y[b, hk * G + g, qb * BQ + rr, T.ramp(c * V, 1, V)] = (
                                acc[g * BQ + rr, T.ramp(c * V, 1, V)] * bcast(inv)).astype(f"{dt}x{V}")
                        else:
                            y[b, qb * BQ + rr, T.ramp((hk * G + g) * DV + c * V, 1, V)] = (
                                acc[g * BQ + rr, T.ramp(c * V, 1, V)] * bcast(inv)).astype(f"{dt}x{V}")
                    for c in range(DV // V * V, DV):  # the columns past them
                        if L.q4:
                            y[b, hk * G + g, qb * BQ + rr, c] = (acc[g * BQ + rr, c] * inv).astype(dt)
                        else:
                            y[b, qb * BQ + rr, (hk * G + g) * DV + c] = (acc[g * BQ + rr, c] * inv).astype(dt)

    return flash
