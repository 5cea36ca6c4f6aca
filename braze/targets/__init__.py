"""Target descriptors. Today: the host CPU (detected). Descriptor files for
CUDA and Ascend-like NPUs come with the targets issue."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from ..errors import BrazeError


@dataclass(frozen=True)
class Target:
    """What to compile for: ``kind`` is the TVM target kind, ``mcpu`` the LLVM
    CPU name (detected for the host), ``num_cores`` the thread pool size."""

    name: str
    kind: str
    mcpu: str
    num_cores: int

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(data: dict) -> "Target":
        return Target(**data)


def host_cpu(threads: int | None = None) -> Target:
    from ..codegen.target import host_cpu_name

    return Target("cpu", "llvm", host_cpu_name(), threads or os.cpu_count() or 1)


def get_target(spec="cpu", threads: int | None = None) -> Target:
    if isinstance(spec, Target):
        return spec
    if spec in ("cpu", "llvm", None):
        return host_cpu(threads)
    raise BrazeError(f"unknown target '{spec}' (available: cpu)")
