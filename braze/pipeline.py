"""The pass pipeline a compile runs, and the options it is built from:
fusion controls, the precision mode, the layout."""

from __future__ import annotations

import dataclasses

from .passes import PassManager
from .passes.layout_blocks import MIN_BLOCK

#: What every compile runs before fusion and codegen.
PREPARE = "canonicalize,cse,dce"


def precision_options(mode: str | None = None, mixlist=None, keep=None) -> dict:
    """The precision pass's options from the compile's arguments: files
    are read here, so a missing one fails before anything is built."""
    import json

    from .passes.precision import mode_dtype, read_keep, read_mixlist

    if mode is not None:
        mode_dtype(mode)
    if isinstance(mixlist, dict):
        read_mixlist(mixlist)
        mixlist = json.dumps(mixlist, sort_keys=True)
    elif mixlist:
        read_mixlist(str(mixlist))
    return {"mode": mode, "mixlist": str(mixlist or ""), "keep": read_keep(keep)}


def default_precision_mode(target) -> str:
    """The mode a compile uses when none is given: ATC's inference default
    (force_fp16) where the target's descriptor says the chip computes in
    float16, else the model's own dtypes."""
    if target is not None and target.npu is not None and target.npu.compute_dtype == "float16":
        return "force_fp16"
    return "origin"


def precision_record(pm: PassManager, target) -> dict:
    """The manifest's ``precision``: the mode the pipeline ran, its 16-bit
    dtype, and how the target's kernels realize 16-bit values."""
    from .passes.precision import MODES, Precision

    found = next((p for p in pm.passes if isinstance(p, Precision)), None)
    mode = found.mode if found else "origin"
    dtype = MODES[mode][1]
    if dtype is None:
        math = "float32"
    elif target.family == "cuda":
        math = f"native {dtype} storage and math, float32 accumulation in matmul and conv"
    else:  # the CPU, and the Ascend-like targets' host emulator
        from .codegen.schedules.amx import has_amx
        from .codegen.schedules.dpbf16 import has_dpbf16

        math = (f"{dtype} storage, float32 arithmetic: kernels widen {dtype} operands as they read them and "
                f"round results to {dtype}")
        if dtype == "bf16" and has_amx(target):
            math += ("; matmuls by a constant weight multiply bf16 natively on AMX tiles, accumulating in "
                     "float32 (docs/schedules.md, \"amx\")")
        elif dtype == "bf16" and has_dpbf16(target):
            math += ("; matmuls by a constant weight and blocked-layout convolutions multiply bf16 natively "
                     "with AVX512-BF16 dot products (VDPBF16PS), accumulating in float32 (docs/schedules.md, "
                     "\"dpbf16\")")
        else:
            math += f" (no native {dtype} instructions)"
    return {"mode": mode, "dtype": dtype or "f32", "math": math,
            "mixlist": bool(found and found.mixlist), "keep": list(found.keep) if found else []}


#: the values of ``compile(layout=...)`` and ``--layout``
LAYOUTS = ("blocked", "plain")


def check_layout(layout: str) -> None:
    if layout not in LAYOUTS:
        from .errors import PassError

        raise PassError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")


def layout_block(target=None) -> int | None:
    """The channel block of the layout pass on ``target`` (a Target; None:
    the host CPU): its float32 vector lanes, at least ``MIN_BLOCK``; None
    where the pass does not run (GPU and Ascend-like targets)."""
    if target is not None and target.family != "cpu":
        return None
    if target is None:
        from .targets.detect import vector_bits

        bits = vector_bits()
    else:
        bits = target.vector_bits
    return max(MIN_BLOCK, bits // 32)


def pipeline(level: int = 0, fusion=None, target=None, precision: dict | None = None,
             layout: str = "blocked") -> PassManager:
    """The passes a compile runs: fold-quant (level > 0), canonicalize, cse, dce, raise-attention
    (level 3), precision (unless the mode is the model's own dtypes), layout
    (``blocked``, on a CPU target, level > 0), then fuse (level > 0). An
    Ascend-like ``target`` (a Target) bounds each group's working tile by
    its unified buffer unless ``fusion`` sets ``tile_limit``, and gives the
    default precision mode. ``target`` None is the host CPU."""
    from .passes.attention import RaiseAttention
    from .passes.fusion import Fuse, FusionOptions
    from .passes.layout import Layout
    from .passes.precision import MODES, Precision
    from .passes.quant import FoldQuant

    check_layout(layout)

    pm = PassManager.parse(PREPARE)
    if level > 0:  # before constant folding makes the weights' dequantizes float constants
        pm.passes.insert(0, FoldQuant(**_int8_kernels(target)))
        options = fusion if isinstance(fusion, FusionOptions) else _fusion_options(dict(fusion or {}))
    if level >= 3:  # before precision and layout, which would split the pattern with their ops
        pm.passes.append(RaiseAttention(**{f.name: getattr(options, f.name)
                                           for f in dataclasses.fields(RaiseAttention)}))
    precision = dict(precision or {})
    mode = precision.get("mode") or default_precision_mode(target)
    if MODES[mode][0] != "origin":
        pm.passes.append(Precision(mode, precision.get("mixlist") or "", tuple(precision.get("keep") or ())))
    block = layout_block(target)
    if level > 0 and layout == "blocked" and block is not None:
        pm.passes.append(Layout(block=block))
    if level > 0:
        values = {f.name: getattr(options, f.name) for f in dataclasses.fields(FusionOptions)}
        if target is not None and target.npu is not None and not values["tile_limit"]:
            values["tile_limit"] = target.npu.ub_size
        pm.passes.append(Fuse(**{**values, "level": level}))
    return pm


def _int8_kernels(target) -> dict:
    """Which quantized products ``fold-quant`` computes on the integers for
    ``target`` (None: the host CPU): those where an int8 rule beats the
    float kernel: convs where the CPU has VNNI, matmuls where it has VNNI,
    AMX-INT8 or AVX2; none on other targets."""
    from .codegen.schedules.vnni import has_pmaddwd, has_vnni
    from .targets import get_target

    target = target if target is not None else get_target("cpu")
    if target.family != "cpu" or target.npu is not None:
        return {"convs": False, "matmuls": False}
    return {"convs": has_vnni(target), "matmuls": has_vnni(target) or has_pmaddwd(target)}


def _with_controls(fusion, controls: dict) -> dict:
    """``fusion`` (None, a dict or a FusionOptions) with ``controls`` over it, as a dict."""
    from .passes.fusion import FusionOptions

    if isinstance(fusion, FusionOptions):
        fusion = {f.name: getattr(fusion, f.name) for f in dataclasses.fields(FusionOptions) if f.name != "level"}
    return {**(fusion or {}), **controls}


def _fusion_options(values: dict):
    from .errors import PassError
    from .passes.fusion import FusionOptions

    known = {f.name for f in dataclasses.fields(FusionOptions)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise PassError(f"unknown fusion option(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    return FusionOptions(**values)
