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


def build(module: Module, target: Target) -> Compiled:
    kernels = partition(module.main)
    primfuncs = {k.name: build_kernel(k, target) for k in kernels}
    relax_mod = assemble(module, kernels, primfuncs)
    tgt = tvm_target(target)
    try:
        executable = tvm.compile(relax_mod, target=tgt, relax_pipeline=lowering_pipeline(tgt))
    except Exception as e:
        raise CodegenError(f"TVM failed to compile the model: {_tvm_message(e)}") from None
    return Compiled(executable, kernels, target)
