"""What each kernel of a model is: its ops, shapes, schedule, FLOPs and
bytes moved (``braze kernels``).

For an ONNX model the kernels are those a compile would build (imported,
fused, partitioned) with the schedule each would get (planned, nothing
built); for an artifact, those it holds, with the schedule each was built
with (its final IR and manifest).

Counting: a matmul or conv does 2 FLOPs per multiply-add (2*M*N*K with its
batch; 2*K*(C/g)*R*S*OH*OW*N), every other op one per output element.
Bytes moved are the kernel's inputs (weights included) and outputs, each
read or written once.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from ..ir.registry import Kind, lookup
from ..targets import Target, get_target
from ..targets.roofline import cube_gemms
from ..codegen.kernel import Kernel, partition
from ..codegen.pins import rules_for
from ..codegen.schedules import plan


@dataclass
class KernelInfo:
    name: str
    ops: list[str]
    nodes: list[str]
    kind: str  # the kernel's kind: anchor, reduce, injective, ...
    anchor: str  # its anchor op (nn.matmul, nn.conv...), "" if none
    inputs: list[dict]  # {"shape", "dtype", "const"}: in PrimFunc argument order
    outputs: list[dict]  # {"shape", "dtype"}
    schedule: str  # the rule(s) it is (or would be) built with, or "generic"
    schedule_params: dict  # "op#index" -> the rule's parameters
    packed: list[str]  # layouts of the constants the schedule re-lays (e.g. gemm-panels-32)
    rules: list[str]  # the schedules that fit it: generic and the rules that apply
    flops: int
    bytes: int

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def params_text(self) -> str:
        return params_text(self.schedule_params)

    @property
    def shapes_text(self) -> str:
        ins = ",".join(("w:" if t["const"] else "") + _dims(t["shape"]) for t in self.inputs)
        return f"{ins} -> {','.join(_dims(t['shape']) for t in self.outputs)}"


def _dims(shape) -> str:
    return "x".join(map(str, shape)) or "scalar"


def params_text(schedule_params: dict) -> str:
    """``{"nn.matmul#0": {"tile_m": 8}}`` -> ``tile_m=8`` (one entry per distinct anchor)."""
    texts = list(dict.fromkeys(",".join(f"{k}={v}" for k, v in p.items()) if isinstance(p, dict) else str(p)
                               for p in (schedule_params or {}).values()))
    return "; ".join(t for t in texts if t)


def op_flops(op) -> int:
    """2 x the multiply-adds of a conv's, a matmul's or an attention's GEMMs; else one per result element."""
    gemms = cube_gemms(op)
    if gemms:
        return sum(2 * batch * m * n * k for batch, m, n, k in gemms)
    return sum(r.type.size for r in op.results)


def kernel_flops(kernel: Kernel) -> int:
    return sum(op_flops(op) for op in kernel.ops)


def kernel_bytes(kernel: Kernel) -> int:
    return sum(v.type.nbytes for v in kernel.params) + sum(v.type.nbytes for v in kernel.results)


def describe_kernel(kernel: Kernel, target=None, schedule: str | None = None, schedule_params: dict | None = None,
                    packed: list[str] | None = None) -> KernelInfo:
    """A kernel's description; its schedule as built (given) or as planned for ``target``."""
    if schedule is None:
        schedule, schedule_params, packed = "", {}, []
        if target is not None and target.kind == "llvm":
            choices = plan(kernel, target)
            schedule = "+".join(dict.fromkeys(c.rule.name for c in choices)) or "generic"
            schedule_params = {f"{kernel.ops[c.index].name}#{c.index}": c.params for c in choices}
            packed = sorted({p.name for c in choices
                             for p in c.rule.packings(kernel.ops[c.index], kernel, target, c.params).values()})
    fits = ["generic", *rules_for(kernel, target)] if target is not None and target.kind == "llvm" else []
    anchor = next((op.name for op in kernel.ops if lookup(op.name).kind == Kind.ANCHOR), "")
    inputs = [{"shape": list(p.type.shape), "dtype": str(p.type.np_dtype),
               "const": a.owner is not None and a.owner.name == "const"} for p, a in zip(kernel.params, kernel.args)]
    outputs = [{"shape": list(r.type.shape), "dtype": str(r.type.np_dtype)} for r in kernel.results]
    return KernelInfo(kernel.name, kernel.op_types, kernel.nodes, kernel.kind.value, anchor, inputs, outputs,
                      schedule, dict(schedule_params or {}), list(packed or []), fits, kernel_flops(kernel),
                      kernel_bytes(kernel))


