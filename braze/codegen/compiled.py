"""What a build gives (``Compiled``), and the loop the CPU and GPU builds
share: build every kernel, and when a fused group cannot be built, hand it
to ``on_group_failure`` (the compiler splits it back into single ops) and
start over on the new partition."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import tvm

from ..errors import CodegenError
from ..ir import Module
from ..targets import Target
from .kernel import Kernel, partition


@dataclass
class Compiled:
    executable: "tvm.runtime.Executable"
    kernels: list[Kernel]
    target: Target


def build_kernels(module: Module, build_one: Callable, on_group_failure=None) -> tuple[list[Kernel], dict]:
    """(kernels, name -> PrimFunc): ``build_one(kernel)`` for each kernel of
    ``module``; its CodegenError on a fused group goes to
    ``on_group_failure(kernel, error)`` and the module is partitioned and
    built again. Without a handler, or on a single op, the error propagates."""
    while True:
        kernels = partition(module.main)
        primfuncs, failed = {}, False
        for k in kernels:
            try:
                primfuncs[k.name] = build_one(k)
            except CodegenError as e:
                if k.group is None or on_group_failure is None:
                    raise
                on_group_failure(k, e)
                failed = True
        if not failed:
            return kernels, primfuncs
