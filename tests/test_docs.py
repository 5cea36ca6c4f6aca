"""The docs stay true: generated sections match the code."""

from pathlib import Path

from braze.ir.doc import BEGIN, END, op_table_markdown

DOCS = Path(__file__).parent.parent / "docs"


def test_ir_op_table_is_current():
    text = (DOCS / "ir.md").read_text()
    table = text[text.index(BEGIN): text.index(END) + len(END)]
    assert table == op_table_markdown(), "regenerate docs/ir.md's table: braze ops --markdown"


def test_importer_onnx_table_is_current():
    from braze.frontend.registry import ONNX_BEGIN, ONNX_END, onnx_table_markdown

    text = (DOCS / "importer.md").read_text()
    table = text[text.index(ONNX_BEGIN): text.index(ONNX_END) + len(ONNX_END)]
    assert table == onnx_table_markdown(), "regenerate docs/importer.md's table: braze ops --markdown"


def test_conformance_table_is_the_results_file():
    """docs/conformance.md's table is generated from
    benchmarks/results/conformance.json (benchmarks/conformance.py --update-docs)."""
    import importlib.util
    import json

    path = Path(__file__).parent.parent / "benchmarks" / "conformance.py"
    spec = importlib.util.spec_from_file_location("conformance_script", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    text = (DOCS / "conformance.md").read_text()
    table = text[text.index(script.TABLE_BEGIN) + len(script.TABLE_BEGIN): text.index(script.TABLE_END)]
    data = json.loads(script.RESULTS.read_text())
    assert table.strip() == script.markdown_table(data).strip(), "rerun benchmarks/conformance.py --update-docs"
    plain = data["summary"]["plain"]
    assert plain["braze"] >= plain["onnxruntime"]  # issue 40's acceptance, on the recorded run


def _blocks(text: str, language: str) -> list[str]:
    import re

    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def test_readme_tour_runs_as_written(tmp_path):
    """Every command of README.md's tour, and its Python snippet, run in a
    fresh folder where braze/data is the shipped models."""
    import os
    import subprocess
    import sys

    text = (Path(__file__).parent.parent / "README.md").read_text()
    assert len(text.splitlines()) <= 90
    tour = text[text.index("## A tour"):]
    (tmp_path / "braze").mkdir()
    (tmp_path / "braze" / "data").symlink_to(Path(__file__).parent.parent / "braze" / "data")
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    script = "set -e\n" + _blocks(tour, "bash")[0]
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "latency: median" in done.stdout and "FLOPs" in done.stdout
    done = subprocess.run([sys.executable, "-c", _blocks(tour, "python")[0]], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
