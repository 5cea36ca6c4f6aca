"""Tensor intrinsics the schedule rules tensorize with (TIR, no assembly).

``deinterleave(stride, n)``: split ``stride * n`` contiguous floats into
their ``stride`` phases, ``B[p, q] = A[q * stride + p]``. Vectorized as TVM
does it by itself, a strided read is one scalar load per lane (about 2-3
cycles per element on Zen 3); the intrinsic loads the whole run as one
vector and shuffles it, which LLVM lowers to a few in-register shuffles per
vector (docs/schedules.md, "depthwise").

``amx_bf16_block(k)``: a 32 x 32 float32 block of a bfloat16 matmul on
Intel AMX tiles (``TDPBF16PS``; the ``amx`` rule, docs/schedules.md), by
LLVM's AMX intrinsics with immediate tile numbers.
"""

from __future__ import annotations

from functools import cache

from tvm import s_tir
from tvm.script import tirx as T


def _deinterleave_funcs(stride: int, n: int, dtype: str):
    @T.prim_func(s_tir=True)
    def desc(a: T.handle, b: T.handle) -> None:
        sb = T.int32()
        A = T.match_buffer(a, (stride * n,), dtype, offset_factor=1)
        B = T.match_buffer(b, (stride, n), dtype, offset_factor=1, strides=[sb, 1])
        with T.sblock("root"):
            T.reads(A[0:stride * n])
            T.writes(B[0:stride, 0:n])
            for p, q in T.grid(stride, n):
                with T.sblock("phase"):
                    vp, vq = T.axis.remap("SS", [p, q])
                    B[vp, vq] = A[vq * stride + vp]

    @T.prim_func(s_tir=True)
    def impl(a: T.handle, b: T.handle) -> None:
        sb = T.int32()
        A = T.match_buffer(a, (stride * n,), dtype, offset_factor=1)
        B = T.match_buffer(b, (stride, n), dtype, offset_factor=1, strides=[sb, 1])
        with T.sblock("root"):
            T.reads(A[0:stride * n])
            T.writes(B[0:stride, 0:n])
            run = A.vload([0], f"{dtype}x{stride * n}")
            for p in T.unroll(stride):
                B[p, T.ramp(0, 1, n)] = T.Shuffle([run], [q * stride + p for q in range(n)])

    return desc, impl


@cache
def deinterleave(stride: int, n: int, dtype: str = "float32") -> str:
    """The name of the registered intrinsic for ``stride`` phases of ``n``."""
    name = f"braze_deinterleave_{dtype}_{stride}x{n}"
    s_tir.TensorIntrin.register(name, *_deinterleave_funcs(stride, n, dtype), override=True)
    return name


# --- AMX -------------------------------------------------------------------------------------------------
#: Rows of an AMX tile, and the float32 columns of an accumulator tile.
AMX_ROWS = 16
#: Rows and columns of the output block one AMX micro-kernel computes: 2 x 2
#: accumulator tiles (tiles 0-3), fed by 2 A tiles (4, 5) and 2 B tiles (6, 7).
AMX_BLOCK = 32
#: bfloat16 elements along k that one TDPBF16PS consumes (64 bytes of an A row).
AMX_K = 32


@T.macro
def _amx_config():
    """TIR that loads the tile configuration: palette 1, 8 tiles of 16 rows
    x 64 bytes (A: 16 rows x 32 bf16; B: 16 k-pairs x 16 columns x 2 bf16;
    C: 16 rows x 16 float32). A thread's configuration is its own, so every
    call loads it (it costs about a hundred cycles; a call runs thousands)."""
    cfg = T.alloc_local((64,), "uint8")
    for i in range(64):
        cfg[i] = T.uint8(0)
    cfg[0] = T.uint8(1)
    for t in range(8):
        cfg[16 + 2 * t] = T.uint8(64)
        cfg[48 + t] = T.uint8(AMX_ROWS)
    T.call_llvm_intrin("void", "llvm.x86.ldtilecfg", T.address_of(cfg[0]))


