"""Checking and timing an artifact against onnxruntime.

- ``verify``: the same inputs through braze and onnxruntime, per output the
  max absolute error and that error relative to the output's scale
  (``max|ref|``, at least 1).
- ``bench``: braze and onnxruntime each in a worker process of its own
  (TVM's idle workers spin and would steal cores from a neighbour in the same
  process), same input and thread count, rounds interleaved, medians compared.
- ``profile``: time per kernel, from the VM's call instrumentation.
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
import time
from dataclasses import dataclass

import numpy as np

from .errors import BrazeError


def random_inputs(specs: list[dict], seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs for a model's input specs: N(0,1) floats, ints and bools in {0, 1}
    (safe as token ids, masks and segment ids)."""
    rng = np.random.default_rng(seed)
    out = {}
    for s in specs:
        dtype = np.dtype(s["dtype"])
        if dtype.kind == "f":
            out[s["name"]] = rng.standard_normal(s["shape"]).astype(dtype)
        elif dtype.kind == "b":
            out[s["name"]] = rng.random(s["shape"]) > 0.5
        else:
            out[s["name"]] = rng.integers(0, 2, s["shape"]).astype(dtype)
    return out


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
        reason = "unreadable" if "pickle" in str(e) else _first_line(e)
        raise InputError(f"{path}: not an .npz file ({reason}); {usage}") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise InputError(f"{path}: holds a single array, not named ones; {usage}")
    try:
        with data:
            return {k: data[k] for k in data.files}
    except Exception as e:  # a damaged member, or an object array
        raise InputError(f"{path}: cannot read its arrays ({_first_line(e)}); {usage}") from None


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def ort_session(model, threads: int | None, profile_prefix: str | None = None):
    """An onnxruntime CPU session on ``threads`` intra-op threads (its
    profiler on, writing under ``profile_prefix``, when given)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    if threads:
        opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    if profile_prefix:
        opts.enable_profiling = True
        opts.profile_file_prefix = profile_prefix
    data = model.SerializeToString() if hasattr(model, "SerializeToString") else model
    if not isinstance(data, bytes):
        with open(data, "rb") as f:
            data = f.read()
    return ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])


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
    from .codegen import build
    from .ir import Block, Func, Module, Operation
    from .ir.interpret import interpret_values
    from .runtime.artifact import Artifact
    from .targets import get_target

    env = interpret_values(module, inputs)
    tgt = get_target(target)
    rows = []
    for group in [op for op in module.main.body.ops if op.name == "fuse.group"]:
        feeds = {f"in{i}": env[id(v)] for i, v in enumerate(group.operands)}
        expected = {f"out{j}": env[id(r)] for j, r in enumerate(group.results)}
        body = Block([v.type for v in group.operands], list(feeds))
        for i, arg in enumerate(body.args):
            group.set_operand(i, arg)
        group.parent.remove(group)
        body.append(group)
        body.append(Operation("func.return", list(group.results), []))
        alone = Module([Func("main", body, list(expected))], module.blobs)
        manifest = {"inputs": [{"name": n, "shape": list(a.shape), "dtype": str(a.dtype)} for n, a in feeds.items()],
                    "outputs": [{"name": n} for n in expected], "kernels": [], "target": tgt.to_dict()}
        got = Artifact(manifest, "", executable=build(alone, tgt).executable).run(feeds)
        errors = compare(got, expected)
        nodes = [op.loc.name for op in group.regions[0].blocks[0].ops if op.loc]
        rows.append(GroupError(group.attributes["name"], group.attributes.get("rule", ""), nodes,
                               max(e.max_abs for e in errors), max(e.max_rel for e in errors)))
    return rows


# --- bench ------------------------------------------------------------------------------------------
def _worker(kind: str, source, threads: int, inputs: dict, conn) -> None:
    """Runs in its own process: load, then time on request until told to stop."""
    try:
        if kind == "braze":
            import os

            os.environ["TVM_NUM_THREADS"] = str(threads)
            from .runtime import load

            artifact = load(source)
            arrays = artifact.check_inputs(inputs)
            import tvm

            device = artifact.device  # the GPU for a CUDA artifact: inputs live there, runs end with a sync
            args = [tvm.runtime.tensor(a, device) for a in arrays]
            fn = artifact.vm["main"]
            run = lambda: (fn(*args), device.sync())  # noqa: E731
        else:
            sess = ort_session(source, threads)
            run = lambda: sess.run(None, inputs)  # noqa: E731
        run()
        conn.send(("ready", None))
        while True:
            n = conn.recv()
            if n is None:
                return
            times = []
            for _ in range(n):
                t0 = time.perf_counter()
                run()
                times.append(time.perf_counter() - t0)
            conn.send(("times", times))
    except BaseException as e:  # report, never hang the parent
        conn.send(("error", f"{type(e).__name__}: {e}"))


@dataclass
class BenchResult:
    braze_ms: float
    onnxruntime_ms: float
    threads: int
    repeat: int

    @property
    def ratio(self) -> float:
        return self.braze_ms / self.onnxruntime_ms

    def to_dict(self) -> dict:
        return {"braze_ms": self.braze_ms, "onnxruntime_ms": self.onnxruntime_ms, "ratio": self.ratio,
                "threads": self.threads, "repeat": self.repeat}


def bench(artifact_path: str, onnx_path: str, inputs: dict, threads: int, repeat: int = 10,
          warmup: int = 2, rounds: int = 5) -> BenchResult:
    """Median latency of braze and onnxruntime, interleaved in rounds."""
    ctx = mp.get_context("spawn")
    workers = {}
    try:
        for kind, source in (("braze", artifact_path), ("onnxruntime", onnx_path)):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_worker, args=(kind, source, threads, inputs, child), daemon=True)
            proc.start()
            workers[kind] = (proc, parent)
        for kind, (_, conn) in workers.items():
            _expect(conn, "ready", kind)
        times = {k: [] for k in workers}
        per_round = max(1, -(-repeat // rounds))
        for r in range(rounds + 1):
            for kind, (_, conn) in workers.items():
                conn.send(per_round if r else warmup)
                got = _expect(conn, "times", kind)
                if r:
                    times[kind] += got
                time.sleep(0.05)  # let spinning pool threads settle before the other side runs
        return BenchResult(1e3 * statistics.median(times["braze"]), 1e3 * statistics.median(times["onnxruntime"]),
                           threads, len(times["braze"]))
    finally:
        for proc, conn in workers.values():
            try:
                conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()


def _expect(conn, tag: str, kind: str):
    got, payload = conn.recv()
    if got == "error":
        raise BrazeError(f"{kind} benchmark worker failed: {payload}")
    return payload


# --- profile -------------------------------------------------------------------------------------------
def profile(artifact, inputs: dict, repeat: int = 5) -> list[tuple[str, float]]:
    """(kernel, median ms) for every kernel call, in execution order."""
    import tvm

    arrays = [tvm.runtime.tensor(a, artifact.device) for a in artifact.check_inputs(inputs)]
    vm = artifact.vm
    # a GPU returns before its kernels finish: wait for each one on a CUDA artifact
    sync = artifact.device.sync if artifact.manifest["target"].get("kind") == "cuda" else (lambda: None)
    samples: dict[str, list[float]] = {}
    order: list[str] = []
    start = {}

    def instrument(func, symbol, before, ret, *args):
        sync()
        if before:
            start[symbol] = time.perf_counter()
        else:
            if symbol not in samples:
                samples[symbol] = []
                order.append(symbol)
            samples[symbol].append(time.perf_counter() - start[symbol])
        return 0

    vm["main"](*arrays)  # warm-up
    vm.set_instrument(tvm.runtime.convert(instrument) if hasattr(tvm.runtime, "convert") else instrument)
    try:
        for _ in range(repeat):
            vm["main"](*arrays)
    finally:
        vm.set_instrument(None)
    names = {k["name"] for k in artifact.kernels}
    return [(s, 1e3 * statistics.median(samples[s])) for s in order if s in names]


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
    ``_suffix`` parts). Returns ({kernel: ms}, the rows matched to no kernel:
    onnxruntime's own layout changes and what braze folded away)."""
    node_kernel = {n: k["name"] for k in kernels for n in k["nodes"]}
    producer = {out: node.name for node in onnx_model.graph.node for out in node.output}
    per_kernel: dict[str, float] = {}
    unmatched = []
    for name, op, ms in rows:
        kernel, candidate = None, name
        while kernel is None and candidate:
            kernel = node_kernel.get(candidate) or node_kernel.get(producer.get(candidate, ""))
            candidate = candidate.rpartition("_")[0]
        if kernel is None:
            unmatched.append((name, op, ms))
        else:
            per_kernel[kernel] = per_kernel.get(kernel, 0.0) + ms
    return per_kernel, unmatched
