"""docs/schedules.md's rule table is generated from the rules' declarations."""

from pathlib import Path

from braze.codegen.schedules.doc import BEGIN, END, rule_table_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "schedules.md"


def test_schedule_rule_table_is_current():
    text = DOC.read_text()
    table = text[text.index(BEGIN): text.index(END) + len(END)]
    assert table == rule_table_markdown(), "regenerate it: braze.codegen.schedules.doc.rule_table_markdown()"


def test_schedules_doc_is_reference_sized():
    assert len(DOC.read_text().splitlines()) <= 300
