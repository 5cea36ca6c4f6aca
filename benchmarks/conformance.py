"""ONNX's backend node tests on braze (and onnxruntime), for the op types braze supports.

Collects onnx's node test cases in memory, keeps those whose every node is a
default-domain op type that braze converts (`braze ops --json`'s "onnx"
list), compiles and runs each through braze and through onnxruntime, and
compares with the case's expected outputs the way onnx's BackendTest does
(shape, dtype, then np.testing.assert_allclose with the case's rtol/atol,
NaN equal to NaN).

Each braze case runs in a worker process with a time limit, so a hang or a
crash in TVM costs one case, not the run. Outcomes:

  pass     the outputs match
  refused  braze raised a typed import error (an unsupported feature, said so)
  wrong    braze ran and gave a wrong answer (value, shape, dtype)
  crash    any other error: an untyped exception, a CodegenError, a timeout,
           a dead worker

    python benchmarks/conformance.py [--ops 'Conv|Pool'] [--level 0] [--workers 2] [--json out.json]
    python benchmarks/conformance.py --update-docs   # the results file and docs/conformance.md's table
    python benchmarks/conformance.py --render-docs   # only the table, from the results file (no run)
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue
import re
import sys
import textwrap
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

OUTCOMES = ("pass", "refused", "wrong", "crash")


# --- choosing the cases ------------------------------------------------------------------------
def collect(ops_regex: str | None, cases_regex: str | None):
    """(case, op) pairs: every node case (those with op types braze does not
    convert are refused at import, with a typed error); ``op`` is the op
    type the case tests (an ``_expanded`` case tests its function's op)."""
    import warnings

    from onnx.backend.test.case import node

    with warnings.catch_warnings():  # the generators' own overflow warnings
        warnings.simplefilter("ignore")
        every = node.collect_testcases()
    tested = {c.name: c.model.graph.node[-1].op_type for c in every if c.model.graph.node}
    chosen = []
    for case in every:
        nodes = case.model.graph.node
        if not nodes:
            continue
        op = tested.get(re.sub(r"_expanded(_ver\d+)?$", "", case.name), nodes[-1].op_type)
        if ops_regex and not re.search(ops_regex, op):
            continue
        if cases_regex and not re.search(cases_regex, case.name):
            continue
        chosen.append((case, op))
    return chosen, len(every)


def compare(expected: list, outputs: list, rtol: float, atol: float) -> None:
    """onnx's own check (BackendTest's): output count, shapes, dtypes, allclose."""
    from onnx.backend.test.runner import Runner

    Runner.assert_similar_outputs(expected, list(outputs), rtol=rtol, atol=atol)


def short(error: BaseException | str, limit: int = 160) -> str:
    text = str(error).strip()
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    if isinstance(error, AssertionError):  # numpy's report: the "Mismatched ..." and "Max ..." lines
        picked = [l for l in lines if l.startswith(("Mismatched", "Max abs", "Output", "x and y", "(shapes"))]
        lines = picked or lines
    text = " | ".join(lines[:3]) or type(error).__name__
    return text[:limit] + ("..." if len(text) > limit else "")


# --- braze, in a worker process ------------------------------------------------------------------
def run_braze(model_bytes: bytes, data_sets, rtol: float, atol: float, level: int) -> tuple[str, str, list]:
    """(outcome, error, the inputs the backend compiled in as constants)."""
    import onnx

    from braze.backend import BrazeBackend

    model = onnx.ModelProto.FromString(model_bytes)
    rep = None
    try:
        rep = BrazeBackend.prepare(model, "CPU", level=level)
        runs = [(rep.run(list(inputs)), expected) for inputs, expected in data_sets]
    except Exception as e:
        return classify(e), f"{type(e).__name__}: {short(e)}", sorted(getattr(rep, "constant_inputs", ()))
    constants = sorted(rep.constant_inputs)
    for outputs, expected in runs:
        try:
            compare(list(expected), outputs, rtol, atol)
        except AssertionError as e:
            return "wrong", short(e), constants
    return "pass", "", constants


def classify(error: Exception) -> str:
    """A typed import error is a refusal; anything else (a CodegenError too:
    braze accepted the model but could not build it) is a crash."""
    from braze.errors import BrazeError, CodegenError, InputError

    if isinstance(error, BrazeError) and not isinstance(error, (CodegenError, InputError)):
        return "refused"
    return "crash"


def worker(conn) -> None:
    os.environ.setdefault("TVM_NUM_THREADS", "1")  # workers run side by side
    import braze.backend  # noqa: F401  (and TVM: the time limit is per case, not for starting up)
    import tvm  # noqa: F401

    conn.send("ready")
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        conn.send(run_braze(*task))


class Supervisor:
    """One worker process; a case that overruns its time limit kills it."""

    def __init__(self, ctx, timeout: float):
        self.ctx, self.timeout, self.proc = ctx, timeout, None

    def start(self) -> None:
        self.conn, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=worker, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        if not self.conn.poll(300) or self.conn.recv() != "ready":
            raise RuntimeError("a worker process did not start")

    def run(self, task) -> tuple[str, str, list]:
        if self.proc is None or not self.proc.is_alive():
            self.start()
        self.conn.send(task)
        try:
            if self.conn.poll(self.timeout):
                return self.conn.recv()
            outcome = ("crash", f"timeout: no result after {self.timeout:g} s", [])
        except EOFError:
            self.proc.join(5)
            outcome = ("crash", f"the worker died (exit code {self.proc.exitcode})", [])
        self.stop()
        return outcome

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.join()
            self.proc = None


# --- onnxruntime, in this process --------------------------------------------------------------
def run_ort(model, data_sets, rtol: float, atol: float) -> tuple[str, str]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 4
    try:
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        for inputs, expected in data_sets:
            outputs = sess.run(None, {n: np.asarray(x) for n, x in zip(names, inputs)})
            try:
                compare(list(expected), outputs, rtol, atol)
            except AssertionError as e:
                return "wrong", short(e)
    except Exception as e:
        return "crash", f"{type(e).__name__}: {short(e)}"
    return "pass", ""


def _array(value):
    """onnx's test data holds some tensors (bfloat16, ...) as TensorProtos."""
    import onnx

    return onnx.numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else value


# --- the run -----------------------------------------------------------------------------------
def run_all(chosen, level: int, workers: int, timeout: float, with_ort: bool, say) -> list[dict]:
    ctx = mp.get_context("spawn")
    todo: queue.Queue = queue.Queue()
    for i, item in enumerate(chosen):
        todo.put((i, item))
    results: list[dict | None] = [None] * len(chosen)
    lock = threading.Lock()
    done = [0]

    def serve() -> None:
        sup = Supervisor(ctx, timeout)
        try:
            while True:
                try:
                    i, (case, op) = todo.get_nowait()
                except queue.Empty:
                    return
                data = [([_array(x) for x in inp], [_array(x) for x in out]) for inp, out in case.data_sets]
                t0 = time.perf_counter()
                outcome, error, constants = sup.run((case.model.SerializeToString(), data, case.rtol, case.atol,
                                                     level))
                record = {"case": case.name, "op": op, "braze": outcome, "error": error,
                          "constant_inputs": constants, "seconds": round(time.perf_counter() - t0, 2)}
                if with_ort:
                    record["onnxruntime"], record["ort_error"] = run_ort(case.model, data, case.rtol, case.atol)
                with lock:
                    results[i] = record
                    done[0] += 1
                    say(f"[{done[0]}/{len(chosen)}] {case.name}: {outcome}"
                        + (f" ({error})" if error else ""))
        finally:
            sup.stop()

    threads = [threading.Thread(target=serve) for _ in range(max(1, workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r for r in results if r is not None]


def report(results: list[dict], total_cases: int, with_ort: bool) -> str:
    n = len(results)
    count = Counter(r["braze"] for r in results)
    lines = [f"{n} of onnx's {total_cases} node test cases",
             f"braze:       {count['pass']}/{n} pass ("
             + ", ".join(f"{count[o]} {'refused (typed error)' if o == 'refused' else o}" for o in OUTCOMES[1:]) + ")"]
    folded = sum(1 for r in results if r["constant_inputs"])
    if folded:
        lines.append(f"             ({folded} cases give shape-like inputs, e.g. Reshape's shape, as graph inputs: "
                     "compiled in as constants)")
    if with_ort:
        ort = Counter(r["onnxruntime"] for r in results)
        lines.append(f"onnxruntime: {ort['pass']}/{n} pass ({ort['wrong']} wrong, {ort['crash']} error)")
    for outcome, title in (("wrong", "wrong answer"), ("crash", "crash"), ("refused", "refused (typed error)")):
        bad = sorted((r for r in results if r["braze"] == outcome), key=lambda r: (r["op"], r["case"]))
        if bad:
            lines += ["", f"{title}: {len(bad)}"]
            lines += [f"  {r['case']}  [{r['op']}]  {r['error']}" for r in bad]
    if with_ort:
        bad = [r for r in results if r["onnxruntime"] != "pass"]
        if bad:
            lines += ["", f"onnxruntime fails: {len(bad)}"]
            lines += [f"  {r['case']}  [{r['op']}]  {r['ort_error']}" for r in bad]
    return "\n".join(lines)


def per_op(results: list[dict]) -> dict:
    table: dict[str, Counter] = defaultdict(Counter)
    for r in results:
        table[r["op"]]["cases"] += 1
        table[r["op"]][r["braze"]] += 1
        if "onnxruntime" in r:
            table[r["op"]]["ort_pass"] += r["onnxruntime"] == "pass"
    return {op: dict(c) for op, c in sorted(table.items())}


TABLE_BEGIN = "<!-- BEGIN CONFORMANCE TABLE (generated: benchmarks/conformance.py --update-docs) -->"
TABLE_END = "<!-- END CONFORMANCE TABLE -->"
RESULTS = Path(__file__).parent / "results" / "conformance.json"
DOC = Path(__file__).parent.parent / "docs" / "conformance.md"


def markdown_table(data: dict, columns: int = 3) -> str:
    """docs/conformance.md's table, from a results file's ``summary`` and
    ``per_op``: the totals, then the op types where either engine fails a
    case, ``columns`` op types to a row."""
    s = data["summary"]
    plain = s["plain"]
    outcomes = ", ".join(f"{s['braze'].get(k, 0)} {k}" for k in ("refused", "wrong", "crash"))
    lines = [f"onnx {s['onnx']}'s {s['cases']} node test cases, braze {s['braze_version']} at level {s['level']} "
             f"and onnxruntime {s['onnxruntime_version']} (CPU):", "",
             "| | braze pass | onnxruntime pass |", "|---|---|---|",
             f"| the {plain['cases']} cases that are not `_expanded` | **{plain['braze']}** | {plain['onnxruntime']} |",
             f"| all {s['cases']} cases | **{s['braze'].get('pass', 0)}** ({outcomes}) "
             f"| {s['onnxruntime'].get('pass', 0)} |", ""]
    failing = {op: c for op, c in data["per_op"].items()
               if c.get("pass", 0) < c["cases"] or c.get("ort_pass", 0) < c["cases"]}
    lines += textwrap.wrap(
        f"The {len(failing)} op types where an engine fails a case (a case counts for the op it tests, its "
        f"`_expanded` form with it; braze's r: refused, w: wrong, c: crash; ort: onnxruntime); every case of the "
        f"other {len(data['per_op']) - len(failing)} passes on both:", 100)
    lines += ["",
              "| op type | cases | braze | ort " * columns + "|", "|---|---|---|---" * columns + "|"]

    def cell(op, c):
        notes = ", ".join(f"{c[k]} {k[0]}" for k in ("refused", "wrong", "crash") if c.get(k))
        return f"| {op} | {c['cases']} | {c.get('pass', 0)}{f' ({notes})' if notes else ''} | {c.get('ort_pass', 0)} "

    items = list(failing.items())
    rows = -(-len(items) // columns)
    for r in range(rows):
        row = [items[i] for i in range(r, len(items), rows)]
        lines.append("".join(cell(op, c) for op, c in row) + "| | | | " * (columns - len(row)) + "|")
    return "\n".join(lines)


def update_docs(data: dict, write_results: bool = True) -> None:
    """Write the results file and regenerate the table in docs/conformance.md."""
    if write_results:
        RESULTS.write_text(json.dumps(data, indent=1) + "\n")
    text = DOC.read_text()
    head, rest = text.split(TABLE_BEGIN)
    _, tail = rest.split(TABLE_END)
    DOC.write_text(f"{head}{TABLE_BEGIN}\n{markdown_table(data)}\n{TABLE_END}{tail}")


def _versions() -> dict:
    import subprocess

    import onnx
    import onnxruntime

    from braze.version import __version__

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    return {"onnx": onnx.__version__, "onnxruntime_version": onnxruntime.__version__, "braze_version": __version__,
            "commit": commit or "unknown"}


def header(workers: int) -> dict:
    """The results file's header (benchmarks/report.py's format; correctness, not
    speed: ``summary``, ``per_op`` and ``results`` take the place of rows)."""
    import results_io

    doc = results_io.result(
        "conformance", "onnx's backend node test cases on braze and onnxruntime, against the cases' expected outputs",
        [], threads=None, timing=None, workers=workers,
        control="onnxruntime runs the same cases, compared with the same expected outputs")
    del doc["rows"]
    return doc


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", metavar="REGEX", help="only the cases testing op types that match")
    ap.add_argument("--cases", metavar="REGEX", help="only the cases whose names match")
    ap.add_argument("--level", type=int, default=0, help="braze's fusion level (default 0)")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                    help="braze worker processes (default 2)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per case (default 120)")
    ap.add_argument("--no-ort", action="store_true", help="skip onnxruntime")
    ap.add_argument("--json", metavar="FILE", help="write every case's outcome and the counts")
    ap.add_argument("--update-docs", action="store_true",
                    help="write benchmarks/results/conformance.json and the per-op table in docs/conformance.md "
                         "(a full run: no --ops/--cases/--no-ort)")
    ap.add_argument("--render-docs", action="store_true",
                    help="only rewrite docs/conformance.md's table from benchmarks/results/conformance.json "
                         "(no run)")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    args = ap.parse_args(argv)
    if args.render_docs:
        update_docs(json.loads(RESULTS.read_text()), write_results=False)
        return 0
    if args.update_docs and (args.ops or args.cases or args.no_ort):
        ap.error("--update-docs needs the full run, with onnxruntime")

    say = (lambda m: None) if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    chosen, total = collect(args.ops, args.cases)
    say(f"{len(chosen)} cases")
    t0 = time.perf_counter()
    results = run_all(chosen, args.level, args.workers, args.timeout, not args.no_ort, say)
    print(report(results, total, not args.no_ort))
    print(f"\n{time.perf_counter() - t0:.0f} s")
    plain = [r for r in results if not re.search(r"_expanded(_ver\d+)?$", r["case"])]
    summary = {"cases": len(results), "node_cases": total, "level": args.level,
               "braze": dict(Counter(r["braze"] for r in results)), **_versions(),
               "plain": {"cases": len(plain), "braze": sum(r["braze"] == "pass" for r in plain),
                         "onnxruntime": sum(r.get("onnxruntime") == "pass" for r in plain)}}
    if not args.no_ort:
        summary["onnxruntime"] = dict(Counter(r["onnxruntime"] for r in results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "per_op": per_op(results), "results": results}, f, indent=1)
    if args.update_docs:
        update_docs({**header(args.workers), "summary": summary, "per_op": per_op(results),
                     "results": [{k: r.get(k) for k in ("case", "op", "braze", "onnxruntime")}
                                 for r in sorted(results, key=lambda r: r["case"])]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
