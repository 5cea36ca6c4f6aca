"""The descriptor format: one section of typed fields per target family.

A descriptor file is JSON::

    {"name": "ascend910b-like", "family": "ascend", "description": "...",
     "npu": {"ai_core_cnt": 24, "ub_size": 196608, ...}}

``family`` picks the section: ``cpu`` -> ``"cpu"``, ``cuda`` -> ``"cuda"``,
``ascend`` -> ``"npu"``. Each section is a frozen dataclass below; its
fields' metadata say what they mean, in which unit, and what values are
valid, and ``parse_section`` checks a file against them, naming the field
that is wrong. The NPU fields keep the names of Ascend's public platform
config files (``[SoCInfo]``, ``[AICoreSpec]``, ``[AICoreMemoryRates]``).
"""

from __future__ import annotations

import re
from dataclasses import MISSING, dataclass, field, fields

from ..errors import TargetError

#: A CPU field with this value is detected on the machine that loads the descriptor.
DETECT = "detect"


def _f(doc: str, unit: str = "", *, minimum: float = 1, choices=None, pattern: str | None = None, default=MISSING):
    meta = {"doc": doc, "unit": unit, "minimum": minimum, "choices": choices, "pattern": pattern}
    return field(default=default, metadata=meta)


@dataclass(frozen=True, kw_only=True)
class CpuSpec:
    """A CPU: the host's (``"detect"``, any field) or a fleet's (fixed values)."""

    mcpu: str = _f("LLVM's name for the CPU (znver5, x86-64-v3, neoverse-v2)")
    mtriple: str = _f("LLVM target triple: the architecture and OS the code runs on (x86_64-linux-gnu, "
                      "aarch64-linux-gnu)")
    mattr: tuple = _f("LLVM CPU features added to or removed from mcpu's (+neon, -avx512f)", default=())
    num_cores: int = _f("threads the kernels run on")
    vector_bits: int = _f("width of the float vector registers: 512 AVX-512, 256 AVX2, 128 SSE/NEON", "bits",
                          choices=(64, 128, 256, 512, 1024, 2048))
    vector_registers: int = _f("architectural vector registers: 32 with AVX-512 and on AArch64, 16 with "
                               "AVX2/SSE; register tiles fit in them")
    fma_units: int = _f("FMA pipes of one core that each start a full-width vector FMA every cycle: 2 on most "
                        "x86 cores since Haswell and Zen 2, 1 for AVX-512 on Zen 4 (two 256-bit halves); a "
                        "register tile keeps fma_units x 4 (the FMA latency) accumulators in flight")
    l1d_bytes: int = _f("L1 data cache of one core", "bytes")
    l2_bytes: int = _f("L2 cache of one core", "bytes")
    l3_bytes: int = _f("last-level cache, shared (0: none)", "bytes", minimum=0)


@dataclass(frozen=True)
class CudaSpec:
    """An NVIDIA GPU of one compute capability."""

    arch: str = _f("compute capability as nvcc names it", pattern=r"sm_\d+[a-z]?")
    sm_count: int = _f("streaming multiprocessors")
    max_threads_per_block: int = _f("threads in one block")
    warp_size: int = _f("threads in one warp")
    max_shared_memory_per_block: int = _f("shared memory one block may use without opting in", "bytes")
    shared_memory_per_sm: int = _f("shared memory of one SM", "bytes")
    registers_per_block: int = _f("32-bit registers one block may use")
    l2_bytes: int = _f("L2 cache", "bytes")
    peak_fp32_tflops: float = _f("float32 peak (CUDA cores, FMA = 2 FLOP)", "TFLOP/s")
    peak_fp16_tflops: float = _f("float16 dense tensor-core peak", "TFLOP/s")
    hbm_gbps: float = _f("device memory bandwidth", "GB/s")


@dataclass(frozen=True)
class NpuSpec:
    """An Ascend-like NPU: AI cores with a cube (matrix) unit, a vector unit and
    on-chip buffers, as in Ascend's platform config files."""

    ai_core_cnt: int = _f("AI cores ([SoCInfo] ai_core_cnt)")
    cube_core_cnt: int = _f("cores with a cube unit")
    vector_core_cnt: int = _f("vector cores (split: the AI vector cores; fuse: the stand-alone ones)", minimum=0)
    cube_vector_combine: str = _f("split: cube and vector units are separate cores (910B); fuse: each AI core "
                                  "holds both, plus vector_core_cnt stand-alone vector cores (310P)",
                                  choices=("split", "fuse"))
    cube_freq: int = _f("clock of the cube and vector units", "MHz")
    cube_m_size: int = _f("cube shape: rows of the float16 fractal (M)")
    cube_n_size: int = _f("cube shape: columns (N)")
    cube_k_size: int = _f("cube shape: reduction depth (K); M*N*K float16 MACs per cycle per core")
    vec_calc_size: int = _f("vector unit width", "bytes per cycle")
    l0_a_size: int = _f("L0A buffer (the cube's left operand)", "bytes")
    l0_b_size: int = _f("L0B buffer (the cube's right operand)", "bytes")
    l0_c_size: int = _f("L0C buffer (the cube's accumulators)", "bytes")
    l1_size: int = _f("L1 buffer (operands staged for the cube)", "bytes")
    ub_size: int = _f("unified buffer (the vector unit's working memory)", "bytes")
    ubblock_size: int = _f("unified buffer block (alignment of every transfer)", "bytes")
    l2_size: int = _f("L2 cache, shared by all cores", "bytes")
    ddr_rate: float = _f("device memory (DDR/HBM) bandwidth of one AI core", "bytes per cycle")
    l2_rate: float = _f("L2 bandwidth of one AI core", "bytes per cycle")
    compute_dtype: str = _f("precision kernels run at on the chip (float16: ATC's default for inference)",
                            choices=("float16", "float32"), default="float16")
    launch_us: float = _f("per-kernel launch and synchronization cost, added to every kernel's estimate: an "
                          "assumed figure of the order reported for CUDA launch + sync and host-dispatched Ascend "
                          "kernels, not a measurement (docs/targets.md, \"Launch cost\"); 0 leaves it out",
                          "us", minimum=0, default=10.0)


