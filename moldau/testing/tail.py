"""Read a file another process is still writing, complete lines only: the helpers live in
:mod:`moldau.devtools.tail` (the broker runners there read broker logs with them)."""

from __future__ import annotations

from ..devtools.tail import complete_lines, complete_text

__all__ = ["complete_lines", "complete_text"]
