"""Tables from benchmark results: docs/performance.md's per-CPU tables and
README.md's speed table, rendered from ``benchmarks/results/``.

    python benchmarks/report.py                  # print the tables
    python benchmarks/report.py --update-docs    # rewrite them in docs/performance.md and README.md
    python benchmarks/report.py --check          # exit 1 if either is out of date

The results format (``braze-results/1``). Each benchmark run writes one file,
``benchmarks/results/<cpu>-<isa>/NAME.json`` (benchmarks/results_io.py), a
JSON object with:

- ``format``: ``"braze-results/1"``; ``benchmark``: NAME (a target other than
  ``cpu`` is part of it: ``int8-models-cpu-avx2``); ``what``: one line;
  ``command``: how it was run (null if not recorded).
- ``host``: ``cpu`` (the OS's model name), ``isa`` (widest vector ISA),
  ``llvm_cpu`` (LLVM's name), ``cores``; ``target`` (the braze target built
  for) and ``threads`` (both engines' thread count).
- ``versions``: ``braze``, ``tvm``, ``onnxruntime``, ``onnx`` (null where a run
  did not record them); ``commit`` (``+uncommitted`` for a dirty tree);
  ``date`` (the day of the run; for files converted from the older formats,
  the day git first recorded them).
- ``method``: ``timing`` (how each engine was timed) and ``control`` (what was
  timed against itself, or null).
- ``rows``: one object per model, shape or kernel, each with ``name``,
  ``ratios`` ({label: ratio}, e.g. ``"braze / onnxruntime"``), ``control``
  (a ratio, or null), usually ``ms`` ({engine: median ms}), and whatever
  else the benchmark records. A *ratio* is ``{"ratio": median of the
  per-phase ratios, "ratio_min", "ratio_max": their range}``; below 1 the
  first engine is faster.

Files converted from an older format name it in ``converted_from``.
``benchmarks/results/conformance.json`` (correctness, not speed) has the same
header, with ``summary``, ``per_op`` and ``results`` in place of rows.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
DOC = ROOT / "docs" / "performance.md"
README = ROOT / "README.md"
FORMAT = "braze-results/1"

DOC_BEGIN = "<!-- BEGIN RESULTS TABLES (generated: python benchmarks/report.py --update-docs) -->"
DOC_END = "<!-- END RESULTS TABLES -->"
README_BEGIN = "<!-- BEGIN SPEED TABLE (generated: python benchmarks/report.py --update-docs) -->"
README_END = "<!-- END SPEED TABLE -->"

#: Keys every results file has, and those of its nested objects.
REQUIRED = ("format", "benchmark", "what", "command", "host", "target", "threads", "versions", "commit", "date",
            "method", "rows")
REQUIRED_HOST = ("cpu", "isa", "llvm_cpu", "cores")
REQUIRED_VERSIONS = ("braze", "tvm", "onnxruntime", "onnx")
REQUIRED_METHOD = ("timing", "control")
REQUIRED_ROW = ("name", "ratios", "control")
REQUIRED_RATIO = ("ratio", "ratio_min", "ratio_max")

#: README's headline rows: (folder, benchmark, row name, level, ratio label, what the reader sees).
HEADLINE = (
    ("intel-xeon-avx512", "attention-models", "bert-base-s512", 3, "braze / onnxruntime",
     "BERT-base, 512 tokens, level 3 (flash attention)"),
    ("intel-xeon-avx512", "attention-models", "vit-base-patch16-224", 3, "braze / onnxruntime", "ViT-base/16, level 3"),
    ("intel-xeon-avx512", "attention-models", "whisper-tiny-enc-s1500", 3, "braze / onnxruntime",
     "Whisper-tiny encoder, 1500 frames, level 3"),
    ("intel-xeon-avx512", "ab", "resnet50", 2, "braze / onnxruntime", "ResNet-50, level 2"),
    ("intel-xeon-avx512", "ab", "mobilenetv2", 2, "braze / onnxruntime", "MobileNetV2, level 2"),
    ("intel-xeon-avx512", "ab", "yolov8n", 2, "braze / onnxruntime", "YOLOv8n, level 2"),
    ("intel-xeon-avx512", "int8-models", "resnet50", None, "braze int8 / onnxruntime int8", "ResNet-50, int8 QDQ, level 2"),
    ("intel-xeon-avx512", "recurrent", "lstm-2x256-s50", None, "braze / onnxruntime",
     "2-layer LSTM, hidden 256, 50 steps, level 2"),
)


# --- reading and checking -------------------------------------------------------------------------------
def load(root: Path = RESULTS) -> dict[str, list[dict]]:
    """``{<cpu>-<isa>: [results file, ...]}``, folders and files in name order."""
    def order(doc):  # a benchmark's builds for narrower targets after its `cpu` build
        return doc["benchmark"].removesuffix(f"-{doc.get('target')}"), doc.get("target") != "cpu"

    return {folder.name: sorted((json.loads(p.read_text()) for p in folder.glob("*.json")), key=order)
            for folder in sorted(p for p in root.iterdir() if p.is_dir())}


def problems(doc: dict, rows: bool = True) -> list[str]:
    """What a results file lacks (an empty list: it is well formed);
    ``rows=False`` checks the header only."""
    found = [f"no {k!r}" for k in REQUIRED if k not in doc and (rows or k != "rows")]
    if doc.get("format") != FORMAT:
        found.append(f"format is {doc.get('format')!r}, not {FORMAT!r}")
    for key, fields in (("host", REQUIRED_HOST), ("versions", REQUIRED_VERSIONS), ("method", REQUIRED_METHOD)):
        if key == "host" and doc.get(key) is None and not rows:
            continue  # a correctness run need not name its CPU
        found += [f"no {key}.{k}" for k in fields if k not in (doc.get(key) or {})]
    if not rows:
        return found
    for i, row in enumerate(doc.get("rows") or []):
        found += [f"row {i}: no {k!r}" for k in REQUIRED_ROW if k not in row]
        ratios = list((row.get("ratios") or {}).items()) + [("control", row.get("control"))]
        found += [f"row {i}: {label} lacks {k!r}" for label, r in ratios if r is not None
                  for k in REQUIRED_RATIO if k not in r]
    if not doc.get("rows"):
        found.append("no rows")
    return found


# --- rendering ------------------------------------------------------------------------------------------
def fmt(r: dict | None) -> str:
    """``0.66 (0.63-0.68)``: a median ratio and its range."""
    if r is None:
        return "-"
    return f"{r['ratio']:.2f} ({r['ratio_min']:.2f}-{r['ratio_max']:.2f})"


def host_line(h: dict) -> str:
    return f"{h['cpu']}, {h['isa']} (LLVM `{h['llvm_cpu']}`), {h['cores']} cores"


def run_line(doc: dict) -> str:
    """Target, threads, commit, date, versions and control of one file."""
    versions = ", ".join(f"{k} {v}" for k, v in doc["versions"].items() if v) or "versions not recorded"
    control = doc["method"]["control"] or "none recorded"
    return (f"target `{doc['target']}`, {doc['threads']} threads, commit `{doc['commit']}`, {doc['date']}; "
            f"{versions}; control: {control}.")


def table(doc: dict) -> list[str]:
    """One file's table: a row per result, a column per ratio, the control last."""
    labels = list(dict.fromkeys(label for row in doc["rows"] for label in row["ratios"]))
    levels = any("level" in row for row in doc["rows"])
    head = ["name"] + (["level"] if levels else []) + labels + ["control"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in doc["rows"]:
        cells = [row["name"]] + ([str(row.get("level", ""))] if levels else [])
        cells += [fmt(row["ratios"].get(label)) for label in labels] + [fmt(row["control"])]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def render_docs(results: dict[str, list[dict]]) -> str:
    """docs/performance.md's generated part: per CPU, a table per results file."""
    lines = []
    for folder, docs in results.items():
        lines += [f"### {host_line(docs[0]['host'])}: `{folder}/`", ""]
        for doc in docs:
            lines += [f"**{doc['benchmark']}**: {doc['what']}; {run_line(doc)}", ""] + table(doc) + [""]
    return "\n".join(lines).rstrip() + "\n"


def find_row(results: dict, folder: str, benchmark: str, name: str, level) -> dict:
    doc = next(d for d in results[folder] if d["benchmark"] == benchmark)
    return next(r for r in doc["rows"] if r["name"] == name and r.get("level") == level)


def render_readme(results: dict[str, list[dict]]) -> str:
    """README's speed table: the headline rows, with the CPU beside them."""
    folders = sorted({h[0] for h in HEADLINE})
    docs = {(f, d["benchmark"]): d for f in folders for d in results[f]}
    first = docs[HEADLINE[0][:2]]
    where = ", ".join(f"`benchmarks/results/{f}/`" for f in folders)
    text = ("braze's time over onnxruntime's on the same machine, input and threads, each engine timed alone in "
            "its own processes (below 1: braze is faster; the median of the per-phase ratios, and their range), "
            f"on an {host_line(first['host'])}, {first['threads']} threads. `python benchmarks/report.py` renders "
            f"it from {where}, where the other results are, with their commits and method (docs/performance.md):")
    lines = textwrap.wrap(text, 78, break_on_hyphens=False) + ["",
             "| model | braze / onnxruntime | results file |", "|---|---|---|"]
    for folder, benchmark, name, level, label, text in HEADLINE:
        row = find_row(results, folder, benchmark, name, level)
        lines.append(f"| {text} | {fmt(row['ratios'][label])} | {benchmark} |")
    return "\n".join(lines) + "\n"


# --- the docs -------------------------------------------------------------------------------------------
def splice(text: str, begin: str, end: str, body: str) -> str:
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}{end}{tail}"


def generated(text: str, begin: str, end: str) -> str:
    return text[text.index(begin) + len(begin) + 1: text.index(end)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--update-docs", action="store_true", help="rewrite the tables in docs/performance.md and README.md")
    ap.add_argument("--check", action="store_true", help="exit 1 if the tables there are out of date")
    args = ap.parse_args(argv)
    results = load()
    bad = [f"{f}/{d.get('benchmark')}: {p}" for f, docs in results.items() for d in docs for p in problems(d)]
    if bad:
        print("\n".join(bad), file=sys.stderr)
        return 1
    outputs = ((DOC, DOC_BEGIN, DOC_END, render_docs(results)), (README, README_BEGIN, README_END, render_readme(results)))
    if args.update_docs:
        for path, begin, end, body in outputs:
            path.write_text(splice(path.read_text(), begin, end, body))
        return 0
    if args.check:
        stale = [str(p.relative_to(ROOT)) for p, b, e, body in outputs if generated(p.read_text(), b, e) != body]
        if stale:
            print("out of date: " + ", ".join(stale) + " (python benchmarks/report.py --update-docs)", file=sys.stderr)
        return 1 if stale else 0
    print(outputs[0][3] + "\n" + outputs[1][3], end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
