"""Targets: what braze compiles for, described by data (docs/targets.md).

A target is a descriptor file (``braze/targets/*.json``, or a user's file of
the same format) plus this loader. Built in: ``cpu`` (the host, detected),
the fleets ``cpu-avx2`` / ``cpu-avx512`` / ``cpu-neon`` (fixed figures, any
build machine), ``cuda-sm80`` / ``cuda-sm90`` (NVIDIA GPUs) and the
Ascend-like NPUs ``ascend910b-like`` / ``ascend310p-like``.
``get_target(name_or_path)`` gives a ``Target``; ``available()`` the
built-in names; ``isa.requirements(target)`` what a CPU needs to run its code.

Every ``Target`` has the fields codegen reads on any family: ``kind`` (the
TVM target kind kernels are built with), ``mcpu``, ``mtriple`` and ``mattr``
(the CPU the code runs on, as LLVM names it), and the sizes a schedule tiles
for: ``num_cores``, ``vector_bits``, ``vector_registers``, ``fma_units``, ``l1d_bytes``,
``l2_bytes``, ``l3_bytes``. An Ascend-like target builds for the host (a
functional emulator), so those are the host's; its chip is ``npu``.
"""

from __future__ import annotations

import json
import platform
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from ..errors import TargetError
from . import detect, isa
from .descriptor import DETECT, FAMILIES, CpuSpec, CudaSpec, NpuSpec, parse_descriptor

HERE = Path(__file__).parent
#: The order `braze targets` lists families in.
_FAMILY_ORDER = ("cpu", "cuda", "ascend")


@dataclass(frozen=True)
class Target:
    """What to compile for. ``kind`` is the TVM target kind the kernels are
    built with (``llvm`` or ``cuda``), ``mcpu`` the LLVM name of the host CPU,
    ``num_cores`` the parallel units a schedule spreads work over (CPU
    threads; a GPU's SMs), ``family`` the descriptor's (``cpu``, ``cuda``,
    ``ascend``); ``cuda``/``npu`` hold the device's own fields.

    Example::

        target = braze.get_target("cpu-avx2")
        print(target.name, target.kind, target.mcpu)
    """

    name: str
    kind: str
    mcpu: str
    num_cores: int
    family: str = "cpu"
    vector_bits: int = 128
    vector_registers: int = 16
    fma_units: int = 2
    l1d_bytes: int = detect.DEFAULT_CACHES["l1d_bytes"]
    l2_bytes: int = detect.DEFAULT_CACHES["l2_bytes"]
    l3_bytes: int = detect.DEFAULT_CACHES["l3_bytes"]
    mtriple: str = ""  # "": the host's
    mattr: tuple = ()
    description: str = ""
    cuda: CudaSpec | None = None
    npu: NpuSpec | None = None

    def to_dict(self) -> dict:
        """Every field (the manifest's ``target``); ``from_dict`` reads it back."""
        return asdict(self)

    @staticmethod
    def from_dict(data: dict) -> "Target":
        data = dict(data)
        specs = {"cuda": CudaSpec, "npu": NpuSpec}
        for key, cls in specs.items():
            if data.get(key) is not None:
                data[key] = cls(**data[key])
        data["mattr"] = tuple(data.get("mattr") or ())
        names = {f.name for f in fields(Target)}
        return Target(**{k: v for k, v in data.items() if k in names})

    def llvm(self) -> dict:
        """The TVM ``llvm`` target of the CPU that runs this target's code (a
        GPU's host code, an emulator's kernels)."""
        spec = {"kind": "llvm", "mcpu": self.mcpu}
        if self.mtriple:
            spec["mtriple"] = self.mtriple
        if self.mattr:
            spec["mattr"] = list(self.mattr)
        return spec

    def descriptor(self) -> dict:
        """The descriptor file of this target (what ``--target FILE`` reads);
        a CPU's detected fields are written out as found."""
        key, _ = FAMILIES[self.family]
        if self.family == "cpu":
            section = {f.name: getattr(self, f.name) for f in fields(CpuSpec)}
        else:
            section = asdict(getattr(self, key))
        return {"name": self.name, "family": self.family, "description": self.description, key: section}

    @property
    def arch(self) -> str:
        """The architecture the CPU code runs on: ``x86_64``, ``aarch64``..."""
        return detect.arch(self.mtriple or None)


# --- loading -------------------------------------------------------------------------
def available() -> list[str]:
    """The built-in descriptors' names: the CPU, the GPUs, then the NPUs."""
    found = []
    for path in sorted(HERE.glob("*.json")):
        try:
            family = json.loads(path.read_text()).get("family", "")
        except (OSError, ValueError):
            family = ""
        rank = _FAMILY_ORDER.index(family) if family in _FAMILY_ORDER else len(_FAMILY_ORDER)
        found.append((rank, path.stem))
    return [name for _, name in sorted(found)]


def read_descriptor(spec: str) -> tuple[dict, str]:
    """(JSON data, where it came from) for a built-in name or a file path."""
    path = Path(spec)
    builtin = HERE / f"{spec}.json"
    if "/" not in spec and "\\" not in spec and not spec.endswith(".json") and builtin.is_file():
        path = builtin
    elif not path.is_file():
        if spec.endswith(".json") or "/" in spec:
            raise TargetError(f"target file {spec}: no such file")
        raise TargetError(f"unknown target '{spec}' (built in: {', '.join(available())}; "
                          "or give a descriptor file, see `braze targets --show NAME --json`)")
    where = path.name if path.parent == HERE else str(path)
    try:
        return json.loads(path.read_text()), where
    except OSError as e:
        raise TargetError(f"target file {where}: cannot read it ({e.strerror})") from None
    except ValueError as e:
        raise TargetError(f"target file {where}: not valid JSON ({e})") from None


