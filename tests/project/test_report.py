"""Benchmark results are data and the docs' tables are generated from them:
every file in benchmarks/results/<cpu>-<isa>/ is well formed, and
docs/performance.md's and README.md's tables are what benchmarks/report.py
renders (regenerate with ``python benchmarks/report.py --update-docs``)."""

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


def _script(name: str):
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


report, results_io = _script("report"), _script("results_io")
RESULTS = report.load()
FILES = [(folder, doc) for folder, docs in RESULTS.items() for doc in docs]


def test_there_are_results():
    assert FILES, "benchmarks/results/<cpu>-<isa>/ holds no results files"


@pytest.mark.parametrize("folder,doc", FILES, ids=[f"{f}/{d.get('benchmark')}" for f, d in FILES])
def test_results_file_has_the_required_fields(folder, doc):
    assert report.problems(doc) == []
    assert folder == results_io.host_folder(doc["host"]), "the folder names the file's CPU and ISA"
    path = report.RESULTS / folder / f"{doc['benchmark']}.json"
    assert path.exists(), "a file is named after its benchmark"


def test_conformance_file_has_the_header():
    import json

    doc = json.loads((report.RESULTS / "conformance.json").read_text())
    assert report.problems(doc, rows=False) == []
    assert doc["commit"] == doc["summary"]["commit"]


def test_performance_md_tables_are_current():
    text = report.DOC.read_text()
    assert report.generated(text, report.DOC_BEGIN, report.DOC_END) == report.render_docs(RESULTS), \
        "docs/performance.md is out of date: python benchmarks/report.py --update-docs"


def test_readme_speed_table_is_current():
    text = report.README.read_text()
    assert report.generated(text, report.README_BEGIN, report.README_END) == report.render_readme(RESULTS), \
        "README.md's speed table is out of date: python benchmarks/report.py --update-docs"


def test_performance_md_is_short():
    assert len(report.DOC.read_text().splitlines()) <= 250


def test_problems_names_what_is_missing():
    doc = {"format": report.FORMAT, "rows": [{"name": "m", "ratios": {"braze / onnxruntime": {"ratio": 1.0}}}]}
    found = report.problems(doc)
    assert "no 'host'" in found and "no 'commit'" in found
    assert "row 0: no 'control'" in found
    assert "row 0: braze / onnxruntime lacks 'ratio_min'" in found


@pytest.mark.parametrize("cpu,llvm,isa,folder", [
    ("Intel(R) Xeon(R) Processor", "rocketlake", "AVX-512", "intel-xeon-avx512"),
    ("AMD EPYC 7B13 64-Core Processor", "znver3", "AVX2", "amd-zen3-avx2"),
    ("AMD EPYC", "znver4", "AVX-512", "amd-zen4-avx512"),
    ("Intel(R) Core(TM) i7-12700K", "alderlake", "AVX2", "intel-core-avx2"),
    ("Neoverse-V2", "neoverse-v2", "SVE", "neoverse-v2-sve"),
])
def test_host_folder(cpu, llvm, isa, folder):
    assert results_io.host_folder({"cpu": cpu, "llvm_cpu": llvm, "isa": isa, "cores": 2}) == folder


def test_a_new_result_is_well_formed(tmp_path, monkeypatch):
    """What the benchmark scripts write passes the same check (no timing: a made-up row)."""
    host = {"cpu": "AMD EPYC 7B13", "isa": "AVX2", "llvm_cpu": "znver3", "cores": 2}
    monkeypatch.setattr(results_io, "host", lambda: host)
    row = {"name": "m", "ratios": {"braze / onnxruntime": results_io.ratio(0.9, 0.8, 1.0)}, "control": None}
    doc = results_io.result("models", "a test", [row], threads=2, timing=results_io.time_alone(), control=None,
                            target="cpu-avx2")
    assert doc["benchmark"] == "models-cpu-avx2"
    assert report.problems(doc) == []
    path = results_io.write(doc, tmp_path)
    assert path == tmp_path / "models-cpu-avx2.json"
    assert results_io.RESULTS / results_io.host_folder(host) == results_io.RESULTS / "amd-zen3-avx2"
