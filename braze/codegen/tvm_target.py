"""braze target descriptor (braze/targets/) -> TVM target."""

from __future__ import annotations

import tvm

from ..targets import Target
from ..targets.detect import cores


def tvm_target(target: Target) -> tvm.target.Target:
    """The TVM target kernels are built for. A CUDA target carries its host
    (the CPU that runs the VM and launches kernels) and the GPU's limits,
    which dlight's rules size their thread blocks by. A CPU target may be
    another machine's (``cpu-neon`` built on x86-64): its triple and features
    go with it."""
    if target.kind == "cuda":
        gpu = target.cuda
        host = {**target.llvm(), "num-cores": cores()}
        return tvm.target.Target({"kind": "cuda", "arch": gpu.arch,
                                  "max_threads_per_block": gpu.max_threads_per_block,
                                  "max_shared_memory_per_block": gpu.max_shared_memory_per_block,
                                  "thread_warp_size": gpu.warp_size,
                                  "registers_per_block": gpu.registers_per_block,
                                  "l2_cache_size_bytes": gpu.l2_bytes}, host=host)
    return tvm.target.Target({**target.llvm(), "num-cores": target.num_cores})
