"""Concatenated JSON objects (``{...}{...}`` or one per line) cut out of a byte stream as it
arrives: the request body of v3's streaming produce.

:class:`ObjectSplitter` finds where each top-level object ends by scanning only the
characters that matter (braces and string quotes, found with regular expressions), so a
record's bytes are looked at once by Python code and then parsed once by :func:`json.loads`.
Chunk boundaries may fall anywhere, inside strings and multi-byte characters too. Anything
but whitespace between objects, or an object larger than the limit, is a
:class:`StreamError` in :attr:`ObjectSplitter.error` (the stream cannot be resynchronised
after it).
"""

from __future__ import annotations

import re

_STRUCT = re.compile(rb'[{}"]')
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SPACE = re.compile(rb"[ \t\r\n]*")


class StreamError(ValueError):
    """The stream is not a sequence of JSON objects (``status`` 400), or one object is over
    the size limit (413)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ObjectSplitter:
    """Feed chunks, get the complete top-level objects (as bytes) found so far."""

    def __init__(self, max_object_bytes: int) -> None:
        self.max_object_bytes = max_object_bytes
        self._buf = bytearray()
        self._scan = 0          # where scanning continues
        self._depth = 0         # brace depth inside the current object (0: between objects)
        self.objects = 0        # objects returned so far
        #: set when the stream cannot be followed any further; feed() returns the objects
        #: before the problem first, and nothing after it
        self.error: StreamError | None = None

    def feed(self, chunk: bytes) -> list[bytes]:
        """Add ``chunk``; the objects it completes, in order (see :attr:`error`)."""
        if self.error is not None:
            return []
        buf = self._buf
        buf.extend(chunk)
        found: list[bytes] = []
        start = 0  # start of the current object in buf (valid while depth > 0)
        pos = self._scan
        depth = self._depth
        if depth == 0:
            pos = self._skip_space(pos)
        while pos < len(buf):
            if depth == 0:
                if buf[pos] != 0x7B:  # "{"
                    self.error = StreamError(
                        400, f"Error processing JSON: expected a JSON object (record "
                             f"{self.objects + 1}), found {bytes(buf[pos:pos + 20])!r}")
                    break
                start = pos
            match = _STRUCT.search(buf, pos + (1 if depth == 0 else 0))
            if depth == 0:
                depth = 1
            if match is None:
                pos = len(buf)
                break
            char = match.group()
            if char == b'"':
                string = _STRING.match(buf, match.start())
                if string is None:  # the string continues in a later chunk
                    pos = match.start()
                    break
                pos = string.end()
                continue
            pos = match.end()
            depth += 1 if char == b"{" else -1
            if depth == 0:
                if pos - start > self.max_object_bytes:
                    self._too_big()
                    break
                found.append(bytes(buf[start:pos]))
                self.objects += 1
                pos = self._skip_space(pos)
        # keep only the unfinished object (or nothing)
        keep_from = start if depth > 0 else pos
        if keep_from:
            del buf[:keep_from]
            pos -= keep_from
        self._scan, self._depth = pos, depth
        if depth > 0 and len(buf) > self.max_object_bytes and self.error is None:
            self._too_big()
        return found

    def _too_big(self) -> None:
        self.error = StreamError(413, f"Record {self.objects + 1} is larger than the limit "
                                      f"of {self.max_object_bytes} bytes")

    def _skip_space(self, pos: int) -> int:
        match = _SPACE.match(self._buf, pos)
        return match.end() if match else pos

    def finish(self) -> None:
        """The stream ended: an unfinished object is an error."""
        if self.error is not None:
            raise self.error
        if self._depth > 0 or self._buf[self._skip_space(0):]:
            raise StreamError(400, f"Error processing JSON: record {self.objects + 1} is "
                                   "not complete at the end of the request body")
