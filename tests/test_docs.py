"""The docs stay true: generated sections match the code."""

from pathlib import Path

from braze.ir.doc import BEGIN, END, op_table_markdown

DOCS = Path(__file__).parent.parent / "docs"


def test_ir_op_table_is_current():
    text = (DOCS / "ir.md").read_text()
    table = text[text.index(BEGIN): text.index(END) + len(END)]
    assert table == op_table_markdown(), "regenerate docs/ir.md's table: braze ops --markdown"


def test_importer_doc_lists_every_onnx_op():
    from braze.frontend import supported_op_types

    text = (DOCS / "importer.md").read_text()
    missing = [op for op in supported_op_types() if f"`{op}`" not in text]
    assert not missing, f"docs/importer.md does not list: {missing}"
