"""Checking and timing an artifact against onnxruntime.

- ``verify``: the same inputs through braze and onnxruntime, per output the
  max absolute error and that error relative to the output's scale
  (``max|ref|``, at least 1).
- ``bench``: braze and onnxruntime each timed alone, in worker processes of
  their own, alternating phases that start once every worker is idle
  (``braze.timing``); the ratio with its spread, and optional controls
  (each engine against itself).
- ``profile``: time per kernel, from the VM's call instrumentation.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np

from .errors import BrazeError, first_line
from .reference import ort_session
from .timing import IDLE_TIMEOUT_S, PROBE_S, Ratio, Timing


def random_inputs(specs: list[dict], seed: int = 0, distribution: str = "normal") -> dict[str, np.ndarray]:
    """Inputs for a model's input specs: floats from ``distribution``
    (``normal``: N(0, 1), the default; ``uniform:LO,HI``: uniform in [LO,
    HI), e.g. ``uniform:0,1`` for images scaled to [0, 1]), ints and bools
    in {0, 1} (safe as token ids, masks and segment ids)."""
    low_high = parse_distribution(distribution)
    rng = np.random.default_rng(seed)
    out = {}
    for s in specs:
        dtype = np.dtype(s["dtype"])
        if dtype.kind == "f":
            values = rng.standard_normal(s["shape"]) if low_high is None else rng.uniform(*low_high, s["shape"])
            out[s["name"]] = values.astype(dtype)
        elif dtype.kind == "b":
            out[s["name"]] = rng.random(s["shape"]) > 0.5
        else:
            out[s["name"]] = rng.integers(0, 2, s["shape"]).astype(dtype)
    return out


def parse_distribution(text: str) -> tuple[float, float] | None:
    """``normal`` -> None; ``uniform:LO,HI`` -> (LO, HI); else InputError."""
    from .errors import InputError

    if text == "normal":
        return None
    kind, _, bounds = text.partition(":")
    try:
        low, high = (float(b) for b in bounds.split(","))
    except ValueError:
        low = high = None
    if kind != "uniform" or low is None or not low < high:
        raise InputError(f"random inputs {text!r}: expected 'normal' (N(0, 1)) or 'uniform:LO,HI' with LO < HI, "
                         "e.g. uniform:0,1 for images scaled to [0, 1]")
    return low, high


def load_inputs(path: str) -> dict[str, np.ndarray]:
    """One array per input name from an ``.npz``; InputError names the file."""
    from .errors import InputError

    usage = "expected an .npz with one array per input name, e.g. from numpy.savez('in.npz', x=x)"
    try:
        data = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(f"{path}: no such inputs file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory; {usage}") from None
    except Exception as e:  # a truncated zip, or (numpy's words for any other bytes) "pickled data"
        reason = "unreadable" if "pickle" in str(e) else first_line(e)
        raise InputError(f"{path}: not an .npz file ({reason}); {usage}") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise InputError(f"{path}: holds a single array, not named ones; {usage}")
    try:
        with data:
            return {k: data[k] for k in data.files}
    except Exception as e:  # a damaged member, or an object array
        raise InputError(f"{path}: cannot read its arrays ({first_line(e)}); {usage}") from None




# --- verify -----------------------------------------------------------------------------------
@dataclass
class OutputError:
    name: str
    max_abs: float
    max_rel: float

    def to_dict(self) -> dict:
        return {"name": self.name, "max_abs": self.max_abs, "max_rel": self.max_rel}


def compare(ours: dict, ref: dict) -> list[OutputError]:
    rows = []
    for name, expected in ref.items():
        got = ours[name]
        if got.shape != expected.shape:
            raise BrazeError(f"output '{name}': braze gives shape {list(got.shape)}, onnxruntime {list(expected.shape)}")
        diff = np.abs(got.astype(np.float64) - expected.astype(np.float64))
        diff = np.where(np.isnan(got) & np.isnan(expected), 0, diff) if expected.dtype.kind == "f" else diff
        max_abs = float(diff.max()) if diff.size else 0.0
        scale = max(1.0, float(np.abs(expected).max())) if expected.size else 1.0
        rows.append(OutputError(name, max_abs, max_abs / scale))
    return rows


def run_onnxruntime(model, inputs: dict, threads: int | None = None) -> dict[str, np.ndarray]:
    sess = ort_session(model, threads)
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, inputs)))


# --- verify each fused group -----------------------------------------------------------------
@dataclass
class GroupError:
    name: str
    rule: str
    nodes: list[str]
    max_abs: float
    max_rel: float

    def to_dict(self) -> dict:
        return {"name": self.name, "rule": self.rule, "nodes": self.nodes, "max_abs": self.max_abs,
                "max_rel": self.max_rel}


def verify_groups(module, inputs: dict, target="cpu") -> list[GroupError]:
    """Each ``fuse.group`` of a fused module built alone as one TVM kernel and
    compared with the same ops unfused (braze's numpy references), on the
    values the whole model feeds it for ``inputs``. The module is consumed:
    each group is moved into a function of its own."""
    from .ir.interpret import interpret_values
    from .targets import get_target

    env = interpret_values(module, inputs)
    tgt = get_target(target)
    rows = []
    for group in [op for op in module.main.body.ops if op.name == "fuse.group"]:
        feeds = {f"in{i}": env[id(v)] for i, v in enumerate(group.operands)}
        expected = {f"out{j}": env[id(r)] for j, r in enumerate(group.results)}
        rows.append(group_error(group, compare(run_group_alone(group, feeds, module.blobs, tgt), expected)))
    return rows


def run_group_alone(group, feeds: dict, blobs: dict, target) -> dict[str, np.ndarray]:
    """Build one ``fuse.group`` as a model of its own (it is moved out of its
    function) and run it on ``feeds`` (``in0``, ``in1``, ...): ``out0``, ..."""
    from .codegen import build
    from .ir import Block, Func, Module, Operation
    from .runtime.artifact import Artifact

    names = [f"out{j}" for j in range(len(group.results))]
    body = Block([v.type for v in group.operands], list(feeds))
    for i, arg in enumerate(body.args):
        group.set_operand(i, arg)
    group.parent.remove(group)
    body.append(group)
    body.append(Operation("func.return", list(group.results), []))
    alone = Module([Func("main", body, names)], blobs)
    manifest = {"inputs": [{"name": n, "shape": list(a.shape), "dtype": str(a.dtype)} for n, a in feeds.items()],
                "outputs": [{"name": n} for n in names], "kernels": [], "target": target.to_dict()}
    return Artifact(manifest, "", executable=build(alone, target).executable).run(feeds)


def group_error(group, errors: list[OutputError]) -> GroupError:
    """A group's row: its name, rule, ONNX nodes and its worst output's error."""
    nodes = [op.loc.name for op in group.regions[0].blocks[0].ops if op.loc]
    return GroupError(group.attributes["name"], group.attributes.get("rule", ""), nodes,
                      max(e.max_abs for e in errors), max(e.max_rel for e in errors))


# --- bench: braze against onnxruntime, each timed alone ---------------------------------------
#: A control (an engine against itself) within this of 1.00 shows the method is sound.
CONTROL_TOLERANCE = 0.10
BRAZE, ORT = "braze", "onnxruntime"


@dataclass
class BenchResult:
    """braze against onnxruntime (and, with the self-check, each against itself)."""

    timing: Timing
    host: dict
    spin: int  # the braze workers' spin count (braze.threads)

    @property
    def braze_ms(self) -> float:
        return self.timing.engines[BRAZE].median_ms

    @property
    def onnxruntime_ms(self) -> float:
        return self.timing.engines[ORT].median_ms

    @property
    def ratio(self) -> Ratio:
        return self.timing.ratio(BRAZE, ORT)

    @property
    def controls(self) -> dict[str, Ratio]:
        """Each engine against its twin, for the engines that have one."""
        return {name: self.timing.ratio(name, f"{name}#2") for name in (BRAZE, ORT)
                if f"{name}#2" in self.timing.engines}

    @property
    def controls_ok(self) -> bool:
        return all(r.within(CONTROL_TOLERANCE) for r in self.controls.values())

    def to_dict(self) -> dict:
        t = self.timing
        data = {"braze_ms": self.braze_ms, "onnxruntime_ms": self.onnxruntime_ms, **self.ratio.to_dict(),
                "threads": t.threads, "repeat": t.engines[BRAZE].to_dict()["runs"],
                "braze": t.engines[BRAZE].to_dict(), "onnxruntime": t.engines[ORT].to_dict(),
                "method": t.method(), "host": self.host, "spin": self.spin}
        if self.controls:
            data["controls"] = {name: {**r.to_dict(), "ok": r.within(CONTROL_TOLERANCE)}
                                for name, r in self.controls.items()}
            data["controls_tolerance"] = CONTROL_TOLERANCE
        return data

    def table(self) -> str:
        """The human-readable report of ``braze bench`` and ``braze demo``."""
        t, m = self.timing, self.timing.method()
        lines = [f"each engine timed alone on {self.host['cpu']} ({self.host['llvm_cpu']}, {self.host['isa']}), "
                 f"{t.threads} threads:",
                 f"{m['phases']} alternating phases per engine in {m['processes_per_engine']} fresh processes each, "
                 "every phase warmed up and started once all workers were idle",
                 "", f"{'':<16} {'median ms':>10} {'q1-q3 ms':>19} {'idle CPU s':>10}   phase medians ms"]
        for name, e in t.engines.items():
            d = e.to_dict()
            quart = f"{d['q1_ms']:.3f}-{d['q3_ms']:.3f}"
            lines.append(f"{name:<16} {d['median_ms']:10.3f} {quart:>19} {d['cpu_after_run_s']:10.3f}   "
                         + " ".join(f"{x:.3f}" for x in d["phase_medians_ms"]))
        lines.append(f"(idle CPU s: CPU time each engine's process used in the {PROBE_S} s after its last run)")
        lines += ["", f"ratio braze/onnxruntime {self.ratio} (< 1: braze faster)"]
        for name, r in self.controls.items():
            verdict = "ok" if r.within(CONTROL_TOLERANCE) else f"OFF (more than {CONTROL_TOLERANCE:.2f} from 1)"
            lines.append(f"control {name}/{name}#2 {r}: {verdict}")
        if m["idle_timeouts"]:
            lines.append(f"warning: {m['idle_timeouts']} phase(s) started before the workers went idle "
                         f"(they kept busy for {IDLE_TIMEOUT_S:.0f} s)")
        if m["background_cores"] > 0.25:
            lines.append(f"warning: other processes kept {m['background_cores']:.2f} cores busy while timing "
                         "(median over phases): expect noisy figures")
        return "\n".join(lines)


def bench(artifact_path: str, onnx_path: str, inputs: dict, threads: int, repeat: int = 50, phases: int = 10,
          warmup: int = 2, self_check: bool = False, spin=None, processes: int = 3) -> BenchResult:
    """braze's artifact and onnxruntime's session on the same inputs and
    threads, each timed alone (``time_alone``): ``repeat`` timed calls per
    engine over ``phases`` phases. ``self_check`` adds a second worker of
    each engine, timed in the same rotation, as the method's control."""
    from .threads import current_spin, spin_count
    from .targets.detect import describe_host
    from .timing import Engine, time_alone

    spin = current_spin() if spin is None else spin_count(spin)  # what the braze workers will use
    engines = [Engine(BRAZE, artifact_path, spin=spin), Engine(ORT, onnx_path)]
    if self_check:
        engines += [Engine(BRAZE, artifact_path, f"{BRAZE}#2", spin=spin), Engine(ORT, onnx_path, f"{ORT}#2")]
    runs = max(1, -(-repeat // phases))
    timing = time_alone(engines, inputs, threads, phases=phases, runs=runs, warmup=warmup, processes=processes)
    return BenchResult(timing, describe_host(), spin)


# --- profile -------------------------------------------------------------------------------------------
def profile(artifact, inputs: dict, repeat: int = 5) -> list[tuple[str, float]]:
    """(kernel, median ms) for every kernel, in execution order."""
    samples = artifact.kernel_times(inputs, repeat)
    names = {k["name"] for k in artifact.kernels}
    return [(s, 1e3 * statistics.median(times)) for s, times in samples.items() if s in names]


# --- onnxruntime's per-node profile, attributed to braze's kernels ------------------------------------
def profile_onnxruntime(model, inputs: dict, threads: int | None, repeat: int = 5) -> list[tuple[str, str, float]]:
    """(node, op type, median ms) for every node onnxruntime runs, in the
    order it runs them, from onnxruntime's own profiler. The names are those
    of onnxruntime's optimized graph: an original node keeps its name, a
    node it makes (an NCHWc convolution, a fusion) is named after an output
    tensor (``relu_2_nchwc``)."""
    import json
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        sess = ort_session(model, threads, profile_prefix=os.path.join(tmp, "ort"))
        for _ in range(repeat + 1):  # the first run is a warm-up
            sess.run(None, inputs)
        with open(sess.end_profiling()) as f:
            events = json.load(f)
    runs: dict[str, tuple[str, list[tuple[float, float]]]] = {}
    for ev in events:
        if ev.get("cat") == "Node" and ev.get("name", "").endswith("_kernel_time"):
            node = ev["name"][: -len("_kernel_time")]
            runs.setdefault(node, (ev.get("args", {}).get("op_name", "?"), []))[1].append((ev["ts"], ev["dur"]))
    rows = []
    for node, (op, samples) in runs.items():
        rows.append((samples[0][0], node, op, statistics.median(d for _, d in samples[-repeat:]) / 1e3))
    return [(node, op, ms) for _, node, op, ms in sorted(rows)]


def attribute_nodes(onnx_model, kernels: list[dict], rows: list[tuple[str, str, float]]):
    """onnxruntime's time per braze kernel. An onnxruntime node counts for
    the kernel holding the ONNX node of its name or, for a node onnxruntime
    made, the node producing the tensor it is named after (its name less
    ``_suffix`` parts), or the node a fusion of onnxruntime is named after
    (its name less ``/Suffix/`` parts: ``/blk/Mul/QuickGeluFusion/``, a
    SiLU, counts for the kernel holding ``/blk/Mul``). Returns ({kernel:
    ms}, the rows matched to no kernel: onnxruntime's own layout changes
    and what braze folded away)."""
    node_kernel = {n: k["name"] for k in kernels for n in k["nodes"]}
    producer = {out: node.name for node in onnx_model.graph.node for out in node.output}
    per_kernel: dict[str, float] = {}
    unmatched = []
    for name, op, ms in rows:
        kernel = None
        for sep in "_/":
            candidate = name
            while kernel is None and candidate:
                kernel = node_kernel.get(candidate) or node_kernel.get(producer.get(candidate, ""))
                candidate = candidate.rstrip(sep).rpartition(sep)[0]
        if kernel is None:
            unmatched.append((name, op, ms))
        else:
            per_kernel[kernel] = per_kernel.get(kernel, 0.0) + ms
    return per_kernel, unmatched
