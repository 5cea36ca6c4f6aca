"""Tensor intrinsics of 8-bit integer matmuls (the ``vnni`` and ``pmaddwd``
rules, vnni.py; ``amx_int8``, amx_int8.py): uint8 activations times an int8
weight, summed exactly in int32.

``int8_block(form, lanes, rows, vectors, k)``: a ``rows`` x ``lanes *
vectors`` int32 block over a reduction of ``k`` (a multiple of 4), the
weight packed in panels of ``lanes`` columns by quads of k (``panel_shape``,
``panel_index``), in one of two instruction forms (``FORMS``); each step
reads one 32-bit word of each A row (4 uint8, consecutive k) and one
vector of each panel (``lanes`` columns x 4 k):

- ``vpdpbusd`` (AVX512-VNNI, or AVX-VNNI on 256-bit vectors): the panel
  holds each column's 4 int8 side by side, and one ``VPDPBUSD`` adds to
  each int32 lane the 4 products of the broadcast word with that column's 4.
- ``pmaddwd`` (AVX2 or AVX-512BW, no VNNI): the panel holds the quad's k
  0 and 2 of every column as int8 pairs, then its k 1 and 3. The
  broadcast word masked (``& 0x00ff``) is k 0 and 2 of the row as int16
  pairs, shifted (``>> 8``) k 1 and 3; each half of the panel, widened to
  int16 (sign-extended), meets its pairs in one ``VPMADDWD``, which sums a
  pair's two products into int32. Exact: where ``VPMADDUBSW`` (AVX2's
  usual 8-bit form) saturates the sum of two products at int16 (255 * 127
  * 2 does not fit), ``VPMADDWD`` sums in int32.

The steps (``vpdpbusd_llvm``, ``pmaddwd_quad_llvm``; ``pmaddwd_llvm``, a
pair a step, for the blocked convs of intrinsics_conv8.py) go through
LLVM's intrinsics in a small LLVM IR shim that the kernel imports
(``pragma_import_llvm``) and LLVM inlines, as ``dpbf16_block`` does
(intrinsics.py): the shim broadcasts the word and bit-casts the vectors
to the byte and int16 vectors the intrinsics take, which TIR's vector
types do not reach.

``amx_int8_block(k, blocks)``: ``blocks`` 32 x 32 int32 blocks down one
column block on Intel AMX tiles (``TDPBUSD``), the weight in the
``vpdpbusd`` panels of 16 columns (a B tile is 16 quads of k of one
panel), by LLVM's AMX intrinsics with immediate tile numbers, as
``amx_bf16_block`` (intrinsics.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from tvm import s_tir
from tvm.script import tirx as T

from .intrinsics import AMX_BLOCK, AMX_ROWS, _strides, amx_config


@dataclass(frozen=True)
class Form:
    """One instruction form of an 8-bit step."""

    name: str
    #: the uint8 of A (consecutive k, or input channels) one instruction
    #: multiplies per int32 lane: a word of 4 (VPDPBUSD), a pair (VPMADDWD)
    group: int


#: the instruction forms, by name
FORMS = {"vpdpbusd": Form("vpdpbusd", 4), "pmaddwd": Form("pmaddwd", 2)}
#: consecutive k of a row that one step of the matmul block reads (one 32-bit word of uint8)
QUAD = 4


def panel_shape(form: str, lanes: int) -> tuple[int, ...]:
    """The dims of one quad of k of one panel (``lanes`` columns)."""
    return (lanes, QUAD) if form == "vpdpbusd" else (2, lanes, 2)


def panel_index(form: str, lanes: int, r, c) -> tuple:
    """Where ``B[r, c]`` lies in the packed weight (``[N / lanes, K / 4,
    *panel_shape]``)."""
    q = r % QUAD
    inner = (c % lanes, q) if form == "vpdpbusd" else (q % 2, c % lanes, q // 2)
    return (c // lanes, r // QUAD, *inner)


def pack_panels(form: str, lanes: int, w):
    """The weight ``w`` (numpy, ``[K, N]``) packed as ``panel_index`` reads
    it. With a column ``lanes * b + l`` and k ``4 * q + 2 * p + h``:
    ``vpdpbusd`` stores ``[b, q, l, 2 * p + h]``, ``pmaddwd`` ``[b, q, h, l,
    p]`` (each column's k 0 and 2 of the quad, then its k 1 and 3)."""
    k, n = w.shape
    if form == "vpdpbusd":
        return w.reshape(k // QUAD, QUAD, n // lanes, lanes).transpose(2, 0, 3, 1)
    return w.reshape(k // QUAD, 2, 2, n // lanes, lanes).transpose(3, 0, 2, 4, 1)


def _vnni_operand(lanes: int) -> str:
    """The LLVM type of VPDPBUSD's two byte operands: ``<64 x i8>`` (for 16
    lanes) in LLVM 22, TVM 0.27's (as the kernel's IR declares it),
    ``<16 x i32>`` in the releases before. (LLVM 22 also reads the older
    declaration, upgrading it; a declaration of its own version does not
    rest on that.)"""
    import tvm

    return f"<{4 * lanes} x i8>" if tvm.target.codegen.llvm_version_major() >= 22 else f"<{lanes} x i32>"


def vpdpbusd_llvm(lanes: int) -> str:
    """The ``vpdpbusd`` step for ``lanes`` int32 lanes (16: zmm, 8: ymm),
    in LLVM IR: ``acc + dot4(broadcast(word) as uint8, panel as int8)``."""
    bits, arg = 32 * lanes, _vnni_operand(lanes)
    vec = f"<{lanes} x i32>"
    return f"""
declare {vec} @llvm.x86.avx512.vpdpbusd.{bits}({vec}, {arg}, {arg})

define linkonce_odr {vec} @braze_vpdpbusd_{bits}({vec} %acc, i32 %word, {vec} %panel)
    alwaysinline nounwind readnone {{
  %one = insertelement {vec} poison, i32 %word, i64 0
  %all = shufflevector {vec} %one, {vec} poison, {vec} zeroinitializer
  %x = bitcast {vec} %all to {arg}
  %y = bitcast {vec} %panel to {arg}
  %r = call {vec} @llvm.x86.avx512.vpdpbusd.{bits}({vec} %acc, {arg} %x, {arg} %y)
  ret {vec} %r
}}
"""


#: LLVM's VPMADDWD intrinsic by vector width
_PMADDWD = {256: "llvm.x86.avx2.pmadd.wd", 512: "llvm.x86.avx512.pmaddw.d.512"}


def _splat(n: int, element: str) -> str:
    return "<" + ", ".join([element] * n) + ">"


def pmaddwd_llvm(lanes: int) -> str:
    """The pair step of ``pmaddwd`` for ``lanes`` int32 lanes (8: ymm, 16:
    zmm), in LLVM IR: ``acc + madd(broadcast(zext(pair)), sext(panel))``,
    ``pair`` two uint8 of A (an i16), ``panel`` ``lanes`` pairs of int8
    (the blocked convs' step, intrinsics_conv8.py)."""
    bits = 32 * lanes
    vec, wide, narrow = f"<{lanes} x i32>", f"<{2 * lanes} x i16>", f"<{2 * lanes} x i8>"
    madd = _PMADDWD[bits]
    return f"""
declare {vec} @{madd}({wide}, {wide})

define linkonce_odr {vec} @braze_pmaddwd_{bits}({vec} %acc, i16 %pair, <{lanes} x i16> %panel)
    alwaysinline nounwind readnone {{
  %bytes = bitcast i16 %pair to <2 x i8>
  %halves = zext <2 x i8> %bytes to <2 x i16>
  %word = bitcast <2 x i16> %halves to i32
  %one = insertelement {vec} poison, i32 %word, i64 0
  %all = shufflevector {vec} %one, {vec} poison, {vec} zeroinitializer
  %x = bitcast {vec} %all to {wide}
  %b = bitcast <{lanes} x i16> %panel to {narrow}
  %y = sext {narrow} %b to {wide}
  %p = call {vec} @{madd}({wide} %x, {wide} %y)
  %r = add {vec} %acc, %p
  ret {vec} %r
}}
"""


def pmaddwd_quad_llvm(lanes: int) -> str:
    """The quad step of ``pmaddwd`` for ``lanes`` int32 lanes (8: ymm, 16:
    zmm), in LLVM IR: ``acc + madd(word & 0xff, sext(panel[:half])) +
    madd(word >> 8, sext(panel[half:]))`` on int16 lanes (the matmul
    block's layout, above): a quad of k a step, where the pair step would
    widen each pair of A on its own (a byte-to-word move and a broadcast
    from a vector register, all on the shuffle port)."""
    bits, half = 32 * lanes, 2 * lanes
    vec, wide, narrow, raw = f"<{lanes} x i32>", f"<{half} x i16>", f"<{half} x i8>", f"<{4 * lanes} x i8>"
    low = "<" + ", ".join(f"i32 {i}" for i in range(half)) + ">"
    high = "<" + ", ".join(f"i32 {i}" for i in range(half, 2 * half)) + ">"
    madd = _PMADDWD[bits]
    return f"""
declare {vec} @{madd}({wide}, {wide})

define linkonce_odr {vec} @braze_pmaddwd_quad_{bits}({vec} %acc, i32 %word, {vec} %panel)
    alwaysinline nounwind readnone {{
  %one = insertelement {vec} poison, i32 %word, i64 0
  %all = shufflevector {vec} %one, {vec} poison, {vec} zeroinitializer
  %pairs = bitcast {vec} %all to {wide}
  %even = and {wide} %pairs, {_splat(half, "i16 255")}
  %odd = lshr {wide} %pairs, {_splat(half, "i16 8")}
  %bytes = bitcast {vec} %panel to {raw}
  %b0 = shufflevector {raw} %bytes, {raw} poison, <{half} x i32> {low}
  %b1 = shufflevector {raw} %bytes, {raw} poison, <{half} x i32> {high}
  %w0 = sext {narrow} %b0 to {wide}
  %w1 = sext {narrow} %b1 to {wide}
  %p0 = call {vec} @{madd}({wide} %even, {wide} %w0)
  %p1 = call {vec} @{madd}({wide} %odd, {wide} %w1)
  %p = add {vec} %p0, %p1
  %r = add {vec} %acc, %p
  ret {vec} %r
}}
"""


def _dense_strides(shape: tuple[int, ...]) -> list[int]:
    strides = [1]
    for d in reversed(shape[1:]):
        strides.insert(0, strides[0] * d)
    return strides


def _block_funcs(form: str, lanes: int, rows: int, vectors: int, k: int, lead_a: int, lead_c: int):
    """desc/impl of ``C[rows, lanes * vectors] += A[rows, k] . B`` (int32 +=
    uint8 x int8) with B the block's ``vectors`` panels. The impl runs k in
    quads: each quad reads one word of A per row and one panel vector per
    ``lanes`` columns, ``rows * vectors`` steps a quad, the accumulators in
    registers (C is local, its indices constant once the loops are
    unrolled). A and B are read as 32-bit words through int32 views of
    their data, with TVM's own loads, which carry its alias information, so
    that LLVM keeps the accumulators in registers over the whole k loop
    (intrinsics.py, ``_dpbf16_funcs``)."""
    ua, uc = (1,) * lead_a, (1,) * lead_c
    za, zc = (0,) * lead_a, (0,) * lead_c
    cols, bits = vectors * lanes, 32 * lanes
    inner = panel_shape(form, lanes)
    b_shape = (vectors, k // QUAD, *inner)
    b_all = tuple(slice(0, d) for d in b_shape)
    b_inner_strides = _dense_strides(inner)
    shim = vpdpbusd_llvm(lanes) if form == "vpdpbusd" else pmaddwd_quad_llvm(lanes)
    step = f"braze_vpdpbusd_{bits}" if form == "vpdpbusd" else f"braze_pmaddwd_quad_{bits}"
    acc = f"int32x{lanes}"

    @T.prim_func(s_tir=True)
    def desc(a: T.handle, b: T.handle, c: T.handle) -> None:
        sa, sb0, sb1, sc = T.int32(), T.int32(), T.int32(), T.int32()
        A = T.match_buffer(a, ua + (rows, k), "uint8", offset_factor=1, strides=_strides(lead_a, [sa, 1]))
        B = T.match_buffer(b, b_shape, "int8", offset_factor=1, strides=[sb0, sb1] + b_inner_strides)
        C = T.match_buffer(c, uc + (rows, cols), "int32", offset_factor=1,
                           strides=_strides(lead_c, [sc, 1]), scope="local")
        with T.sblock("root"):
            T.reads(C[zc + (slice(0, rows), slice(0, cols))], A[za + (slice(0, rows), slice(0, k))], B[b_all])
            T.writes(C[zc + (slice(0, rows), slice(0, cols))])
            for i, j, r in T.grid(rows, cols, k):
                with T.sblock("update"):
                    vi, vj, vr = T.axis.remap("SSR", [i, j, r])
                    C[zc + (vi, vj)] = C[zc + (vi, vj)] + T.Cast("int32", A[za + (vi, vr)]) * T.Cast(
                        "int32", B[panel_index(form, lanes, vr, vj)])

    @T.prim_func(s_tir=True)
    def impl(a: T.handle, b: T.handle, c: T.handle) -> None:
        sa, sb0, sb1, sc = T.int32(), T.int32(), T.int32(), T.int32()
        A = T.match_buffer(a, ua + (rows, k), "uint8", offset_factor=QUAD, strides=_strides(lead_a, [sa, 1]))
        B = T.match_buffer(b, b_shape, "int8", offset_factor=QUAD, strides=[sb0, sb1] + b_inner_strides)
        C = T.match_buffer(c, uc + (rows, cols), "int32", offset_factor=1,
                           strides=_strides(lead_c, [sc, 1]), scope="local")
        with T.sblock("root"):
            T.reads(C[zc + (slice(0, rows), slice(0, cols))], A[za + (slice(0, rows), slice(0, k))], B[b_all])
            T.writes(C[zc + (slice(0, rows), slice(0, cols))])
            Aw = T.decl_buffer((A.elem_offset // QUAD + rows * sa // QUAD,), "int32", data=A.data)
            Bw = T.decl_buffer((B.elem_offset // QUAD + vectors * sb0 // QUAD,), "int32", data=B.data)
            with T.attr(0, "pragma_import_llvm", shim):
                for kk in range(k // QUAD):
                    for i in T.unroll(rows):
                        for v in T.unroll(vectors):
                            C[zc + (i, T.ramp(v * lanes, 1, lanes))] = T.call_pure_extern(
                                acc, step, C[zc + (i, T.ramp(v * lanes, 1, lanes))],
                                Aw[A.elem_offset // QUAD + i * (sa // QUAD) + kk],
                                Bw[T.ramp(B.elem_offset // QUAD + v * (sb0 // QUAD) + kk * (sb1 // QUAD), 1, lanes)])

    return desc, impl


@cache
def int8_block(form: str, lanes: int, rows: int, vectors: int, k: int, lead_a: int = 0, lead_c: int = 0) -> str:
    """The name of the registered intrinsic of ``form`` (``FORMS``) for a
    ``rows`` x ``lanes * vectors`` block over a reduction of ``k`` (a
    multiple of 4), A and C with ``lead_a``/``lead_c`` batch dims."""
    name = f"braze_{form}_{rows}x{vectors}x{lanes}x{k}_{lead_a}{lead_c}"
    s_tir.TensorIntrin.register(name, *_block_funcs(form, lanes, rows, vectors, k, lead_a, lead_c), override=True)
    return name


# --- AMX-INT8 ----------------------------------------------------------------------------------------------
#: uint8 along k that one TDPBUSD consumes: the 64 bytes of an A tile's row
AMX_INT8_K = 64


def _amx_int8_funcs(k: int, blocks: int, lead_a: int, lead_c: int):
    """desc/impl of ``C[32 * blocks, 32] += A[32 * blocks, k] . B`` (int32
    += uint8 x int8) with B two ``vpdpbusd`` panels of 16 columns (``[2, k /
    4, 16, 4]``, ``panel_index``), A and C with ``lead_a``/``lead_c``
    leading unit dims. The impl loads the tile configuration once, then
    computes the ``blocks`` 32 x 32 blocks one after the other, each with
    C's four 16 x 16 quarters in tiles 0-3 over the whole k: each step of 64
    k loads A's two 16-row halves (tiles 4, 5: 16 rows x 64 uint8) and the
    two panels' 16 quads (tiles 6, 7: 16 quads x 16 columns x 4 int8), and
    runs the four TDPBUSD (A unsigned, B signed). The blocks share the
    panels (in L1 after the first) and one configuration, one release and
    one C buffer."""
    ua, uc = (1,) * lead_a, (1,) * lead_c
    za, zc = (0,) * lead_a, (0,) * lead_c
    rows, quads, step = AMX_BLOCK * blocks, k // QUAD, AMX_INT8_K // QUAD

    @T.prim_func(s_tir=True)
    def desc(a: T.handle, b: T.handle, c: T.handle) -> None:
        sa, sb0, sb1, sc = T.int32(), T.int32(), T.int32(), T.int32()
        A = T.match_buffer(a, ua + (rows, k), "uint8", offset_factor=1, strides=_strides(lead_a, [sa, 1]))
        B = T.match_buffer(b, (2, quads, AMX_ROWS, QUAD), "int8", offset_factor=1, strides=[sb0, sb1, QUAD, 1])
        C = T.match_buffer(c, uc + (rows, AMX_BLOCK), "int32", offset_factor=1,
                           strides=_strides(lead_c, [sc, 1]), scope="local")
        with T.sblock("root"):
            T.reads(C[zc + (slice(0, rows), slice(0, AMX_BLOCK))], A[za + (slice(0, rows), slice(0, k))],
                    B[0:2, 0:quads, 0:AMX_ROWS, 0:QUAD])
            T.writes(C[zc + (slice(0, rows), slice(0, AMX_BLOCK))])
            for i, j, r in T.grid(rows, AMX_BLOCK, k):
                with T.sblock("update"):
                    vi, vj, vr = T.axis.remap("SSR", [i, j, r])
                    C[zc + (vi, vj)] = C[zc + (vi, vj)] + T.Cast("int32", A[za + (vi, vr)]) * T.Cast(
                        "int32", B[panel_index("vpdpbusd", AMX_ROWS, vr, vj)])

    @T.prim_func(s_tir=True)
    def impl(a: T.handle, b: T.handle, c: T.handle) -> None:
        sa, sb0, sb1, sc = T.int32(), T.int32(), T.int32(), T.int32()
        A = T.match_buffer(a, ua + (rows, k), "uint8", offset_factor=1, strides=_strides(lead_a, [sa, 1]))
        B = T.match_buffer(b, (2, quads, AMX_ROWS, QUAD), "int8", offset_factor=1, strides=[sb0, sb1, QUAD, 1])
        C = T.match_buffer(c, uc + (rows, AMX_BLOCK), "int32", offset_factor=1,
                           strides=_strides(lead_c, [sc, 1]), scope="local")
        with T.sblock("root"):
            T.reads(C[zc + (slice(0, rows), slice(0, AMX_BLOCK))], A[za + (slice(0, rows), slice(0, k))],
                    B[0:2, 0:quads, 0:AMX_ROWS, 0:QUAD])
            T.writes(C[zc + (slice(0, rows), slice(0, AMX_BLOCK))])
            amx_config()
            for m in range(blocks):
                for t in T.unroll(4):  # the accumulators: the block's four 16 x 16 quarters of C
                    T.call_llvm_intrin("void", "llvm.x86.tileloadd64", T.Cast("int8", t),
                                       T.address_of(C[zc + (m * AMX_BLOCK + (t // 2) * 16, (t % 2) * 16)]),
                                       T.Cast("int64", sc * 4))
                for kk in range(k // AMX_INT8_K):
                    for t in T.unroll(2):
                        T.call_llvm_intrin("void", "llvm.x86.tileloadd64", T.Cast("int8", 4 + t),
                                           T.address_of(A[za + (m * AMX_BLOCK + t * 16, kk * AMX_INT8_K)]),
                                           T.Cast("int64", sa))
                        T.call_llvm_intrin("void", "llvm.x86.tileloadd64", T.Cast("int8", 6 + t),
                                           T.address_of(B[t, kk * step, 0, 0]), T.Cast("int64", sb1))
                    for t in T.unroll(4):
                        T.call_llvm_intrin("void", "llvm.x86.tdpbusd", T.Cast("int8", t), T.Cast("int8", 4 + t // 2),
                                           T.Cast("int8", 6 + t % 2))
                for t in T.unroll(4):
                    T.call_llvm_intrin("void", "llvm.x86.tilestored64", T.Cast("int8", t),
                                       T.address_of(C[zc + (m * AMX_BLOCK + (t // 2) * 16, (t % 2) * 16)]),
                                       T.Cast("int64", sc * 4))
            T.call_llvm_intrin("void", "llvm.x86.tilerelease")

    return desc, impl


@cache
def amx_int8_block(k: int, blocks: int = 1, lead_a: int = 0, lead_c: int = 0) -> str:
    """The name of the registered AMX-INT8 intrinsic for ``blocks`` blocks of
    32 rows (one column block of 32) over a reduction of ``k`` (a multiple
    of 64), A and C with ``lead_a``/``lead_c`` batch dims."""
    name = f"braze_amx_int8_{AMX_BLOCK * blocks}x32x{k}_{lead_a}{lead_c}"
    s_tir.TensorIntrin.register(name, *_amx_int8_funcs(k, blocks, lead_a, lead_c), override=True)
    return name
