"""What a CPU must have to run code built for a target, and whether this one has it.

An artifact's manifest records ``"requires": {"arch": "x86_64", "features":
["avx2", "fma", ...]}``: the architecture of the target's triple and the ISA
features that LLVM may use for the target's ``mcpu`` and ``mattr`` (LLVM's
names), among those that matter to compiled kernels (``FEATURES``). Loading
compares them with the host's (``/proc/cpuinfo``), so that an artifact for a
wider CPU stops with an ``ArtifactError`` rather than an illegal instruction.
The C++ runtime makes the same check (cpp/src/cpu.cpp).
"""

from __future__ import annotations

import functools
import json

from . import detect

#: LLVM's name of each ISA feature that kernels may use -> the flag Linux shows
#: in /proc/cpuinfo, per architecture, in the order an error lists them.
FEATURES = {
    "x86_64": {"sse4.2": "sse4_2", "popcnt": "popcnt", "avx": "avx", "avx2": "avx2", "fma": "fma", "f16c": "f16c",
               "bmi": "bmi1", "bmi2": "bmi2", "lzcnt": "abm", "movbe": "movbe", "avx512f": "avx512f",
               "avx512bw": "avx512bw", "avx512cd": "avx512cd", "avx512dq": "avx512dq", "avx512vl": "avx512vl",
               "avx512vnni": "avx512_vnni", "avx512bf16": "avx512_bf16", "avx512fp16": "avx512_fp16",
               "avx512vbmi": "avx512vbmi", "avxvnni": "avx_vnni", "amx-tile": "amx_tile", "amx-bf16": "amx_bf16",
               "amx-int8": "amx_int8"},
    "aarch64": {"neon": "asimd", "fullfp16": "asimdhp", "dotprod": "asimddp", "sve": "sve", "i8mm": "i8mm",
                "bf16": "bf16", "sve2": "sve2"},
}


def requirements(target) -> dict:
    """``{"arch", "features"}`` a CPU needs to run the code built for ``target``
    (its host code, for a GPU target)."""
    return {"arch": target.arch, "features": list(_enabled(json.dumps(target.llvm(), sort_keys=True), target.arch))}


@functools.cache
def _enabled(llvm: str, arch: str) -> tuple[str, ...]:
    """The features of ``FEATURES`` that LLVM enables for a TVM llvm target (as JSON)."""
    import tvm

    found = {str(f) for f in tvm.target.codegen.llvm_get_cpu_features(tvm.target.Target(json.loads(llvm)))}
    return tuple(f for f in FEATURES.get(arch, {}) if f in found)


@functools.cache
def host_features() -> frozenset[str]:
    """The features of ``FEATURES`` this machine has, in LLVM's names. Where
    the OS does not list its flags, those LLVM's name for the host implies."""
    flags = detect.cpu_flags()
    if not flags:
        return frozenset(_enabled(json.dumps({"kind": "llvm", "mcpu": detect.llvm_cpu()}), detect.arch()))
    return frozenset(f for f, flag in FEATURES.get(detect.arch(), {}).items() if flag in flags)


def host_mattr(mcpu: str) -> tuple[str, ...]:
    """LLVM ``mattr`` that makes ``mcpu`` (LLVM's name for the host) say what
    this x86 CPU really has: ``+f`` for each feature of ``FEATURES`` that the
    OS lists and the name does not imply, ``-f`` for each that the name
    implies and the OS does not list. LLVM names a CPU by its family and
    model; a virtual machine's CPU may report a model whose LLVM name lacks
    features the VM passes through (a Sapphire Rapids host seen as
    ``rocketlake``, without AVX512-BF16 and AVX512-FP16), or hide some the
    name implies. Empty where the OS lists no flags, and on other
    architectures (their feature names do not map one to one)."""
    arch = detect.arch()
    flags = detect.cpu_flags()
    if arch != "x86_64" or not flags:
        return ()
    implied = set(_enabled(json.dumps({"kind": "llvm", "mcpu": mcpu}), arch))
    has = {f for f, flag in FEATURES[arch].items() if flag in flags}
    return tuple([f"+{f}" for f in FEATURES[arch] if f in has - implied]
                 + [f"-{f}" for f in FEATURES[arch] if f in implied - has])


#: Features whose register state Linux hands a process only when it asks
#: (AMX's tile data: 8 KB per thread); see ``amx_permitted``.
ON_REQUEST = ("amx-tile", "amx-bf16", "amx-int8")


@functools.cache
def amx_permitted() -> bool:
    """Ask Linux for AMX tile state for this process, once
    (``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``): without it,
    the first tile instruction of any thread stops the process with an
    illegal instruction. Whether it was granted (False off Linux x86-64)."""
    import ctypes
    import platform

    if platform.system() != "Linux" or detect.arch() != "x86_64":
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.syscall(158, 0x1023, 18) == 0  # SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA
    except (OSError, AttributeError):
        return False


def missing(requires: dict) -> str | None:
    """Why this machine cannot run code that ``requires`` (a manifest's) -- as
    "(what it needs), what this machine lacks" -- or None if it can. Code
    that needs AMX gets this process the OS's permission for it here."""
    arch = requires.get("arch")
    if arch != detect.arch():
        return f"({arch}), this machine is {detect.arch()}"
    lacking = [f for f in requires.get("features", []) if f not in host_features()]
    if lacking:
        return f"({arch}), this CPU lacks {', '.join(lacking)}"
    if any(f in ON_REQUEST for f in requires.get("features", [])) and not amx_permitted():
        return f"({arch}, AMX), and the OS refused this process AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM)"
    return None
