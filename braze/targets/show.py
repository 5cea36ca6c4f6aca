"""Targets for people: one-line summaries, a descriptor field by field, the
peak figures a descriptor implies (what ``braze targets`` prints)."""

from __future__ import annotations

from . import HERE, Target, available, get_target
from .descriptor import FAMILIES, describe_field


def peaks(target: Target) -> dict[str, float]:
    """Peak compute (TFLOP/s) and bandwidth (GB/s) a descriptor implies."""
    if target.cuda is not None:
        g = target.cuda
        return {"fp32_tflops": g.peak_fp32_tflops, "fp16_tflops": g.peak_fp16_tflops, "hbm_gbps": g.hbm_gbps}
    if target.npu is not None:
        from .roofline import Chip

        n, chip = target.npu, Chip(target.npu)
        m, k, c = chip.cube
        cube = 2 * m * k * c * n.cube_core_cnt * chip.hz / 1e12
        lanes = n.vec_calc_size / (2 if chip.half else 4)
        vector = lanes * chip.vector_units * chip.hz / 1e12
        return {f"cube_{n.compute_dtype}_tflops": round(cube, 1), f"vector_{n.compute_dtype}_tflops": round(vector, 2),
                "ddr_gbps": round(n.ddr_rate * n.ai_core_cnt * chip.hz / 1e9, 1),
                "l2_gbps": round(n.l2_rate * n.ai_core_cnt * chip.hz / 1e9, 1)}
    return {}


def summary(target: Target) -> str:
    if target.cuda is not None:
        g = target.cuda
        return f"{g.sm_count} SMs, {g.peak_fp32_tflops:g} TFLOP/s fp32, {g.hbm_gbps:g} GB/s"
    if target.npu is not None:
        n, p = target.npu, peaks(target)
        cube = next(v for k, v in p.items() if k.startswith("cube_"))
        return (f"{n.ai_core_cnt} AI cores, UB {_size(n.ub_size)}, cube {cube:g} TFLOP/s {n.compute_dtype}, "
                f"DDR {p['ddr_gbps']:g} GB/s")
    return (f"{target.num_cores} cores, {target.vector_registers} {target.vector_bits}-bit vector registers, "
            f"{target.fma_units} FMA units, "
            f"L1d {_size(target.l1d_bytes)}, "
            f"L2 {_size(target.l2_bytes)}, L3 {_size(target.l3_bytes)}")


def builds_for(target: Target) -> str:
    if target.kind == "cuda":
        return f"cuda {target.cuda.arch}"
    cpu = f"llvm {target.arch} {target.mcpu}{''.join(target.mattr)}"
    return cpu + (" (emulator)" if target.npu is not None else "")


def listing() -> list[dict]:
    """The built-in targets, as ``braze targets --json`` prints them."""
    rows = []
    for name in available():
        t = get_target(name)
        rows.append({"name": t.name, "family": t.family, "builds_for": builds_for(t), "summary": summary(t),
                     "description": t.description, "file": str(HERE / f"{name}.json")})
    return rows


def table() -> str:
    rows = listing()
    width = max(len(r["name"]) for r in rows)
    builds = max(len(r["builds_for"]) for r in rows)
    lines = [f"  {'name':<{width}}  {'family':<6}  {'builds for':<{builds}}  summary"]
    lines += [f"  {r['name']:<{width}}  {r['family']:<6}  {r['builds_for']:<{builds}}  {r['summary']}" for r in rows]
    lines += ["", "`braze targets --show NAME` describes one; `--show NAME --json` prints its descriptor, "
              "which `--target FILE` reads back."]
    return "\n".join(lines)


def describe(target: Target) -> str:
    """Every field of a target with what it means, and the peaks it implies."""
    key, cls = FAMILIES[target.family]
    section = target.descriptor()[key]
    lines = [f"{target.name} ({target.family}): {target.description}", f"  builds for {builds_for(target)}", ""]
    width = max(len(f"{key}.{n}") for n in section)
    shown = {name: " ".join(v) or "-" if isinstance(v, tuple) else str(v) for name, v in section.items()}
    value_width = max(12, *map(len, shown.values()))
    for name, value in shown.items():
        lines.append(f"  {key + '.' + name:<{width}}  {value:>{value_width}}  {describe_field(cls, name)}")
    if target.family == "cpu":
        from .isa import requirements

        needs = requirements(target)
        features = " ".join(needs["features"]) or "any features"
        lines += ["", f"  runs on {needs['arch']} CPUs with {features} (an artifact refuses to load elsewhere)"]
    implied = peaks(target)
    if implied:
        lines += ["", "  implies: " + ", ".join(f"{k} {v:g}" for k, v in implied.items())]
    return "\n".join(lines)


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % (scale // 16 or 1) == 0:
            return f"{n / scale:g} {unit}"
    return f"{n} B"
