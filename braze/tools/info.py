"""``braze info``: what an ONNX model or an artifact holds, without building
anything: inputs, outputs, opset, op histogram, FLOPs and parameter bytes;
for an artifact also its target, level, kernels, gears and precision."""

from __future__ import annotations

import os
from collections import Counter


def describe(path: str) -> dict:
    """The facts as a dict (``braze info --json``)."""
    from ..runtime.artifact import MANIFEST

    if os.path.isfile(os.path.join(path, MANIFEST)):
        return _artifact(path)
    return _onnx(path)


def _onnx(path: str) -> dict:
    import numpy as np

    from ..codegen.kernel import partition
    from ..frontend.importer import Importer, load_model, parse_shape_bindings
    from .listing import kernel_flops

    model = load_model(path)
    graph = model.graph
    inits = {t.name for t in graph.initializer}
    info = {"file": path, "kind": "onnx", "producer": f"{model.producer_name} {model.producer_version}".strip(),
            "opsets": {o.domain or "ai.onnx": o.version for o in model.opset_import},
            "inputs": [_value_info(i) for i in graph.input if i.name not in inits],
            "outputs": [_value_info(o) for o in graph.output],
            "ops": dict(Counter(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"
                                for n in graph.node).most_common()),
            "nodes": len(graph.node),
            "parameters": int(sum(np.prod(t.dims, dtype=np.int64) for t in graph.initializer)),
            "parameter_bytes": int(sum(np.prod(t.dims, dtype=np.int64) * _itemsize(t.data_type)
                                       for t in graph.initializer)),
            "flops": None}
    try:  # FLOPs need static shapes and every op supported: one kernel per op, counted
        module = Importer(model, parse_shape_bindings(None)).run()
        info["flops"] = int(sum(kernel_flops(k) for k in partition(module.main)))
    except Exception as e:  # noqa: BLE001 -- a typed braze error: say why there is no count
        info["flops_unavailable"] = str(e).splitlines()[0]
    return info


def _artifact(path: str) -> dict:
    from ..runtime.artifact import load

    artifact = load(path, check_target=False)
    m = artifact.manifest
    return {"file": path, "kind": "artifact", "model": m.get("model"), "braze": m.get("braze"), "tvm": m.get("tvm"),
            "target": m["target"]["name"], "requires": m.get("requires"), "level": m.get("level"),
            "layout": m.get("layout"), "threads": m.get("threads"),
            "inputs": m["inputs"], "outputs": m["outputs"], "kernels": len(m["kernels"]),
            "kernel_kinds": dict(Counter(k["kind"] for k in m["kernels"]).most_common()),
            "gears": [{"name": g["name"], "dims": g["dims"]} for g in m.get("gears") or []] or None,
            "precision": m.get("precision"), "compile_seconds": m.get("compile_seconds")}


def table(info: dict) -> str:
    """The facts as text."""
    def shapes(items):
        return ", ".join(f"{x['name']}: {x['dtype']}{list(x['shape'])}" for x in items)

    lines = [f"{info['file']} ({info['kind']})", f"  inputs:  {shapes(info['inputs'])}",
             f"  outputs: {shapes(info['outputs'])}"]
    if info["kind"] == "onnx":
        lines.append(f"  opsets:  {', '.join(f'{d} {v}' for d, v in info['opsets'].items())}"
                     + (f"   producer: {info['producer']}" if info["producer"] else ""))
        lines.append(f"  {info['nodes']} nodes: " + ", ".join(f"{op} {n}" for op, n in info["ops"].items()))
        lines.append(f"  parameters: {info['parameters']:,} ({info['parameter_bytes'] / 1e6:.2f} MB)")
        flops = info["flops"]
        lines.append(f"  FLOPs: {flops / 1e9:.3f} G per run" if flops is not None
                     else f"  FLOPs: unknown ({info.get('flops_unavailable', '')})")
    else:
        lines.append(f"  target: {info['target']}   level: {info['level']}   layout: {info['layout']}   "
                     f"threads: {info['threads'] or 'all cores'}")
        lines.append(f"  {info['kernels']} kernels: " + ", ".join(f"{n} {k}" for k, n in info["kernel_kinds"].items()))
        if info["gears"]:
            lines.append("  gears: " + ", ".join(g["name"] for g in info["gears"]))
        precision = info.get("precision") or {}
        if precision:
            lines.append(f"  precision: {precision.get('mode', precision)}")
        lines.append(f"  built by braze {info['braze']} with TVM {info['tvm']} (model {info['model']})")
    return "\n".join(lines)


def _value_info(v) -> dict:
    import onnx

    tt = v.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim]
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type).name if tt.elem_type else "?"
    return {"name": v.name, "shape": dims, "dtype": dtype}


def _itemsize(data_type: int) -> int:
    import onnx

    try:
        return onnx.helper.tensor_dtype_to_np_dtype(data_type).itemsize
    except (KeyError, TypeError, ValueError):
        return 1
