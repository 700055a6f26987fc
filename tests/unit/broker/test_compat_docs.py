"""docs/compatibility.md lists exactly the APIs and versions the broker serves."""

from __future__ import annotations

from pathlib import Path

from moldau.broker.apis_doc import api_table

DOC = Path(__file__).resolve().parents[3] / "docs" / "compatibility.md"


def test_api_table_is_current() -> None:
    assert api_table() in DOC.read_text(), "regenerate: python -m moldau.broker.apis_doc"