def kernels(source, level: int = 2, fusion=None, input_shapes=None, target="cpu",
            threads: int | None = None, precision: dict | None = None,
            layout: str = "blocked") -> list[KernelInfo]:
    """The kernels of an ONNX model (fused and planned, nothing built) or of
    an artifact (a path or an ``Artifact``: the schedules it was built with).

    Returns:
        list[KernelInfo]: name, ops, nodes, kind, shapes, schedule and its
        parameters, FLOPs and bytes of each kernel, in execution order.

    Raises:
        OnnxImportError, ArtifactError: as ``compile`` and ``load``.

    Example::

        for k in braze.kernels("model.onnx", level=3):
            print(k.name, k.schedule, k.flops)
    """
    from ..runtime.artifact import MANIFEST, Artifact

    if isinstance(source, Artifact) or (isinstance(source, (str, os.PathLike))
                                        and os.path.isfile(os.path.join(source, MANIFEST))):
        return _artifact_kernels(source)
    tgt = get_target(target, threads)
    module = fused(source, level, fusion, input_shapes, target, precision, layout)
    return [describe_kernel(k, tgt) for k in partition(module.main)]


def kernels_table(found: list[KernelInfo]) -> str:
    """Two lines per kernel: name, kind, schedule, MFLOP, MB; then its ops and shapes."""
    name_w = max([52] + [len(k.name) for k in found])  # columns line up whatever the names
    sched_w = max([10] + [len(k.schedule or "-") for k in found])
    params_w = max([22] + [len(k.params_text or "-") for k in found])
    lines = [f"{'kernel':<{name_w}} {'kind':<9} {'schedule':<{sched_w}} {'params':<{params_w}} {'MFLOP':>9} {'MB':>8}"]
    for k in found:
        lines.append(f"{k.name:<{name_w}} {k.kind:<9} {k.schedule or '-':<{sched_w}} {k.params_text or '-':<{params_w}} "
                     f"{k.flops / 1e6:9.1f} {k.bytes / 1e6:8.2f}")
        packed = f"   packed: {', '.join(k.packed)}" if k.packed else ""
        lines.append(f"    {', '.join(k.ops)}   {k.shapes_text}{packed}")
    if found:
        largest = max(found, key=lambda k: k.flops)
        lines.append(f"\n{len(found)} kernels, {sum(k.flops for k in found) / 1e9:.2f} GFLOP, "
                     f"{sum(k.bytes for k in found) / 1e6:.1f} MB moved; most FLOPs: {largest.name}")
    return "\n".join(lines)


def _artifact_kernels(source) -> list[KernelInfo]:
    from ..ir import parse_module
    from ..runtime.artifact import Artifact, load

    artifact = source if isinstance(source, Artifact) else load(os.fspath(source), check_target=False)
    built = {k["name"]: k for k in artifact.kernels}
    module = parse_module(artifact.ir_text, "model.mlir")
    target = Target.from_dict(artifact.manifest["target"])
    found = []
    for k in partition(module.main):
        entry = built.get(k.name, {})
        found.append(describe_kernel(k, target, schedule=entry.get("schedule", ""),
                                     schedule_params=entry.get("schedule_params", {}), packed=entry.get("packed")))
    return found


def fused(model, level: int = 2, fusion=None, input_shapes=None, target="cpu", precision: dict | None = None,
          layout: str = "blocked"):
    """The model imported and fused as a compile would (no build)."""
    from ..compiler import fuse_only

    return fuse_only(model, level, fusion, input_shapes, target, precision, layout)[0]
