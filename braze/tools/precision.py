"""Finding where a 16-bit build loses accuracy: ``braze verify
--precision-mode M --per-group``, ``--suggest-keep`` and ``--samples``.

Each fused group of a 16-bit build is built alone and fed the values the
*float32* execution of the same graph gives its inputs (rounded to the
group's input dtypes); its outputs are compared with that float32
execution's. The float32 execution is the precision module itself run by
the numpy references with every 16-bit type read as float32 (the weights as
converted, so a group's error is its own arithmetic's and storage's, not
the error it inherits from the groups before it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import BrazeError
from ..ir import Module
from ..ir.builder import const_array
from ..ir.registry import lookup
from ..ir.types import TensorType

LOW = ("f16", "bf16")


def widened_values(module: Module, inputs: dict[str, np.ndarray]) -> dict[int, np.ndarray]:
    """Every value of ``@main`` (by ``id``) with 16-bit types computed in
    float32: casts to 16 bits are identities, 16-bit constants are widened."""
    func = module.main
    env = {id(a): np.asarray(inputs[a.name], dtype=_wide(a.type).np_dtype) for a in func.args}
    _run(func.body, env, module)
    return env


def _wide(ty: TensorType) -> TensorType:
    return ty.with_dtype("f32") if ty.dtype in LOW else ty


def _run(block, env: dict, module: Module) -> list[np.ndarray]:
    for op in block.ops:
        if op.name in ("func.return", "fuse.yield"):
            return [env[id(v)] for v in op.operands]
        args = [env[id(v)] for v in op.operands]
        if op.name == "const":
            out = [const_array(op, module).astype(_wide(op.result.type).np_dtype)]
        elif op.name == "fuse.group":
            inner = op.regions[0].blocks[0]
            env.update({id(a): x for a, x in zip(inner.args, args)})
            out = _run(inner, env, module)
        elif op.name == "math.cast" and op.result.type.dtype in LOW:
            out = [args[0].astype(np.float32)]
        else:
            attrs = dict(op.attributes)
            if op.name == "math.cast":
                attrs["to"] = _wide(op.result.type).dtype
            with np.errstate(all="ignore"):
                out = lookup(op.name).run_reference(args, [_wide(v.type) for v in op.operands], attrs)
        for r, a in zip(op.results, out):
            env[id(r)] = np.asarray(a)
    return []


def precision_groups(module: Module, inputs: dict, target="cpu") -> list:
    """Each group of a fused 16-bit module (consumed) against float32, worst
    first: ``measure.GroupError`` rows naming the ONNX nodes."""
    from ..measure import compare, group_error, run_group_alone
    from ..targets import get_target

    env = widened_values(module, inputs)
    tgt = get_target(target)
    rows = []
    for group in [op for op in module.main.body.ops if op.name == "fuse.group"]:
        with np.errstate(over="ignore"):  # a float32 value beyond float16's range is inf there too
            feeds = {f"in{i}": env[id(v)].astype(v.type.np_dtype) for i, v in enumerate(group.operands)}
        expected = {f"out{j}": env[id(r)] for j, r in enumerate(group.results)}
        if not any(v.type.dtype in LOW for op in group.regions[0].blocks[0].ops for v in op.results):
            continue  # float32 throughout: nothing of the precision mode's to check
        got = {k: v.astype(np.float32) if v.dtype.kind == "f" else v
               for k, v in run_group_alone(group, feeds, module.blobs, tgt).items()}
        rows.append(group_error(group, compare(got, expected)))
    return sorted(rows, key=lambda r: -_sortable(r.max_rel))


def _sortable(x: float) -> float:
    return float("inf") if np.isnan(x) else x


def offending_node(module: Module, group_name: str, inputs: dict) -> str | None:
    """The ONNX node to keep in float32 for a group that loses accuracy: a
    16-bit op whose float32 result nears its dtype's largest value (an
    overflow), else the group's matmul/conv, else its first 16-bit op. A
    cast to 16 bits stands for the op that reads it (the cast exists for it)."""
    env = widened_values(module, inputs)
    group = next(op for op in module.main.body.ops
                 if op.name == "fuse.group" and op.attributes["name"] == group_name)
    low = [op for op in group.regions[0].blocks[0].ops
           if any(r.type.dtype in LOW for r in op.results) and op.loc is not None]

    def reader(op):
        """The op a cast to 16 bits was made for: its first reader, in this
        group or, through the group's result, in the next one."""
        if op.name != "math.cast":
            return op
        users = [u for u in op.result.users() if u.name != "fuse.yield"]
        if users:
            return users[0]
        block = group.regions[0].blocks[0]
        j = next(j for j, v in enumerate(block.terminator.operands) if v is op.result)
        for user in group.results[j].users():
            if user.name != "fuse.group":
                return user
            k = next(k for k, v in enumerate(user.operands) if v is group.results[j])
            inner = user.regions[0].blocks[0].args[k].users()
            if inner:
                return inner[0]
        return None

    def headroom(op) -> float:
        limit = float(np.finfo(op.result.type.np_dtype).max) if op.result.type.dtype == "f16" else 3.3e38
        value = env.get(id(op.result))
        return 0.0 if value is None or value.size == 0 else float(np.nanmax(np.abs(value))) / limit

    for op in sorted(low, key=lambda o: -headroom(o)):
        if headroom(op) > 0.5:
            return _node(reader(op))
    for op in low:
        if op.name in ("nn.matmul", "nn.conv", "nn.conv_transpose", "nn.einsum"):
            return _node(op)
    return _node(reader(low[0])) if low else None


