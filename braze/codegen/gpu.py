"""CUDA: kernels scheduled for the GPU and built with nvcc, with or without a GPU.

Each kernel's PrimFunc gets the first schedule rule that takes it: dlight's
GPU rules (matmul, GEMV, reduction, general reduction, the fallback that
binds any loop nest to blocks and threads), then braze's own
``bind_spatial`` for what those refuse. The model is assembled as on the
CPU and lowered by TVM's CUDA Relax pipeline (without its fusion).

Building needs CUDA's compiler, ``nvcc``, but no GPU: device code is
compiled at build time into a fatbin inside ``lib.so``. TVM's CUDA runtime
library, which embeds it, links against the driver (``libcuda.so.1``); on a
machine without a driver braze loads a stub driver whose every call answers
"no device" (built once with the C compiler into braze's cache folder).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import tvm
from tvm import s_tir
from tvm.s_tir import dlight as dl

from ..errors import BrazeError, CodegenError, last_line
from ..targets import Target
from .. import interrupts
from .assemble import assemble_functions
from .compiled import Compiled, build_functions, distinct
from .kernel import Kernel, primfunc
from .tvm_target import tvm_target

#: dlight's GPU rules, most specific first; the fallback takes any loop nest.
DLIGHT_RULES = ("Matmul", "GEMV", "Reduction", "GeneralReduction", "Fallback")


# --- scheduling ------------------------------------------------------------------------
def schedule(func, tgt: tvm.target.Target) -> tuple["tvm.tirx.PrimFunc", str]:
    """(scheduled PrimFunc, the rule's name): the first rule whose schedule
    TVM can lower. A rule that raises or declines is skipped (dlight's
    analyses assert on shapes they do not expect), and so is a schedule TVM
    cannot lower (a cross-thread reduction whose combiner it does not
    recognise, such as a NaN-propagating max)."""
    errors = []
    with tgt:
        for name in DLIGHT_RULES:
            try:
                space = getattr(dl.gpu, name)().apply(func, tgt, False)
            except Exception:  # noqa: BLE001 -- a rule's analysis failing means "not mine"
                continue
            if space is None:
                continue
            sch = space[0] if isinstance(space, list) else space
            scheduled = sch.mod["main"].with_attr("tirx.is_scheduled", True)
            error = lowering_error(scheduled, tgt)
            if error is None:
                return scheduled, f"dlight.{name}"
            errors.append(f"dlight.{name}: {error}")
        scheduled = bind_spatial(func, tgt)
        error = lowering_error(scheduled, tgt)
    if error is not None:
        raise CodegenError("no GPU schedule TVM can lower: " + "; ".join(errors + [f"bind_spatial: {error}"]))
    return scheduled, "bind_spatial"


def lowering_error(func, tgt: tvm.target.Target) -> str | None:
    """Why TVM's TIR lowering (everything before CUDA code generation) rejects
    a scheduled kernel; None if it takes it."""
    from tvm.tirx.compilation_pipeline import get_tir_pipeline

    lower = get_tir_pipeline("s_tir")[0]
    try:
        lower(tvm.IRModule({"main": func.with_attr("target", tgt)}))
    except Exception as e:  # noqa: BLE001
        lines = [l for l in str(e).splitlines() if l.strip() and not set(l.strip()) <= {"^"}]
        return lines[0] if lines else type(e).__name__
    return None


def bind_spatial(func, tgt: tvm.target.Target):
    """braze's last resort: inline what can be inlined, then give each
    remaining block's spatial loops to blocks x threads; its reduction loops
    (if any) run inside one thread."""
    sch = s_tir.Schedule(func)
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    for block in blocks[:-1]:
        with contextlib.suppress(Exception):
            sch.compute_inline(block)
    threads = min(256, int(tgt.attrs.get("max_num_threads", 1024)))
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        loops = sch.get_loops(block)
        kinds = [iv.iter_type for iv in sch.get(block).iter_vars]
        spatial = [l for l, k in zip(loops, kinds) if k == 0]
        if not spatial:
            spatial = [sch.add_unit_loop(block)]
        fused = sch.fuse(*spatial) if len(spatial) > 1 else spatial[0]
        bx, tx = sch.split(fused, [None, threads])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
    return sch.mod["main"].with_attr("tirx.is_scheduled", True)


def build_kernel(kernel: Kernel, tgt: tvm.target.Target):
    """One kernel's scheduled PrimFunc; sets ``kernel.schedule`` to the rule."""
    func, rule = schedule(primfunc(kernel), tgt)
    kernel.schedule = rule
    return func.with_attr("global_symbol", kernel.name)


# --- building ---------------------------------------------------------------------------
def build(gears, target: Target, progress=None):
    """Every kernel scheduled for the GPU, the model compiled with nvcc: a
    ``Compiled`` like the CPU build's, from ``[(function, module,
    on_group_failure), ...]`` (build.build_gears). A fused group that cannot
    be scheduled goes to its ``on_group_failure`` (split back) as on the CPU."""
    tgt = tvm_target(target)

    def build_one(k: Kernel, gear: int = 0):
        try:
            return build_kernel(k, tgt)
        except Exception as e:  # noqa: BLE001 -- TVM raises many types
            interrupts.check()
            if isinstance(e, BrazeError) and not isinstance(e, CodegenError):
                raise
            raise CodegenError(f"kernel {k.name} ({', '.join(k.nodes)}): {last_line(e)}") from None

    functions, primfuncs = build_functions(gears, build_one, progress)
    kernels = distinct(functions)
    relax_mod = assemble_functions([(name, module, functions[name]) for name, module, _ in gears], primfuncs)
    with cuda_toolchain(target):
        try:
            with tgt:
                executable = tvm.compile(relax_mod, target=tgt, relax_pipeline=lowering_pipeline(tgt))
        except Exception as e:  # noqa: BLE001
            interrupts.check()
            raise CodegenError(f"TVM failed to compile the model for {target.name}: {last_line(e)}") from None
    return Compiled(executable, kernels, target, {n: [k.name for k in ks] for n, ks in functions.items()})


def lowering_pipeline(tgt: tvm.target.Target) -> tvm.transform.Pass:
    """TVM's CUDA Relax lowering without its legalize/fuse/dlight stage:
    every kernel is already braze's and already scheduled."""
    from tvm.relax.backend.cuda import pipeline as cuda

    @tvm.transform.module_pass(opt_level=0)
    def pipeline(mod, _ctx):
        with tgt:
            return tvm.transform.Sequential(cuda.dataflow_lower_passes(tgt) + cuda.finalize_passes(tgt))(mod)

    return pipeline


# --- the toolchain ------------------------------------------------------------------------
def nvcc_path() -> str | None:
    """CUDA's compiler: on PATH, or under CUDA_HOME / CUDA_PATH / /usr/local/cuda."""
    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.access(os.path.join(root, "bin", "nvcc"), os.X_OK):
            return os.path.join(root, "bin", "nvcc")
    return None


@contextlib.contextmanager
def cuda_toolchain(target: Target):
    """Within: TVM compiles device code with nvcc into a fatbin for the
    target's arch, and its CUDA runtime (which embeds it) is loaded."""
    nvcc = nvcc_path()
    if nvcc is None:
        raise CodegenError(f"building for {target.name} needs CUDA's compiler, nvcc (the CUDA toolkit); "
                           "none on PATH, CUDA_HOME or /usr/local/cuda. Install it, or build --target cpu")
    load_cuda_runtime()
    arch = target.cuda.arch

    def compile_cuda(code, _target=None):
        from tvm.support import nvcc as tvm_nvcc

        with tvm.target.Target({"kind": "cuda", "arch": arch}):  # nvcc's flags follow the current target
            return tvm_nvcc.compile_cuda(code, target_format="fatbin", compiler="nvcc",
                                         arch=["-gencode", f"arch=compute_{arch[3:]},code={arch}"])

    previous = tvm.get_global_func("tvm_callback_cuda_compile", allow_missing=True)
    path = os.environ.get("PATH", "")
    os.environ["PATH"] = f"{os.path.dirname(nvcc)}{os.pathsep}{path}"
    tvm.register_global_func("tvm_callback_cuda_compile", compile_cuda, override=True)
    try:
        yield
    finally:
        os.environ["PATH"] = path
        if previous is not None:
            tvm.register_global_func("tvm_callback_cuda_compile", previous, override=True)


_STUB_SOURCE = r"""
/* A CUDA driver with no device: lets TVM's CUDA runtime load (and embed
   compiled kernels) on a machine without a GPU. Written by braze. */
typedef int CUresult;
enum { NO_DEVICE = 100 };
CUresult cuGetErrorName(CUresult e, const char **s) { if (s) *s = "CUDA_ERROR_NO_DEVICE"; return 0; }
CUresult cuGetErrorString(CUresult e, const char **s) { if (s) *s = "no CUDA device (braze's stub driver)"; return 0; }
CUresult cuDeviceGetName(char *name, int len, int dev) { return NO_DEVICE; }
CUresult cuFuncSetAttribute(void *f, int attr, int value) { return NO_DEVICE; }
CUresult cuLaunchKernelEx(const void *config, void *f, void **params, void **extra) { return NO_DEVICE; }
CUresult cuModuleGetFunction(void **f, void *m, const char *name) { return NO_DEVICE; }
CUresult cuModuleLoadData(void **m, const void *image) { return NO_DEVICE; }
CUresult cuModuleUnload(void *m) { return NO_DEVICE; }
CUresult cuTensorMapEncodeTiled(void *map, ...) { return NO_DEVICE; }
"""


def load_cuda_runtime() -> None:
    """Load TVM's CUDA runtime library, with the real driver when there is
    one and braze's stub driver otherwise."""
    from tvm.base import _LOADED_LIBS

    if "tvm_runtime_cuda" in _LOADED_LIBS:
        return
    try:
        ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        ctypes.CDLL(str(_stub_driver()), mode=ctypes.RTLD_GLOBAL)
    from tvm_ffi.libinfo import load_lib_ctypes

    runtime_dir = Path(_LOADED_LIBS["tvm_runtime"]._name).resolve().parent
    try:
        _LOADED_LIBS["tvm_runtime_cuda"] = load_lib_ctypes(package="tvm", target_name="tvm_runtime_cuda",
                                                           extra_lib_paths=[runtime_dir], mode="RTLD_LOCAL")
    except (OSError, RuntimeError) as e:
        raise CodegenError(f"TVM's CUDA runtime cannot load ({e}); it needs the CUDA toolkit's libcudart") \
            from None


def _stub_driver() -> Path:
    """The stub ``libcuda.so.1``, compiled once into braze's cache folder."""
    folder = Path(os.environ.get("BRAZE_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "braze")) \
        / "cuda-stub"
    lib = folder / "libcuda.so.1"
    if lib.is_file():
        return lib
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        raise CodegenError("building for CUDA without a GPU needs a C compiler (cc) for braze's stub driver")
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        source, out = os.path.join(tmp, "stub.c"), os.path.join(tmp, "libcuda.so.1")
        Path(source).write_text(_STUB_SOURCE)
        done = subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-Wl,-soname,libcuda.so.1", "-o", out, source],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise CodegenError(f"cannot build braze's stub CUDA driver: {done.stderr.strip()[-300:]}")
        os.replace(out, lib)  # atomic: a concurrent build finds a whole file or none
    return lib
