"""What a build gives (``Compiled``), and the loop the CPU and GPU builds
share: build every kernel, and when a fused group cannot be built, hand it
to ``on_group_failure`` (the compiler splits it back into single ops) and
start over on the new partition. A geared compile (several modules, one per
gear) builds each gear's kernels and keeps one copy of those that come out
identical (``build_functions``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import tvm
import tvm_ffi

from ..errors import CodegenError
from ..ir import Module
from ..targets import Target
from .kernel import Kernel, partition


@dataclass
class Compiled:
    executable: "tvm.runtime.Executable"
    kernels: list[Kernel]  # every distinct kernel, each once
    target: Target
    #: Relax function -> the names of the kernels it calls, in order (one
    #: function, ``main``, unless the compile has gears)
    functions: dict[str, list[str]] = field(default_factory=dict)


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


def build_functions(gears: list[tuple[str, Module, Callable | None]], build_one: Callable, progress=None
                    ) -> tuple[dict[str, list[Kernel]], dict]:
    """Each gear ``(function name, module, on_group_failure)`` built with
    ``build_kernels`` and ``build_one(kernel, gear index)``: (function -> its
    kernels, name -> PrimFunc). A kernel whose PrimFunc is identical to one
    an earlier gear built is that kernel (built once, stored once; within one
    gear, kernels stay apart as without gears); a different one whose name is
    taken is renamed ``g<i>_<name>`` for gear ``i``. ``progress`` (with
    ``start(total)``, ``advance()`` and ``finish()``) follows the kernels
    as they are built."""
    if progress is not None:
        progress.start(sum(len(partition(m.main)) for _, m, _ in gears))
        built_one = build_one

        def build_one(k, gear=0):
            func = built_one(k, gear)
            progress.advance()
            return func
    try:
        return _build_functions(gears, build_one)
    finally:
        if progress is not None:
            progress.finish()


def _build_functions(gears, build_one) -> tuple[dict[str, list[Kernel]], dict]:
    functions: dict[str, list[Kernel]] = {}
    primfuncs: dict = {}
    known: dict[int, list[str]] = {}  # earlier gears': structural hash of a PrimFunc without its name -> names
    for index, (name, module, on_group_failure) in enumerate(gears):
        kernels, built = build_kernels(module, lambda k, gear=index: build_one(k, gear), on_group_failure)
        new: dict[int, list[str]] = {}
        for k in kernels:
            func = built[k.name]
            body = func.without_attr("global_symbol")
            digest = tvm_ffi.structural_hash(body)
            same = next((n for n in known.get(digest, ())
                         if tvm_ffi.structural_equal(primfuncs[n].without_attr("global_symbol"), body)), None)
            if same is not None:
                k.name = same
                continue
            if k.name in primfuncs:
                k.name = f"g{index}_{k.name}"
                func = func.with_attr("global_symbol", k.name)
            primfuncs[k.name] = func
            new.setdefault(digest, []).append(k.name)
        for digest, names in new.items():
            known.setdefault(digest, []).extend(names)
        functions[name] = kernels
    return functions, primfuncs


def distinct(functions: dict[str, list[Kernel]]) -> list[Kernel]:
    """Every kernel the functions call, each once, in first-call order."""
    seen: dict[str, Kernel] = {}
    for kernels in functions.values():
        for k in kernels:
            seen.setdefault(k.name, k)
    return list(seen.values())
