"""Tensor intrinsics the schedule rules tensorize with (TIR, no assembly).

``deinterleave(stride, n)``: split ``stride * n`` contiguous floats into
their ``stride`` phases, ``B[p, q] = A[q * stride + p]``. Vectorized as TVM
does it by itself, a strided read is one scalar load per lane (a gather);
the intrinsic loads the whole run as one
vector and shuffles it, which LLVM lowers to a few in-register shuffles per
vector (docs/schedules.md, "depthwise").

``amx_bf16_block(k)``: a 32 x 32 float32 block of a bfloat16 matmul on
Intel AMX tiles (``TDPBF16PS``; the ``amx`` rule, docs/schedules.md), by
LLVM's AMX intrinsics with immediate tile numbers.

``dpbf16_block(rows, vectors, k)``: a ``rows`` x ``16 * vectors`` float32
block of a bfloat16 matmul with AVX512-BF16 dot products (``VDPBF16PS``;
the ``dpbf16`` rule), by LLVM's intrinsic behind a small LLVM IR shim that
the kernel imports (``DPBF16_LLVM``).
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


def _strides(lead: int, last: list) -> list:
    """A buffer's strides: a free variable for each of ``lead`` leading dims
    (each its own: one variable for all would make the match require the
    strides equal, which fails for two batch dims such as a channels-last
    ``[1, 56, 56, C]``), then ``last``."""
    return [T.int32() for _ in range(lead)] + last


# --- AMX -------------------------------------------------------------------------------------------------
#: Rows of an AMX tile, and the float32 columns of an accumulator tile.
AMX_ROWS = 16
#: Rows and columns of the output block one AMX micro-kernel computes: 2 x 2
#: accumulator tiles (tiles 0-3), fed by 2 A tiles (4, 5) and 2 B tiles (6, 7).
AMX_BLOCK = 32
#: bfloat16 elements along k that one TDPBF16PS consumes (64 bytes of an A row).
AMX_K = 32


@T.macro
def amx_config():
    """TIR that loads the tile configuration: palette 1, 8 tiles of 16 rows
    x 64 bytes (bfloat16 A: 16 rows x 32; B: 16 k-pairs x 16 columns x 2;
    float32 C: 16 rows x 16; the int8 tiles are 64 bytes a row alike). A
    thread's configuration is its own, so every call loads it (about a
    hundred cycles; a call runs thousands). The buffer is of global scope:
    TVM puts a small global buffer on the stack, a local one in its
    workspace pool, an allocation and a free per call."""
    cfg = T.decl_buffer((64,), "uint8", scope="global")
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
        A = T.match_buffer(a, ua + (AMX_BLOCK, k), bf, offset_factor=1, strides=_strides(lead_a, [sa, 1]))
        B = T.match_buffer(b, (2, k // 2, 16, 2), bf, offset_factor=1, strides=[sb0, sb1, 2, 1])
        C = T.match_buffer(c, uc + (AMX_BLOCK, AMX_BLOCK), f32, offset_factor=1,
                           strides=_strides(lead_c, [sc, 1]), scope="local")
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
        A = T.match_buffer(a, ua + (AMX_BLOCK, k), bf, offset_factor=1, strides=_strides(lead_a, [sa, 1]))
        B = T.match_buffer(b, (2, k // 2, 16, 2), bf, offset_factor=1, strides=[sb0, sb1, 2, 1])
        C = T.match_buffer(c, uc + (AMX_BLOCK, AMX_BLOCK), f32, offset_factor=1,
                           strides=_strides(lead_c, [sc, 1]), scope="local")
        with T.sblock("root"):
            T.reads(C[zc + (slice(0, AMX_BLOCK), slice(0, AMX_BLOCK))], A[za + (slice(0, AMX_BLOCK), slice(0, k))],
                    B[0:2, 0:k // 2, 0:16, 0:2])
            T.writes(C[zc + (slice(0, AMX_BLOCK), slice(0, AMX_BLOCK))])
            amx_config()
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


# --- AVX512-BF16 dot products -----------------------------------------------------------------------------
#: float32 lanes of one ``VDPBF16PS`` accumulator (a zmm register)
DPBF16_LANES = 16

#: One step of the ``dpbf16`` micro-kernel, in LLVM IR: a 16-lane float32
#: accumulator plus the dot products of one broadcast pair of bfloat16 (A's
#: row at k, k+1) with a vector of 16 column pairs (B's packed panel), by
#: LLVM's ``VDPBF16PS`` intrinsic. TVM's LLVM codegen types a bfloat16
#: vector as ``<N x i16>`` where the intrinsic takes ``<32 x bfloat>``, so
#: the call cannot be made from TIR (call_llvm_pure_intrin fails LLVM's
#: verifier); this shim takes the pair and the panel vector as 32-bit
#: integers and bit-casts them. The kernel imports it
#: (``pragma_import_llvm``) and LLVM inlines it, so the loop holds bare
#: ``vdpbf16ps`` instructions: no call, no assembly.
DPBF16_LLVM = """
declare <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float>, <32 x bfloat>, <32 x bfloat>)

