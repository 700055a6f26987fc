"""Read a file another process is still writing: complete lines only.

A child process (a broker's log, a group worker's JSON lines, kcat's output) appends while a
test polls the file, so the last line may be half written: ``{"e"`` instead of a JSON object,
``listening on PLAINTEXT://127.0.0.1:4`` instead of port 45678. Every reader of such a file
goes through :func:`complete_text` or :func:`complete_lines`, which stop at the last newline;
the rest is read on the next poll, once its newline has arrived.
"""

from __future__ import annotations

import os

__all__ = ["complete_lines", "complete_text"]


def complete_text(path: str | os.PathLike[str], start: int = 0) -> str:
    """The text of ``path`` from byte offset ``start`` up to and including its last newline
    (``""`` while the file does not exist or holds no complete line yet).

    Cutting at a newline byte also never splits a UTF-8 sequence; undecodable bytes are
    replaced, as a log may hold anything.
    """
    try:
        with open(path, "rb") as f:
            if start:
                f.seek(start)
            data = f.read()
    except FileNotFoundError:
        return ""
    end = data.rfind(b"\n")
    return data[:end + 1].decode("utf-8", "replace")


def complete_lines(path: str | os.PathLike[str], start: int = 0) -> list[str]:
    """The complete lines of ``path`` from byte offset ``start``, without their newlines
    (and without a ``\\r`` before them); a half-written last line is left out."""
    text = complete_text(path, start)
    if not text:
        return []
    return [line.removesuffix("\r") for line in text[:-1].split("\n")]
