"""The run's history as JSON lines: written one event a line as it happens, read back whole.

Producer callbacks, consumer threads and the nemesis all write to one :class:`History`;
each event is one ``json.dumps`` line written and flushed under a lock, so a run that dies
(kill, timeout) leaves every event up to its end on disk, and :func:`read_history` (which may
run while the file is still written) reads complete lines only: a half-written last line is
left out (:func:`moldau.testing.tail.complete_lines`).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from moldau.testing.tail import complete_lines

__all__ = ["History", "read_history"]


class History:
    """An append-only JSONL history file; :meth:`record` is safe from any thread."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
        self._lock = threading.Lock()

    def record(self, type_: str, **fields: Any) -> None:
        """Write one event (``t`` is set to the wall-clock time unless given)."""
        event = {"type": type_, "t": fields.pop("t", time.time()), **fields}
        line = json.dumps(event, separators=(",", ":")) + "\n"
        with self._lock:
            if not self._file.closed:
                self._file.write(line)
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_history(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every complete event of a history file, in the order written."""
    return [json.loads(line) for line in complete_lines(path) if line.strip()]