def _node(op) -> str | None:
    """An op's ONNX node name (None for ops braze made: groups, returns)."""
    if op is None or op.name in ("fuse.group", "func.return") or op.loc is None:
        return None
    return op.loc.name


@dataclass
class KeepSuggestion:
    """``braze verify --suggest-keep``: the nodes to keep in float32, and the
    output error after each step of the greedy walk."""

    keep: list[str]
    tolerance: float
    steps: list[tuple[list[str], float]] = field(default_factory=list)  # (keep so far, output error)

    @property
    def ok(self) -> bool:
        return bool(self.steps) and self.steps[-1][1] <= self.tolerance

    def text(self) -> str:
        """The keep-dtype file: ATC's format, one node per line."""
        return "".join(f"{name}\n" for name in self.keep)

    def table(self) -> str:
        lines = [f"{'step':>4}  {'output error':>12}  kept in float32"]
        for i, (keep, err) in enumerate(self.steps):
            lines.append(f"{i:>4}  {err:12.3e}  {', '.join(keep) or '-'}")
        verdict = "under" if self.ok else "still over"
        lines.append(f"{verdict} the tolerance {self.tolerance:g} with {len(self.keep)} node(s) kept")
        return "\n".join(lines)


def suggest_keep(model, inputs: dict, reference: dict, tolerance: float, build, fuse,
                 keep: list[str] | None = None, max_steps: int = 8, target="cpu") -> KeepSuggestion:
    """Greedy: while the build's worst output error against ``reference``
    (float32 onnxruntime) is over ``tolerance``, keep in float32 one node of
    the worst group (``offending_node``). ``build(keep)`` compiles and
    ``fuse(keep)`` fuses (no build) with that keep list."""
    from ..measure import compare

    keep = list(keep or [])
    result = KeepSuggestion(keep, tolerance)
    for _ in range(max_steps + 1):
        error = max(_sortable(e.max_rel) for e in compare(build(keep).run(inputs), reference))
        result.steps.append((list(keep), error))
        if error <= tolerance or len(result.steps) > max_steps:
            break
        rows = precision_groups(fuse(keep), inputs, target)
        node = None
        for row in rows:
            node = offending_node(fuse(keep), row.name, inputs)
            if node is not None and node not in keep:
                break
            node = None
        if node is None:
            raise BrazeError(f"--suggest-keep: no 16-bit node left to keep, and the error {error:.3e} is over "
                             f"{tolerance:g}; the loss is not the precision mode's (check float32 first)")
        keep.append(node)
    result.keep = keep
    return result


@dataclass
class Agreement:
    """Top-1 agreement with float32 onnxruntime over random inputs, per
    output that looks like class scores (``[batch, classes]``)."""

    samples: int
    agree: dict[str, int]
    worst_error: float

    def to_dict(self) -> dict:
        return {"samples": self.samples, "worst_error": self.worst_error,
                "top1": {k: v / self.samples for k, v in self.agree.items()}}

    def table(self) -> str:
        lines = [f"{self.samples} random inputs: worst output error {self.worst_error:.3e}"]
        for name, n in self.agree.items():
            lines.append(f"top-1 agreement, {name}: {n}/{self.samples} ({100 * n / self.samples:.1f}%)")
        return "\n".join(lines)


def top1_agreement(artifact, model, specs: list[dict], samples: int, distribution: str = "normal") -> Agreement:
    """Run ``samples`` random inputs (seeds 1..N, floats from
    ``distribution``: measure.random_inputs) through the artifact and
    onnxruntime; count, per class-score output, samples whose arg-maxes
    (every row's) are equal."""
    from ..measure import compare, random_inputs, run_onnxruntime

    agree: dict[str, int] = {}
    worst = 0.0
    for seed in range(1, samples + 1):
        inputs = random_inputs(specs, seed, distribution)
        ours, ref = artifact.run(inputs), run_onnxruntime(model, inputs)
        worst = max(worst, max(_sortable(e.max_rel) for e in compare(ours, ref)))
        for name, expected in ref.items():
            if expected.ndim == 2 and expected.shape[-1] > 1 and expected.dtype.kind == "f":
                same = np.argmax(ours[name], axis=-1) == np.argmax(expected, axis=-1)
                agree[name] = agree.get(name, 0) + int(same.all())
    return Agreement(samples, agree, worst)
