"""Tensor intrinsics of 8-bit integer convolutions in the blocked layout (the
``vnni_conv`` and ``pmaddwd_conv`` rules): one vector of int32 output
channels over one group of uint8 input channels, as ``dpbf16_vector``
(intrinsics.py) is for bfloat16 pairs.

``int8_conv_vector(form, lanes, ...)``: ``C[lanes] += X[g] . W[lanes, g]``
(int32 += uint8 x int8), ``g`` the form's group (``GROUPS``): X is ``g``
adjacent channels of one input pixel (NCHWc: one 32-bit word for
``vpdpbusd``, one 16-bit one for ``pmaddwd``), W the
packed weight's vector of ``lanes`` output channels x ``g`` input channels
(``[.., lanes, g]``), C the accumulator. One step of the form does it:
``VPDPBUSD`` with the word broadcast, or ``VPMADDWD`` on the pair widened
to int16 (zero-extended) and the weights sign-extended, then an add. Both
are exact: a sum of four uint8 x int8 products fits VPDPBUSD's int32
lane; ``VPMADDUBSW``, which saturates a sum of two at int16, is never used.

The steps are the LLVM IR shims of intrinsics_int8.py (``vpdpbusd_llvm``,
``pmaddwd_llvm``), which the kernel imports (``pragma_import_llvm``) and
LLVM inlines: no call, no assembly. X and W are read through integer views
of their data (words of ``g`` bytes) with TVM's own loads, which carry its
alias information, so that LLVM keeps the accumulators in registers.
"""

from __future__ import annotations

from functools import cache

from tvm import s_tir
from tvm.script import tirx as T

from .intrinsics import _strides
from .intrinsics_int8 import pmaddwd_llvm, vpdpbusd_llvm

#: input channels one step of each form takes (a word of uint8 of one pixel)
GROUPS = {"vpdpbusd": 4, "pmaddwd": 2}


def _vector_funcs(form: str, lanes: int, rank_x: int, rank_w: int, rank_c: int):
    """desc/impl of ``C[lanes] += X[g] . W[lanes, g]`` with the leading unit
    dims of each buffer (``rank_*``)."""
    g = GROUPS[form]
    word = {4: "int32", 2: "int16"}[g]
    bits = 32 * lanes
    shim = vpdpbusd_llvm(lanes) if form == "vpdpbusd" else pmaddwd_llvm(lanes)
    step, acc = f"braze_{form}_{bits}", f"int32x{lanes}"
    ux, uw, uc = (1,) * (rank_x - 1), (1,) * (rank_w - 2), (1,) * (rank_c - 1)
    zx, zw, zc = (0,) * (rank_x - 1), (0,) * (rank_w - 2), (0,) * (rank_c - 1)

    @T.prim_func(s_tir=True)
    def desc(x: T.handle, w: T.handle, c: T.handle) -> None:
        X = T.match_buffer(x, ux + (g,), "uint8", offset_factor=1, strides=_strides(rank_x - 1, [1]))
        W = T.match_buffer(w, uw + (lanes, g), "int8", offset_factor=1, strides=_strides(rank_w - 2, [g, 1]))
        C = T.match_buffer(c, uc + (lanes,), "int32", offset_factor=1, strides=_strides(rank_c - 1, [1]),
                           scope="local")
        with T.sblock("root"):
            T.reads(C[zc + (slice(0, lanes),)], X[zx + (slice(0, g),)], W[zw + (slice(0, lanes), slice(0, g))])
            T.writes(C[zc + (slice(0, lanes),)])
            for j, r in T.grid(lanes, g):
                with T.sblock("update"):
                    vj, vr = T.axis.remap("SR", [j, r])
                    C[zc + (vj,)] = C[zc + (vj,)] + T.Cast("int32", X[zx + (vr,)]) * T.Cast("int32", W[zw + (vj, vr)])

    @T.prim_func(s_tir=True)
    def impl(x: T.handle, w: T.handle, c: T.handle) -> None:
        X = T.match_buffer(x, ux + (g,), "uint8", offset_factor=g, strides=_strides(rank_x - 1, [1]))
        W = T.match_buffer(w, uw + (lanes, g), "int8", offset_factor=g, strides=_strides(rank_w - 2, [g, 1]))
        C = T.match_buffer(c, uc + (lanes,), "int32", offset_factor=1, strides=_strides(rank_c - 1, [1]),
                           scope="local")
        with T.sblock("root"):
            T.reads(C[zc + (slice(0, lanes),)], X[zx + (slice(0, g),)], W[zw + (slice(0, lanes), slice(0, g))])
            T.writes(C[zc + (slice(0, lanes),)])
            Xw = T.decl_buffer((X.elem_offset // g + 1,), word, data=X.data)
            Ww = T.decl_buffer((W.elem_offset // g + lanes,), word, data=W.data)
            with T.attr(0, "pragma_import_llvm", shim):
                C[zc + (T.ramp(0, 1, lanes),)] = T.call_pure_extern(
                    acc, step, C[zc + (T.ramp(0, 1, lanes),)],
                    Xw[X.elem_offset // g], Ww[T.ramp(W.elem_offset // g, 1, lanes)])

    return desc, impl


@cache
def int8_conv_vector(form: str, lanes: int, rank_x: int, rank_w: int, rank_c: int) -> str:
    """The name of the registered intrinsic of ``form`` (``vpdpbusd`` or
    ``pmaddwd``) for one vector of ``lanes`` int32 output channels over one
    group of input channels (buffers of the given ranks)."""
    name = f"braze_{form}_conv_vector_{lanes}_{rank_x}{rank_w}{rank_c}"
    s_tir.TensorIntrin.register(name, *_vector_funcs(form, lanes, rank_x, rank_w, rank_c), override=True)
    return name
