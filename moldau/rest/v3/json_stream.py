"""Concatenated JSON objects (``{...}{...}`` or one per line) parsed out of a byte stream as
it arrives: the request body of v3's streaming produce.

Chunks are decoded incrementally (UTF-8; a character split between chunks is fine) and each
object is parsed where it starts with :meth:`json.JSONDecoder.raw_decode` (C speed): a record
is looked at once. When parsing fails at the end of the text received so far, a small
scanner (braces and string quotes, found with regular expressions) tells an object that is
not complete yet (wait for more) from one that is complete but not valid JSON: that one
becomes a :class:`BadObject` in the output, and the stream goes on after it. The scanner
resumes where it stopped, so a large object arriving in many small chunks is not rescanned.

Anything but whitespace between objects, text that is not UTF-8, or an object longer than the
limit (in characters) is a :class:`StreamError` in :attr:`ObjectSplitter.error`: the objects
before it are returned first, nothing after it (the stream cannot be followed any further).
"""

from __future__ import annotations

import codecs
import json
import re
from typing import Any, NamedTuple

_STRUCT = re.compile(r'[{}"]')
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SPACE = re.compile(r"[ \t\r\n]*")
_DECODE = json.JSONDecoder().raw_decode


class StreamError(ValueError):
    """The stream is not a sequence of JSON objects (``status`` 400), or one object is over
    the size limit (413)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class BadObject(NamedTuple):
    """A complete object that is not valid JSON (its record gets an error, the stream goes
    on)."""

    message: str


def _problem(exc: Exception, record: int, start: int) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return (f"Error processing JSON: {exc.msg} (record {record}, character "
                f"{exc.pos - start + 1})")
    if isinstance(exc, RecursionError):
        return f"Error processing JSON: nested too deeply (record {record})"
    return f"Error processing JSON: {exc} (record {record})"


class ObjectSplitter:
    """Feed chunks, get the complete top-level objects found so far (parsed)."""

    def __init__(self, max_object_chars: int) -> None:
        self.max_object_chars = max_object_chars
        self._text = ""
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        # scanner state of an unfinished object at the start of _text: where scanning
        # continues and the brace depth there (0: no scan yet)
        self._scan = 0
        self._depth = 0
        self.objects = 0  # objects returned so far (bad ones included)
        #: set when the stream cannot be followed any further
        self.error: StreamError | None = None

    def feed(self, chunk: bytes) -> list[dict[str, Any] | BadObject]:
        """Add ``chunk``; the objects it completes, in order (see :attr:`error`)."""
        if self.error is not None:
            return []
        try:
            self._text += self._utf8.decode(chunk)
        except UnicodeDecodeError as exc:
            self.error = StreamError(400, f"Error processing JSON: the body is not UTF-8 "
                                          f"({exc.reason})")
            return []
        return self._split()

    def _split(self) -> list[dict[str, Any] | BadObject]:
        text = self._text
        found: list[dict[str, Any] | BadObject] = []
        pos = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
        while pos < len(text):
            if text[pos] != "{":
                self._fail(400, f"Error processing JSON: expected a JSON object (record "
                                f"{self.objects + 1}), found {text[pos:pos + 20]!r}")
                break
            try:
                value, end = _DECODE(text, pos)
            except (ValueError, RecursionError) as exc:
                # not valid (or not complete yet); ValueError also for integers too long to
                # convert, RecursionError for nesting too deep
                end = self._object_end(text, pos)
                if end < 0:  # not complete yet
                    if len(text) - pos > self.max_object_chars:
                        self._too_big()
                    break
                value = BadObject(_problem(exc, self.objects + 1, pos))
            if end - pos > self.max_object_chars:
                self._too_big()
                break
            self._scan = self._depth = 0
            found.append(value)
            self.objects += 1
            pos = _SPACE.match(text, end).end()  # type: ignore[union-attr]
        self._text = text[pos:]  # an unfinished object now starts at 0: _scan stays valid
        return found

    def _object_end(self, text: str, start: int) -> int:
        """Where the object starting at ``start`` ends (after its ``}``); -1 when the text
        ends first (the scan state is kept for the next chunk)."""
        pos, depth = (self._scan + start, self._depth) if self._depth else (start, 0)
        while True:
            match = _STRUCT.search(text, pos)
            if match is None:
                pos = len(text)
                break
            if match.group() == '"':
                string = _STRING.match(text, match.start())
                if string is None:  # the string goes on in a later chunk
                    pos = match.start()
                    break
                pos = string.end()
                continue
            pos = match.end()
            depth += 1 if match.group() == "{" else -1
            if depth == 0:
                return pos
        self._scan, self._depth = pos - start, depth
        return -1

    def _fail(self, status: int, message: str) -> None:
        self.error = StreamError(status, message)

    def _too_big(self) -> None:
        self._fail(413, f"Record {self.objects + 1} is larger than the limit of "
                        f"{self.max_object_chars} characters")

    def finish(self) -> None:
        """The stream ended: an unfinished object (or an earlier error) is an error."""
        if self.error is not None:
            raise self.error
        if self._utf8.decode(b"", final=True) or self._text.strip():
            raise StreamError(400, f"Error processing JSON: record {self.objects + 1} is "
                                   "not complete at the end of the request body")
