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
