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
