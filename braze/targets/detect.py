"""What the host CPU is: LLVM's name for it, vector width, cores, caches.

Read from the operating system (``/proc/cpuinfo``, ``/sys/.../cache``) where
it says; otherwise from LLVM's CPU name; otherwise safe defaults. Nothing
here fails: a machine that reveals nothing gets the defaults.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

#: Used when the OS does not say (a common desktop/server core).
DEFAULT_CACHES = {"l1d_bytes": 32 * 1024, "l2_bytes": 1024 * 1024, "l3_bytes": 8 * 1024 * 1024}

# LLVM CPU names with 512-bit and 256-bit vector units, for when /proc/cpuinfo is absent.
_AVX512 = re.compile(r"(skylake-avx512|cascadelake|cooperlake|cannonlake|icelake|tigerlake|rocketlake|"
                     r"sapphirerapids|emeraldrapids|graniterapids|diamondrapids|znver[45]|knl|knm|x86-64-v4)")
_AVX2 = re.compile(r"(haswell|broadwell|skylake|alderlake|raptorlake|meteorlake|arrowlake|lunarlake|gracemont|"
                   r"sierraforest|grandridge|clearwaterforest|znver[123]|bdver4|x86-64-v3)")


@functools.cache
def llvm_cpu() -> str:
    """LLVM's name for the host CPU (``znver5``, ``neoverse-v2``...)."""
    import tvm  # only for LLVM's opinion; "native" is silently "generic" in TVM 0.27

    return tvm.target.codegen.llvm_get_system_cpu()


@functools.cache
def llvm_triple() -> str:
    """LLVM's target triple for the host (what TVM builds for without one)."""
    import tvm

    return tvm.target.codegen.llvm_get_system_triple()


def arch(triple: str | None = None) -> str:
    """The architecture of a triple (the host's by default) as braze names it:
    ``x86_64``, ``aarch64``, ... (``amd64`` and ``arm64`` are the same two)."""
    import platform

    name = (triple.split("-")[0] if triple else platform.machine()).lower()
    return {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}.get(name, name)


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> set[str]:
    """The ISA flags the kernel reports (x86 ``flags``, Arm ``Features``)."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


def vector_bits(flags: set[str] | None = None, mcpu: str | None = None) -> int:
    """Width of the host's float vector registers: 512 (AVX-512), 256 (AVX/AVX2),
    128 (SSE, NEON, anything else)."""
    flags = cpu_flags() if flags is None else flags
    if flags:
        if "avx512f" in flags:
            return 512
        if "avx2" in flags or "avx" in flags:
            return 256
        return 128
    name = mcpu if mcpu is not None else llvm_cpu()
    if _AVX512.search(name):
        return 512
    if _AVX2.search(name):
        return 256
    return 128


def vector_registers(flags: set[str] | None = None, mcpu: str | None = None) -> int:
    """Architectural vector registers: 32 with AVX-512 (zmm0-31) and on
    AArch64 (v0-v31), 16 with AVX/AVX2/SSE on x86-64 (ymm/xmm0-15)."""
    import platform

    flags = cpu_flags() if flags is None else flags
    if "avx512f" in flags or "asimd" in flags:
        return 32
    if flags:
        return 16
    if platform.machine().lower() in ("aarch64", "arm64"):
        return 32
    name = mcpu if mcpu is not None else llvm_cpu()
    return 32 if _AVX512.search(name) else 16


#: LLVM CPU names whose cores start fewer (or more) full-width vector FMAs per
#: cycle than two (vendors' optimization manuals): Zen 1 splits 256-bit ops
#: into two 128-bit halves, Zen 4 splits 512-bit ones; Neoverse V1/V2 and
#: Apple cores have four 128-bit FMA pipes.
_FMA_UNITS = {"znver1": 1, "btver2": 1, "bdver4": 1, "neoverse-v1": 4, "neoverse-v2": 4, "neoverse-v3": 4,
              "apple-m1": 4, "apple-m2": 4, "apple-m3": 4, "apple-m4": 4}


def fma_units(mcpu: str | None = None, bits: int | None = None) -> int:
    """Full-width vector FMA pipes per core for LLVM's CPU name ``mcpu``
    (2 unless ``_FMA_UNITS`` says otherwise; Zen 4 with 512-bit vectors: 1)."""
    name = mcpu if mcpu is not None else llvm_cpu()
    if name == "znver4" and (bits or vector_bits(mcpu=name)) >= 512:
        return 1
    return _FMA_UNITS.get(name, 2)


def isa(flags: set[str] | None = None) -> str:
    """The widest vector ISA the host has, as a person names it: ``AVX-512``,
    ``AVX2``, ``AVX``, ``SSE``, ``SVE``, ``NEON``, or ``unknown``."""
    flags = cpu_flags() if flags is None else flags
    for flag, name in (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX"), ("sse2", "SSE"),
                       ("sve", "SVE"), ("asimd", "NEON")):
        if flag in flags:
            return name
    return "unknown"


def cpu_name(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's model name as the OS reports it (``AMD EPYC 9B45``)."""
    import platform

    try:
        for line in Path(cpuinfo).read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "Hardware") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def describe_host() -> dict:
    """What a published figure must name: the CPU, LLVM's name for it, its
    vector ISA and its cores."""
    return {"cpu": cpu_name(), "llvm_cpu": llvm_cpu(), "isa": isa(), "cores": cores()}


