"""docs/configuration.md carries the generated key tables, so docs and code cannot drift."""

from __future__ import annotations

from pathlib import Path

from moldau.broker.config.docs import broker_table, dynamic_table, topic_table

REGENERATE = "regenerate: python -m moldau.broker.config.docs (rewrites the block)"
DOC = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


def test_configuration_doc_is_current() -> None:
    text = DOC.read_text()
    assert broker_table() in text, REGENERATE
    assert topic_table() in text, REGENERATE
    assert dynamic_table() in text, REGENERATE
