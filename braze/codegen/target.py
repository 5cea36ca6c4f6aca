"""Descriptor -> TVM target."""

from __future__ import annotations

import functools

import tvm

from ..targets import Target


@functools.cache
def host_cpu_name() -> str:
    # "native" is silently "generic" in TVM 0.27: ask LLVM for the host's name.
    return tvm.target.codegen.llvm_get_system_cpu()


def tvm_target(target: Target) -> tvm.target.Target:
    return tvm.target.Target({"kind": target.kind, "mcpu": target.mcpu, "num-cores": target.num_cores})