def host_line() -> str:
    """One line for reports: ``AMD EPYC (znver3, AVX2), 2 cores``."""
    h = describe_host()
    return f"{h['cpu']} ({h['llvm_cpu']}, {h['isa']}), {h['cores']} cores"


def _size(text: str) -> int:
    """``48K``, ``1024K``, ``32M``, ``1048576`` -> bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text, re.IGNORECASE)
    if not m:
        return 0
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]
    return int(m.group(1)) * scale


def caches(root: str = "/sys/devices/system/cpu/cpu0/cache") -> dict[str, int]:
    """``{"l1d_bytes", "l2_bytes", "l3_bytes"}`` of one core, from sysfs where
    it has them (L3 is the whole shared cache); the defaults otherwise."""
    found = dict(DEFAULT_CACHES)
    try:
        entries = sorted(Path(root).glob("index*"))
    except OSError:
        return found
    for entry in entries:
        try:
            level = int((entry / "level").read_text())
            kind = (entry / "type").read_text().strip()
            size = _size((entry / "size").read_text())
        except (OSError, ValueError):
            continue
        if size <= 0 or kind == "Instruction":
            continue
        key = {1: "l1d_bytes", 2: "l2_bytes", 3: "l3_bytes"}.get(level)
        if key and (level > 1 or kind == "Data"):
            found[key] = size
    return found


def cores() -> int:
    """The host's CPUs (what ``--threads`` defaults to everywhere in braze)."""
    return os.cpu_count() or 1


def gpu_arch() -> str | None:
    """The first CUDA GPU's compute capability as nvcc names it (``sm_90``); None without one."""
    import tvm

    try:
        device = tvm.cuda(0)
        return "sm_" + device.compute_version.replace(".", "") if device.exist else None
    except Exception:  # noqa: BLE001 -- no CUDA runtime, no driver: no GPU
        return None


def host() -> dict:
    """Every detected field of the ``cpu`` descriptor but ``mattr``
    (``isa.host_mattr``: it needs the ISA tables, which need this module)."""
    mcpu = llvm_cpu()
    return {"mcpu": mcpu, "mtriple": llvm_triple(), "num_cores": cores(),
            "vector_bits": vector_bits(mcpu=mcpu),
            "vector_registers": vector_registers(mcpu=mcpu),
            "fma_units": fma_units(mcpu, vector_bits(mcpu=mcpu)), **caches()}