#: The LLVM CPU a CUDA artifact's host code is built for, by this machine's
#: architecture: the baseline, so that any GPU server of that architecture runs it.
CUDA_HOST_CPU = {"x86_64": "x86-64", "AMD64": "x86-64", "aarch64": "generic", "arm64": "generic"}


def from_descriptor(data: dict, where: str = "<descriptor>", threads: int | None = None) -> Target:
    """A Target from descriptor JSON; TargetError naming the bad field."""
    name, family, description, section = parse_descriptor(data, where)
    host = _host(threads)
    common = {"name": name, "family": family, "description": description}
    if family == "cpu":
        found = {k: (host[k] if v == DETECT else v) for k, v in section.items()}
        if threads:
            found["num_cores"] = threads
        return Target(kind="llvm", **common, **found)
    if family == "cuda":
        gpu = CudaSpec(**section)
        # Kernels run on the GPU; host code (the VM, the launches) on the GPU
        # machine's CPU, which need not be this one: the ISA's baseline. The
        # sizes are the GPU's: a warp of 32-bit lanes, shared memory as the
        # closest level, its L2.
        return Target(kind="cuda", mcpu=CUDA_HOST_CPU.get(platform.machine(), "generic"), num_cores=gpu.sm_count,
                      vector_bits=32 * gpu.warp_size, vector_registers=16,
                      l1d_bytes=gpu.max_shared_memory_per_block,
                      l2_bytes=gpu.l2_bytes, l3_bytes=0, cuda=gpu, **common)
    # An Ascend-like target runs as a functional emulator on the host: kernels
    # are tuned for the host; the chip drives fusion and the estimates.
    return Target(kind="llvm", npu=NpuSpec(**section), **common, **host)


def _host(threads: int | None) -> dict:
    found = detect.host()
    found["mattr"] = isa.host_mattr(found["mcpu"])
    if threads:
        found["num_cores"] = threads
    return found


def get_target(spec="cpu", threads: int | None = None) -> Target:
    """A Target from a Target, a built-in name (``cpu``, ``cuda-sm90``,
    ``ascend910b-like``...), or a descriptor file's path.

    Args:
        spec: the name, a descriptor's path or dict, or a Target.
        threads: the CPU threads kernels spread over (default: all cores).

    Returns:
        Target: what ``braze.compile(target=...)`` takes.

    Raises:
        TargetError: an unknown name (the message lists the built-in ones)
            or a descriptor that does not validate.

    Example::

        braze.compile("model.onnx", target=braze.get_target("cpu-avx2"))
    """
    if isinstance(spec, Target):
        return spec
    if spec in (None, "llvm"):
        spec = "cpu"
    if isinstance(spec, dict):
        return from_descriptor(spec, "<descriptor>", threads)
    if not isinstance(spec, str):
        raise TargetError(f"a target is a name or a descriptor file, got {type(spec).__name__}")
    data, where = read_descriptor(spec)
    return from_descriptor(data, where, threads)


def host_cpu(threads: int | None = None) -> Target:
    """The machine braze runs on."""
    return get_target("cpu", threads)


def mismatch(built: dict, requires: dict | None = None) -> str | None:
    """Why this machine cannot run code built for ``built`` (a manifest's
    ``target``) that ``requires`` an ISA (the manifest's ``requires``), as
    "(what it needs), what this machine is"; None if it can. Without
    ``requires`` (an older manifest) the CPU must be the one it was built for."""
    host = detect.llvm_cpu()
    kind = built.get("kind")
    if kind not in ("llvm", "cuda"):
        return f"({kind} {built.get('mcpu')}), this machine is llvm {host}"
    if requires is not None:
        problem = isa.missing(requires)
        if problem:
            return problem
    elif built.get("mcpu") != host:
        return f"({kind} {built.get('mcpu')}), this machine is llvm {host}"
    if kind == "cuda":
        arch = (built.get("cuda") or {}).get("arch", "?")
        have = detect.gpu_arch()
        if have is None:
            return f"(CUDA {arch}), this machine has no CUDA GPU; run it on one, or build for --target cpu"
        if not _runs_on(arch, have):
            return f"(CUDA {arch}), this machine's GPU is {have}"
    return None


def fitting_targets() -> list[str]:
    """The built-in portable CPU targets this machine runs, widest first."""
    fits = []
    for name in available():
        target = get_target(name)
        if target.family == "cpu" and name != "cpu" and isa.missing(isa.requirements(target)) is None:
            fits.append((target.vector_bits, name))
    return [name for _, name in sorted(fits, reverse=True)]


def advice() -> str:
    """What to do about an artifact this machine cannot run."""
    portable = fitting_targets()
    choices = (f"`--target {portable[0]}` (portable) or " if portable else "") + "`--target cpu` (this machine)"
    return f"rebuild it with `braze compile` for a target this machine runs: {choices}"


def _runs_on(built: str, have: str) -> bool:
    """Compiled GPU code runs on the same major compute capability, same or newer minor."""
    b, h = built[3:].rstrip("abf"), have[3:].rstrip("abf")
    return b[:-1] == h[:-1] and h[-1:] >= b[-1:]


__all__ = ["CpuSpec", "CudaSpec", "NpuSpec", "Target", "advice", "available", "fitting_targets",
           "from_descriptor", "get_target", "host_cpu", "mismatch", "read_descriptor"]