#: family -> (section key, section class)
FAMILIES = {"cpu": ("cpu", CpuSpec), "cuda": ("cuda", CudaSpec), "ascend": ("npu", NpuSpec)}
TOP_LEVEL = ("name", "family", "description")


def describe_field(cls, name: str) -> str:
    meta = next(f for f in fields(cls) if f.name == name).metadata
    return meta["doc"] + (f" ({meta['unit']})" if meta["unit"] else "")


def parse_descriptor(data, where: str) -> tuple[str, str, str, dict]:
    """(name, family, description, section values) from a descriptor's JSON,
    or a TargetError naming ``where`` and the field."""
    if not isinstance(data, dict):
        raise TargetError(f"{where}: a descriptor is a JSON object like "
                          '{"name": ..., "family": "cpu|cuda|ascend", ...}')
    name = data.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]*", name):
        raise TargetError(f"{where}: field 'name' must be a name like 'my-npu' (letters, digits, . _ + -), "
                          f"got {name!r}")
    family = data.get("family")
    if family not in FAMILIES:
        raise TargetError(f"{where}: field 'family' must be one of {', '.join(FAMILIES)}, got {family!r}")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise TargetError(f"{where}: field 'description' must be text")
    key, cls = FAMILIES[family]
    unknown = [k for k in data if k not in TOP_LEVEL and k != key]
    if unknown:
        raise TargetError(f"{where}: unknown field '{unknown[0]}' (a {family} descriptor has: "
                          f"{', '.join(TOP_LEVEL)}, {key})")
    if key not in data:
        raise TargetError(f"{where}: missing field '{key}' (the {family} section)")
    section = parse_section(cls, data[key], where, key, detect=family == "cpu")
    if family == "cpu" and section.get("mcpu") == DETECT and "mattr" not in data[key]:
        section["mattr"] = DETECT  # the host's features beyond its detected name go with it
    return name, family, description, section


def parse_section(cls, data, where: str, section: str, detect: bool = False) -> dict:
    """The section's values, checked against ``cls``'s fields; errors read
    ``WHERE: field 'SECTION.NAME' ...``."""
    if not isinstance(data, dict):
        raise TargetError(f"{where}: field '{section}' must be an object of fields")
    known = {f.name: f for f in fields(cls)}
    for key in data:
        if key not in known:
            raise TargetError(f"{where}: field '{section}.{key}' is unknown (fields of '{section}': "
                              f"{', '.join(known)})")
    values = {}
    for name, f in known.items():
        label = f"{where}: field '{section}.{name}'"
        if name in data:
            values[name] = _check(data[name], f, label, detect)
        elif f.default is not MISSING:
            values[name] = f.default
        elif detect:
            values[name] = DETECT
        else:
            raise TargetError(f"{label} is missing: {describe_field(cls, name)}")
    return values


def _check(value, f, where: str, detect: bool):
    meta = f.metadata
    if detect and value == DETECT:
        return value
    want = f.type if isinstance(f.type, str) else f.type.__name__
    unit = f" ({meta['unit']})" if meta["unit"] else ""
    if want == "int":
        if isinstance(value, bool) or not isinstance(value, int) or value < meta["minimum"]:
            bound = "a positive" if meta["minimum"] >= 1 else "a non-negative"
            raise TargetError(f"{where} must be {bound} integer{unit}, got {value!r}")
    elif want == "tuple":
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and re.fullmatch(r"[+-][\w.-]+", v)
                                                            for v in value):
            raise TargetError(f"{where} must be a list of LLVM features like [\"+neon\"], got {value!r}")
        value = tuple(value)
    elif want == "float":
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        positive = meta["minimum"] > 0
        if not number or not (value > 0 if positive else value >= 0):  # NaN fails both
            raise TargetError(f"{where} must be a {'positive' if positive else 'non-negative'} number{unit}, "
                              f"got {value!r}")
        value = float(value)
    elif not isinstance(value, str) or not value:
        raise TargetError(f"{where} must be text, got {value!r}")
    if meta["choices"] is not None and value not in meta["choices"]:
        raise TargetError(f"{where} must be one of {', '.join(map(str, meta['choices']))}, got {value!r}")
    if meta["pattern"] and not re.fullmatch(meta["pattern"], value):
        raise TargetError(f"{where} must look like {meta['pattern']!r} (e.g. sm_90), got {value!r}")
    return value
