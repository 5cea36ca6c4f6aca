"""IR module -> kernels -> Relax module -> one TVM executable."""

from __future__ import annotations

from dataclasses import dataclass

import tvm

from ..errors import BrazeError, CodegenError
from ..ir import Module
from ..targets import Target
from .assemble import assemble, lowering_pipeline
from .kernel import Kernel, partition, primfunc
from .target import tvm_target


@dataclass
class Compiled:
    executable: "tvm.runtime.Executable"
    kernels: list[Kernel]
    target: Target


def _tvm_message(e: Exception) -> str:
    lines = [l for l in str(e).strip().splitlines() if l.strip()]
    return lines[-1] if lines else type(e).__name__


def build_kernel(kernel: Kernel, target: Target):
    """One kernel's PrimFunc; a CodegenError naming the kernel if TVM refuses."""
    try:
        return primfunc(kernel)
    except BrazeError:
        raise
    except Exception as e:  # TVM raises many types; all mean "this kernel cannot be built"
        raise CodegenError(f"kernel {kernel.name} ({', '.join(kernel.nodes)}): {_tvm_message(e)}") from None


def build(module: Module, target: Target, on_group_failure=None) -> Compiled:
    """Build every kernel and the executable. When a fused group's kernel
    cannot be built and ``on_group_failure(kernel, error)`` is given, it is
    called (to split the group back into single ops) and the build goes on;
    otherwise the CodegenError propagates."""
    while True:
        kernels = partition(module.main)
        primfuncs, failed = {}, False
        for k in kernels:
            try:
                primfuncs[k.name] = build_kernel(k, target)
            except CodegenError as e:
                if k.group is None or on_group_failure is None:
                    raise
                on_group_failure(k, e)
                failed = True
        if not failed:
            break
    relax_mod = assemble(module, kernels, primfuncs)
    tgt = tvm_target(target)
    try:
        executable = tvm.compile(relax_mod, target=tgt, relax_pipeline=lowering_pipeline(tgt))
    except Exception as e:
        raise CodegenError(f"TVM failed to compile the model: {_tvm_message(e)}") from None
    return Compiled(executable, kernels, target)
