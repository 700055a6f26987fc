"""Turn input lines into records the way Kafka's console producer does (LineMessageReader).

Properties (``--property key=value``), with Kafka's defaults:

=====================  =========  ===============================================
parse.key              false      the line starts with a key, then key.separator
key.separator          ``\\t``
parse.headers          false      the line starts with headers, then headers.delimiter
headers.delimiter      ``\\t``
headers.separator      ``,``      between headers (a regular expression, as in Kafka)
headers.key.separator  ``:``      between a header's key and value
null.marker            (unset)    a key, value or header value equal to it becomes null
ignore.error           false      a line without the separator becomes a value-only record
=====================  =========  ===============================================

With both parsed, a line reads ``h1:v1,h2:v2<TAB>key<TAB>value``. Lines are text in UTF-8;
bytes that are not valid UTF-8 pass through unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

PROPERTIES = ("parse.key", "key.separator", "parse.headers", "headers.delimiter",
              "headers.separator", "headers.key.separator", "null.marker", "ignore.error")

Record = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]


class ReaderError(ValueError):
    """A property combination or an input line the reader cannot use (Kafka's wording)."""


def _bool(value: str) -> bool:
    return value.strip().lower() == "true"


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


@dataclass
class LineReader:
    """Kafka's LineMessageReader: configure from properties, then :meth:`parse` each line."""

    parse_key: bool = False
    key_separator: str = "\t"
    parse_headers: bool = False
    headers_delimiter: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    null_marker: str | None = None
    ignore_error: bool = False
    _separator_re: re.Pattern[str] = field(init=False, repr=False)
    _delimiter_b: bytes = field(init=False, repr=False)
    _key_separator_b: bytes = field(init=False, repr=False)
    _null_b: bytes | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        pairs = [
            (self.headers_delimiter, self.headers_separator, "headers.delimiter",
             "headers.separator"),
            (self.headers_delimiter, self.headers_key_separator, "headers.delimiter",
             "headers.key.separator"),
            (self.headers_separator, self.headers_key_separator, "headers.separator",
             "headers.key.separator"),
        ]
        for a, b, name_a, name_b in pairs:
            if a == b:
                raise ReaderError(f"{name_a} and {name_b} may not be equal")
        if self.null_marker is not None:
            for value, name in ((self.key_separator, "key.separator"),
                                (self.headers_separator, "headers.separator"),
                                (self.headers_delimiter, "headers.delimiter"),
                                (self.headers_key_separator, "headers.key.separator")):
                if value == self.null_marker:
                    raise ReaderError(f"null.marker and {name} may not be equal")
        self._delimiter_b = _bytes(self.headers_delimiter)
        self._key_separator_b = _bytes(self.key_separator)
        self._null_b = None if self.null_marker is None else _bytes(self.null_marker)
        try:
            self._separator_re = re.compile(self.headers_separator)
        except re.error as exc:
            raise ReaderError(f"headers.separator {self.headers_separator!r} is not a valid "
                              f"regular expression: {exc}") from None

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> LineReader:
        """Build from ``--property`` values (unknown keys are the caller's business)."""
        return cls(
            parse_key=_bool(props.get("parse.key", "false")),
            key_separator=props.get("key.separator", "\t"),
            parse_headers=_bool(props.get("parse.headers", "false")),
            headers_delimiter=props.get("headers.delimiter", "\t"),
            headers_separator=props.get("headers.separator", ","),
            headers_key_separator=props.get("headers.key.separator", ":"),
            null_marker=props.get("null.marker"),
            ignore_error=_bool(props.get("ignore.error", "false")),
        )

    def _field(self, enabled: bool, line: bytes, start: int, separator: bytes, name: str,
               number: int) -> bytes | None:
        if not enabled:
            return None
        index = line.find(separator, start)
        if index < 0:
            if self.ignore_error:
                return None
            raise ReaderError(f"No {name} found on line number {number}: "
                              f"'{line.decode('utf-8', 'replace')}'")
        return line[start:index]

    def parse(self, line: bytes | str, number: int) -> Record:
        """(key, value, headers) of one line (without its line ending).

        Works on bytes (UTF-8 separators found in UTF-8 text are the same as in the decoded
        text), so values are passed on without decoding and re-encoding them.
        """
        if isinstance(line, str):
            line = _bytes(line)
        headers_raw = self._field(self.parse_headers, line, 0, self._delimiter_b,
                                  "headers delimiter", number)
        offset = 0 if headers_raw is None else len(headers_raw) + len(self._delimiter_b)
        key = self._field(self.parse_key, line, offset, self._key_separator_b, "key separator",
                          number)
        if key is not None:
            offset += len(key) + len(self._key_separator_b)
        value = line[offset:] if offset else line
        headers: list[tuple[str, bytes | None]] = []
        if headers_raw is not None and headers_raw != self._null_b:
            headers = self._headers(headers_raw.decode("utf-8", "surrogateescape"), number)
        null = self._null_b
        return (None if key == null else key), (None if value == null else value), headers

    def _nullable(self, text: str) -> bytes | None:
        return None if text == self.null_marker else _bytes(text)

    def _headers(self, text: str, number: int) -> list[tuple[str, bytes | None]]:
        pairs = self._separator_re.split(text)
        while pairs and pairs[-1] == "":  # as Java's Pattern.split drops trailing empties
            pairs.pop()
        headers: list[tuple[str, bytes | None]] = []
        for pair in pairs:
            index = pair.find(self.headers_key_separator)
            if index < 0:
                if self.ignore_error:
                    headers.append((pair, None))
                    continue
                raise ReaderError(f"No header key separator found in pair '{pair}' on line "
                                  f"number {number}")
            key = pair[:index]
            if key == self.null_marker:
                raise ReaderError(f"Header keys should not be equal to the null marker "
                                  f"'{self.null_marker}' as they can't be null")
            headers.append((key, self._nullable(pair[index + len(self.headers_key_separator):])))
        return headers