def _amx_funcs(k: int, lead_a: int, lead_c: int):
    """desc/impl of ``C[32, 32] += A[32, k] . B`` (float32 += bfloat16 x
    bfloat16) with B in pair-interleaved panels ``[2, k / 2, 16, 2]``
    (``B[r, c] = P[c // 16, r // 2, c % 16, r % 2]``), A and C with
    ``lead_a``/``lead_c`` leading unit dims (a batch). A is addressed as a
    raw pointer (``tvm_access_ptr``), not ``address_of`` an element: TVM's
    bfloat16 legalization stores an intermediate bfloat16 buffer (A padded,
    or computed in the kernel) as float32 unless a raw pointer reads it, and
    a tile load must read bfloat16. (The pointer is typed uint16, the
    storage TVM gives bfloat16 in the end: a bfloat16 type annotation would
    itself be legalized to float32.)"""
    ua, uc = (1,) * lead_a, (1,) * lead_c
    za, zc = (0,) * lead_a, (0,) * lead_c
    bf, f32 = "bfloat16", "float32"

    @T.prim_func(s_tir=True)
    def desc(a: T.handle, b: T.handle, c: T.handle) -> None:
        sa, sb0, sb1, sc = T.int32(), T.int32(), T.int32(), T.int32()
        A = T.match_buffer(a, ua + (AMX_BLOCK, k), bf, offset_factor=1, strides=[T.int32()] * lead_a + [sa, 1])
        B = T.match_buffer(b, (2, k // 2, 16, 2), bf, offset_factor=1, strides=[sb0, sb1, 2, 1])
        C = T.match_buffer(c, uc + (AMX_BLOCK, AMX_BLOCK), f32, offset_factor=1,
                           strides=[T.int32()] * lead_c + [sc, 1], scope="local")
        with T.sblock("root"):
            T.reads(C[zc + (slice(0, AMX_BLOCK), slice(0, AMX_BLOCK))], A[za + (slice(0, AMX_BLOCK), slice(0, k))],
                    B[0:2, 0:k // 2, 0:16, 0:2])
            T.writes(C[zc + (slice(0, AMX_BLOCK), slice(0, AMX_BLOCK))])
            for i, j, r in T.grid(AMX_BLOCK, AMX_BLOCK, k):
                with T.sblock("update"):
                    vi, vj, vr = T.axis.remap("SSR", [i, j, r])
                    C[zc + (vi, vj)] = C[zc + (vi, vj)] + T.Cast(f32, A[za + (vi, vr)]) * T.Cast(
                        f32, B[vj // 16, vr // 2, vj % 16, vr % 2])

    @T.prim_func(s_tir=True)
    def impl(a: T.handle, b: T.handle, c: T.handle) -> None:
        sa, sb0, sb1, sc = T.int32(), T.int32(), T.int32(), T.int32()
        A = T.match_buffer(a, ua + (AMX_BLOCK, k), bf, offset_factor=1, strides=[T.int32()] * lead_a + [sa, 1])
        B = T.match_buffer(b, (2, k // 2, 16, 2), bf, offset_factor=1, strides=[sb0, sb1, 2, 1])
        C = T.match_buffer(c, uc + (AMX_BLOCK, AMX_BLOCK), f32, offset_factor=1,
                           strides=[T.int32()] * lead_c + [sc, 1], scope="local")
        with T.sblock("root"):
            T.reads(C[zc + (slice(0, AMX_BLOCK), slice(0, AMX_BLOCK))], A[za + (slice(0, AMX_BLOCK), slice(0, k))],
                    B[0:2, 0:k // 2, 0:16, 0:2])
            T.writes(C[zc + (slice(0, AMX_BLOCK), slice(0, AMX_BLOCK))])
            _amx_config()
            for t in T.unroll(4):  # the accumulators: C's four 16 x 16 quarters
                T.call_llvm_intrin("void", "llvm.x86.tileloadd64", T.Cast("int8", t),
                                   T.address_of(C[zc + ((t // 2) * 16, (t % 2) * 16)]), T.Cast("int64", sc * 4))
            for kk in range(k // AMX_K):
                for t in T.unroll(2):
                    T.call_llvm_intrin("void", "llvm.x86.tileloadd64", T.Cast("int8", 4 + t),
                                       T.tvm_access_ptr(T.type_annotation("uint16"), A.data,
                                                        A.elem_offset + t * 16 * sa + kk * AMX_K, 16 * sa, 1),
                                       T.Cast("int64", sa * 2))
                    T.call_llvm_intrin("void", "llvm.x86.tileloadd64", T.Cast("int8", 6 + t),
                                       T.address_of(B[t, kk * (AMX_K // 2), 0, 0]), T.Cast("int64", sb1 * 2))
                for t in T.unroll(4):
                    T.call_llvm_intrin("void", "llvm.x86.tdpbf16ps", T.Cast("int8", t), T.Cast("int8", 4 + t // 2),
                                       T.Cast("int8", 6 + t % 2))
            for t in T.unroll(4):
                T.call_llvm_intrin("void", "llvm.x86.tilestored64", T.Cast("int8", t),
                                   T.address_of(C[zc + ((t // 2) * 16, (t % 2) * 16)]), T.Cast("int64", sc * 4))
            T.call_llvm_intrin("void", "llvm.x86.tilerelease")

    return desc, impl


@cache
def amx_bf16_block(k: int, lead_a: int = 0, lead_c: int = 0) -> str:
    """The name of the registered AMX intrinsic for a reduction of ``k``
    (a multiple of 32) with A and C of ``lead_a``/``lead_c`` batch dims."""
    name = f"braze_amx_bf16_32x32x{k}_{lead_a}{lead_c}"
    s_tir.TensorIntrin.register(name, *_amx_funcs(k, lead_a, lead_c), override=True)
    return name