define linkonce_odr <16 x float> @braze_dpbf16ps_step(<16 x float> %acc, i32 %pair, <16 x i32> %panel)
    alwaysinline nounwind readnone {
  %one = insertelement <16 x i32> poison, i32 %pair, i64 0
  %all = shufflevector <16 x i32> %one, <16 x i32> poison, <16 x i32> zeroinitializer
  %x = bitcast <16 x i32> %all to <32 x bfloat>
  %y = bitcast <16 x i32> %panel to <32 x bfloat>
  %r = call <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float> %acc, <32 x bfloat> %x, <32 x bfloat> %y)
  ret <16 x float> %r
}
"""


def _dpbf16_funcs(rows: int, vectors: int, k: int, lead_a: int, lead_c: int):
    """desc/impl of ``C[rows, 16 * vectors] += A[rows, k] . B`` (float32 +=
    bfloat16 x bfloat16) with B in the pair-interleaved panels AMX reads too
    (``B[r, c] = P[c // 16, r // 2, c % 16, r % 2]``). The impl runs k in
    pairs: each pair broadcasts one 32-bit pair of A per row and loads one
    panel vector per 16 columns, ``rows * vectors`` VDPBF16PS a pair, the
    accumulators in registers (C is a local buffer, its indices constant
    once the loops are unrolled). A and B are read as 32-bit words through
    int32 views of their data: a bfloat16 buffer read as values would be
    legalized to float32 first, and raw pointers (the AMX intrinsic's) would
    hide from LLVM that C's stores do not touch them, so that it would store
    the accumulators and reload the operands at every step."""
    ua, uc = (1,) * lead_a, (1,) * lead_c
    za, zc = (0,) * lead_a, (0,) * lead_c
    bf, f32 = "bfloat16", "float32"
    cols, lanes = vectors * DPBF16_LANES, DPBF16_LANES

    @T.prim_func(s_tir=True)
    def desc(a: T.handle, b: T.handle, c: T.handle) -> None:
        sa, sb0, sb1, sc = T.int32(), T.int32(), T.int32(), T.int32()
        A = T.match_buffer(a, ua + (rows, k), bf, offset_factor=1, strides=_strides(lead_a, [sa, 1]))
        B = T.match_buffer(b, (vectors, k // 2, lanes, 2), bf, offset_factor=1, strides=[sb0, sb1, 2, 1])
        C = T.match_buffer(c, uc + (rows, cols), f32, offset_factor=1,
                           strides=_strides(lead_c, [sc, 1]), scope="local")
        with T.sblock("root"):
            T.reads(C[zc + (slice(0, rows), slice(0, cols))], A[za + (slice(0, rows), slice(0, k))],
                    B[0:vectors, 0:k // 2, 0:lanes, 0:2])
            T.writes(C[zc + (slice(0, rows), slice(0, cols))])
            for i, j, r in T.grid(rows, cols, k):
                with T.sblock("update"):
                    vi, vj, vr = T.axis.remap("SSR", [i, j, r])
                    C[zc + (vi, vj)] = C[zc + (vi, vj)] + T.Cast(f32, A[za + (vi, vr)]) * T.Cast(
                        f32, B[vj // lanes, vr // 2, vj % lanes, vr % 2])

    @T.prim_func(s_tir=True)
    def impl(a: T.handle, b: T.handle, c: T.handle) -> None:
        sa, sb0, sb1, sc = T.int32(), T.int32(), T.int32(), T.int32()
        A = T.match_buffer(a, ua + (rows, k), bf, offset_factor=2, strides=_strides(lead_a, [sa, 1]))
        B = T.match_buffer(b, (vectors, k // 2, lanes, 2), bf, offset_factor=2, strides=[sb0, sb1, 2, 1])
        C = T.match_buffer(c, uc + (rows, cols), f32, offset_factor=1,
                           strides=_strides(lead_c, [sc, 1]), scope="local")
        with T.sblock("root"):
            T.reads(C[zc + (slice(0, rows), slice(0, cols))], A[za + (slice(0, rows), slice(0, k))],
                    B[0:vectors, 0:k // 2, 0:lanes, 0:2])
            T.writes(C[zc + (slice(0, rows), slice(0, cols))])
            # A and B seen as 32-bit words (a pair of bfloat16 each): TVM's own
            # loads, which carry its alias information, so that LLVM keeps the
            # accumulators in registers over the whole k loop
            A32 = T.decl_buffer((A.elem_offset // 2 + rows * sa // 2,), "int32", data=A.data)
            B32 = T.decl_buffer((B.elem_offset // 2 + vectors * sb0 // 2,), "int32", data=B.data)
            with T.attr(0, "pragma_import_llvm", DPBF16_LLVM):
                for kk in range(k // 2):
                    for i in T.unroll(rows):
                        for v in T.unroll(vectors):
                            C[zc + (i, T.ramp(v * lanes, 1, lanes))] = T.call_pure_extern(
                                "float32x16", "braze_dpbf16ps_step", C[zc + (i, T.ramp(v * lanes, 1, lanes))],
                                A32[A.elem_offset // 2 + i * (sa // 2) + kk],
                                B32[T.ramp(B.elem_offset // 2 + v * (sb0 // 2) + kk * (sb1 // 2), 1, lanes)])

    return desc, impl


@cache
def dpbf16_block(rows: int, vectors: int, k: int, lead_a: int = 0, lead_c: int = 0) -> str:
    """The name of the registered AVX512-BF16 intrinsic for a ``rows`` x
    ``16 * vectors`` block over a reduction of ``k`` (even)."""
    name = f"braze_dpbf16_{rows}x{vectors * DPBF16_LANES}x{k}_{lead_a}{lead_c}"
    s_tir.TensorIntrin.register(name, *_dpbf16_funcs(rows, vectors, k, lead_a, lead_c), override=True)
    return name


def _dpbf16_vector_funcs(rank_x: int, rank_w: int, rank_c: int):
    """desc/impl of ``C[16] += X[2] . W[16, 2]`` (float32 += bfloat16 x
    bfloat16): one output vector of a blocked conv over one pair of input
    channels, one VDPBF16PS. X is the pair of channels of one input pixel
    (NCHWc: adjacent), W the weight's pair-interleaved vector, C the
    accumulator; each with the leading unit dims of its buffer
    (``rank_*``)."""
    bf, f32, lanes = "bfloat16", "float32", DPBF16_LANES
    ux, uw, uc = (1,) * (rank_x - 1), (1,) * (rank_w - 2), (1,) * (rank_c - 1)
    zx, zw, zc = (0,) * (rank_x - 1), (0,) * (rank_w - 2), (0,) * (rank_c - 1)

    @T.prim_func(s_tir=True)
    def desc(x: T.handle, w: T.handle, c: T.handle) -> None:
        X = T.match_buffer(x, ux + (2,), bf, offset_factor=1, strides=_strides(rank_x - 1, [1]))
        W = T.match_buffer(w, uw + (lanes, 2), bf, offset_factor=1, strides=_strides(rank_w - 2, [2, 1]))
        C = T.match_buffer(c, uc + (lanes,), f32, offset_factor=1, strides=_strides(rank_c - 1, [1]), scope="local")
        with T.sblock("root"):
            T.reads(C[zc + (slice(0, lanes),)], X[zx + (slice(0, 2),)], W[zw + (slice(0, lanes), slice(0, 2))])
            T.writes(C[zc + (slice(0, lanes),)])
            for j, r in T.grid(lanes, 2):
                with T.sblock("update"):
                    vj, vr = T.axis.remap("SR", [j, r])
                    C[zc + (vj,)] = C[zc + (vj,)] + T.Cast(f32, X[zx + (vr,)]) * T.Cast(f32, W[zw + (vj, vr)])

    @T.prim_func(s_tir=True)
    def impl(x: T.handle, w: T.handle, c: T.handle) -> None:
        X = T.match_buffer(x, ux + (2,), bf, offset_factor=2, strides=_strides(rank_x - 1, [1]))
        W = T.match_buffer(w, uw + (lanes, 2), bf, offset_factor=2, strides=_strides(rank_w - 2, [2, 1]))
        C = T.match_buffer(c, uc + (lanes,), f32, offset_factor=1, strides=_strides(rank_c - 1, [1]), scope="local")
        with T.sblock("root"):
            T.reads(C[zc + (slice(0, lanes),)], X[zx + (slice(0, 2),)], W[zw + (slice(0, lanes), slice(0, 2))])
            T.writes(C[zc + (slice(0, lanes),)])
            X32 = T.decl_buffer((X.elem_offset // 2 + 1,), "int32", data=X.data)
            W32 = T.decl_buffer((W.elem_offset // 2 + lanes,), "int32", data=W.data)
            with T.attr(0, "pragma_import_llvm", DPBF16_LLVM):
                C[zc + (T.ramp(0, 1, lanes),)] = T.call_pure_extern(
                    "float32x16", "braze_dpbf16ps_step", C[zc + (T.ramp(0, 1, lanes),)],
                    X32[X.elem_offset // 2], W32[T.ramp(W.elem_offset // 2, 1, lanes)])

    return desc, impl


@cache
def dpbf16_vector(rank_x: int, rank_w: int, rank_c: int) -> str:
    """The name of the registered AVX512-BF16 intrinsic for one output
    vector over one pair of input channels (buffers of the given ranks)."""
    name = f"braze_dpbf16_vector_{rank_x}{rank_w}{rank_c}"
    s_tir.TensorIntrin.register(name, *_dpbf16_vector_funcs(rank_x, rank_w, rank_c), override=True)
    return name
