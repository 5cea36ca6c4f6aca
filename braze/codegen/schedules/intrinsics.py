"""Tensor intrinsics the schedule rules tensorize with (TIR, no assembly).

``deinterleave(stride, n)``: split ``stride * n`` contiguous floats into
their ``stride`` phases, ``B[p, q] = A[q * stride + p]``. Vectorized as TVM
does it by itself, a strided read is one scalar load per lane (about 2-3
cycles per element on Zen 3); the intrinsic loads the whole run as one
vector and shuffles it, which LLVM lowers to a few in-register shuffles per
vector (docs/schedules.md, "depthwise").
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
