"""Java ``.properties`` text, read and written with ``java.util.Properties``' rules.

Kafka's tools and brokers read ``server.properties``, ``--command-config`` files and
``meta.properties`` with ``Properties.load`` and write them with ``Properties.store``, so every
Moldau layer reads and writes them here (a leaf module: it imports nothing of moldau).

:func:`parse` follows ``Properties.load``:

* Natural lines end at ``\\n``, ``\\r`` or ``\\r\\n``. Leading spaces, tabs and form feeds are
  dropped; at the start of a logical line, blank lines and lines whose first other character
  is ``#`` or ``!`` are skipped.
* A line ending in an odd number of backslashes continues on the next natural line (the
  backslash is dropped, and so is the next line's leading white space; there a ``#`` is data).
* The key runs up to the first ``=``, ``:``, space, tab or form feed that is not escaped; white
  space after it is skipped, then one ``=`` or ``:`` and the white space after that. The rest of
  the line is the value, trailing white space included (Java keeps it; Kafka's ConfigDef trims
  typed values afterwards).
* In keys and values ``\\t \\n \\r \\f`` and ``\\uXXXX`` (exactly four hex digits, else
  :class:`PropertiesError` as Java's "Malformed \\uxxxx encoding.") are escapes; any other
  escaped character stands for itself (``\\=`` is ``=``, ``\\b`` is ``b``).
* A key given twice keeps its last value.

:func:`dump` follows ``Properties.store``'s escaping: ``\\ \\t \\n \\r \\f`` and ``= : # !``
are escaped, a space is escaped in keys and at the start of a value, and with
``escape_unicode`` characters outside printable ASCII become ``\\uXXXX`` (what ``store`` does
with an OutputStream; with a Writer, as Kafka writes meta.properties, it does not).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping

_WHITE = " \t\f"
_NATURAL_LINE = re.compile(r"\r\n|\r|\n")
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_UNESCAPE = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_ESCAPE = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f", "=": "\\=", ":": "\\:",
           "#": "\\#", "!": "\\!", "\\": "\\\\"}


class PropertiesError(ValueError):
    """Text that ``Properties.load`` refuses (a malformed ``\\uXXXX`` escape)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


def parse(text: str) -> dict[str, str]:
    """The key/value pairs of properties ``text``, in file order (later keys win)."""
    result: dict[str, str] = {}
    for number, line in logical_lines(text):
        key, value = _split(line)
        result[_unescape(key, number)] = _unescape(value, number)
    return result


def logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(number of its first natural line, text) of each logical line that is not blank or a
    comment, continuations joined, escapes left in place."""
    parts: list[str] | None = None
    start = 0
    for number, raw in enumerate(_NATURAL_LINE.split(text), 1):
        line = raw.lstrip(_WHITE)
        if parts is not None and not any(parts):
            # A continuation of nothing: Java is still at the start of a logical line.
            parts = None
        if parts is None:
            if not line or line[0] in "#!":
                continue
            parts, start = [], number
        backslashes = len(line) - len(line.rstrip("\\"))
        if backslashes % 2 == 1:
            parts.append(line[:-1])
            continue
        parts.append(line)
        yield start, "".join(parts)
        parts = None
    if parts is not None and any(parts):
        yield start, "".join(parts)


def _split(line: str) -> tuple[str, str]:
    """(raw key, raw value) of a logical line."""
    escaped = False
    end = len(line)
    value_start = end
    separator = False
    for i, ch in enumerate(line):
        if not escaped and ch in "=:":
            end, value_start, separator = i, i + 1, True
            break
        if not escaped and ch in _WHITE:
            end, value_start = i, i + 1
            break
        escaped = ch == "\\" and not escaped
    i = value_start
    while i < len(line):
        ch = line[i]
        if ch not in _WHITE:
            if separator or ch not in "=:":
                break
            separator = True
        i += 1
    return line[:end], line[i:]


def _unescape(text: str, line: int) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        i += 1
        if ch != "\\" or i >= len(text):
            out.append(ch)
            continue
        ch = text[i]
        i += 1
        if ch == "u":
            digits = text[i:i + 4]
            if not _HEX4.fullmatch(digits):
                raise PropertiesError(
                    line, f"malformed \\uxxxx escape \\u{digits!s} in {text!r}: \\u needs "
                    f"exactly four hexadecimal digits (write a backslash as \\\\)")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_UNESCAPE.get(ch, ch))
    result = "".join(out)
    if any("\ud800" <= c <= "\udfff" for c in result):
        # \uD83D\uDE00 is one character in Java's UTF-16 strings: pair the surrogates.
        result = result.encode("utf-16-le", "surrogatepass").decode("utf-16-le",
                                                                     "surrogatepass")
    return result


def _escape(text: str, *, is_key: bool, escape_unicode: bool) -> str:
    out: list[str] = []
    for i, ch in enumerate(text):
        if ch == " ":
            out.append("\\ " if is_key or i == 0 else " ")
        elif ch in _ESCAPE:
            out.append(_ESCAPE[ch])
        elif escape_unicode and not " " <= ch <= "~":
            units = ch.encode("utf-16-be", "surrogatepass")
            out.extend(f"\\u{units[j]:02X}{units[j + 1]:02X}" for j in range(0, len(units), 2))
        else:
            out.append(ch)
    return "".join(out)


def dump(items: Mapping[str, str] | Iterable[tuple[str, str]], *,
         escape_unicode: bool = False) -> str:
    """``key=value`` lines (``\\n``-terminated) that :func:`parse` and ``Properties.load``
    read back as ``items``, escaped as ``Properties.store`` escapes them."""
    pairs = items.items() if isinstance(items, Mapping) else items
    return "".join(f"{_escape(str(k), is_key=True, escape_unicode=escape_unicode)}="
                   f"{_escape(str(v), is_key=False, escape_unicode=escape_unicode)}\n"
                   for k, v in pairs)
