"""The reports of ``braze verify`` and ``braze profile``, rendering themselves:
``to_dict()`` (what ``--json`` prints; stable keys) and ``table()`` (what
people read), as ``FusionReport``, ``BenchResult`` and ``Experiment`` do."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class VerifyReport:
    """Each output's error against onnxruntime and, with ``--per-group``, each
    fused group's against the same ops unfused (measure.OutputError/GroupError)."""

    outputs: list
    tolerance: float
    groups: list | None = None  # None: not asked for
    against: str = "the same ops unfused"  # what each group is compared with (16-bit modes: float32)

    @property
    def ok(self) -> bool:
        return all(r.max_rel <= self.tolerance for r in self.outputs + (self.groups or []))

    def to_dict(self) -> dict:
        data = {"ok": self.ok, "tolerance": self.tolerance, "outputs": [r.to_dict() for r in self.outputs]}
        if self.groups is not None:
            data["groups"] = [g.to_dict() for g in self.groups]
        return data

    def table(self) -> str:
        width = max([24] + [len(r.name) for r in self.outputs])  # columns line up whatever the names
        lines = [f"{'output':<{width}} {'max abs':>12} {'max rel':>12}"]
        for r in self.outputs:
            lines.append(f"{r.name:<{width}} {r.max_abs:12.3e} {r.max_rel:12.3e}"
                         f"{'' if r.max_rel <= self.tolerance else '  FAIL'}")
        if self.groups is not None:
            title = f"fused group (vs {self.against})"
            width = max([48, len(title)] + [len(g.name) for g in self.groups])
            lines.append(f"\n{title:<{width}} {'max abs':>12} {'max rel':>12}")
            for g in self.groups:
                lines.append(f"{g.name:<{width}} {g.max_abs:12.3e} {g.max_rel:12.3e}"
                             f"{'' if g.max_rel <= self.tolerance else '  DRIFTS'}")
        lines.append(f"{'ok' if self.ok else 'FAILED'}: tolerance {self.tolerance:g} relative to each output's scale")
        return "\n".join(lines)


@dataclass
class ProfileReport:
    """Milliseconds per kernel call (``rows``: (kernel, ms) in execution
    order) of an artifact's ``kernels`` (manifest entries by name); with
    onnxruntime's profile, the time of each kernel's ONNX nodes there
    (``theirs``) and of the nodes matched to no kernel (``unmatched``:
    (node, op type, ms))."""

    rows: list[tuple[str, float]]
    kernels: dict
    theirs: dict | None = None
    unmatched: list = field(default_factory=list)
    #: one whole run, uninstrumented (median ms), and how many runs that is of
    end_to_end_ms: float | None = None
    runs: int = 0

    @property
    def total_ms(self) -> float:
        return sum(t for _, t in self.rows) or 1e-12

    @property
    def onnxruntime_ms(self) -> float:
        return sum((self.theirs or {}).values()) + sum(ms for _, _, ms in self.unmatched)

    def to_dict(self):
        kernels = [{"kernel": n, "ms": t, "ops": self.kernels[n]["ops"], "nodes": self.kernels[n]["nodes"],
                    **({"onnxruntime_ms": self.theirs.get(n)} if self.theirs is not None else {})}
                   for n, t in self.rows]
        data = {"kernels": kernels, "braze_ms": self.total_ms, "end_to_end_ms": self.end_to_end_ms, "runs": self.runs}
        if self.theirs is None:
            return data
        return {**data, "onnxruntime_ms": self.onnxruntime_ms,
                "onnxruntime_unmatched": [{"node": n, "op": op, "ms": ms} for n, op, ms in self.unmatched]}

    def trace(self) -> dict:
        """The kernels' median times laid end to end in execution order, as
        a Chrome trace (chrome://tracing, ui.perfetto.dev): one complete
        event per kernel, its ops and ONNX nodes as arguments."""
        events, at = [], 0.0
        for name, ms in self.rows:
            k = self.kernels[name]
            events.append({"name": name, "cat": "kernel", "ph": "X", "ts": round(at * 1e3, 3),
                           "dur": round(ms * 1e3, 3), "pid": 1, "tid": 1,
                           "args": {"ops": k["ops"], "nodes": k["nodes"], "rule": k.get("rule", "")}})
            at += ms
        return {"traceEvents": events, "displayTimeUnit": "ms",
                "otherData": {"end_to_end_ms": self.end_to_end_ms, "runs": self.runs}}

    def table(self, top: int = 25) -> str:
        theirs, total = self.theirs, self.total_ms
        lines = [f"{'ms':>9} {'share':>6}  kernel" if theirs is None
                 else f"{'ms':>9} {'share':>6} {'ort ms':>8} {'ratio':>6}  kernel"]
        for name, t in sorted(self.rows, key=lambda r: -r[1])[:top]:
            ort_cols = ""
            if theirs is not None:
                ms = theirs.get(name)
                ort_cols = f" {ms:8.3f} {t / ms:6.2f}" if ms else f" {'-':>8} {'-':>6}"
            lines.append(f"{t:9.3f} {100 * t / total:5.1f}%{ort_cols}  {name}  [{', '.join(self.kernels[name]['ops'])}]")
        lines.append(f"{total:9.3f} 100.0%  total over {len(self.rows)} kernels")
        if self.end_to_end_ms is not None:
            lines.append(f"end to end: {self.end_to_end_ms:.3f} ms per run (median of {self.runs} runs, without the "
                         "per-kernel instrumentation)")
        if theirs is not None:
            other = sum(ms for _, _, ms in self.unmatched)
            worst = sorted(self.unmatched, key=lambda r: -r[2])[:5]
            lines.append(f"onnxruntime: {self.onnxruntime_ms:.3f} ms over its nodes; {other:.3f} ms in nodes "
                         "matched to no kernel"
                         + (": " + ", ".join(f"{n} ({op}) {ms:.3f}" for n, op, ms in worst) if self.unmatched else ""))
        return "\n".join(lines)
