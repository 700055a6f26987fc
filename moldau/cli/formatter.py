"""Write consumed records the way Kafka's console consumer does (DefaultMessageFormatter).

Properties (``--property key=value``), with Kafka's defaults:

print.timestamp=false  ``CreateTime:1700000000000`` (or ``LogAppendTime:...``)
print.partition=false  ``Partition:0``
print.offset=false     ``Offset:42``
print.headers=false    ``h1:v1,h2:v2`` (``NO_HEADERS`` when there are none)
print.key=false        the key
print.value=true       the value
key.separator=\\t      between the fields above
line.separator=\\n     after each record
headers.separator=,    between headers
null.literal=null      printed for a null key, value or header value

Fields appear in that order, each followed by key.separator when another field follows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from moldau.client import ConsumerRecord

PROPERTIES = ("print.timestamp", "print.partition", "print.offset", "print.headers",
              "print.key", "print.value", "key.separator", "line.separator",
              "headers.separator", "null.literal")

_TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


def _bool(value: str) -> bool:
    return value.strip().lower() == "true"


def _utf8(text: str) -> bytes:
    return text.encode("utf-8")


@dataclass(frozen=True)
class MessageFormatter:
    """Kafka's DefaultMessageFormatter: :meth:`format` returns the bytes for one record."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> MessageFormatter:
        def flag(name: str, default: bool) -> bool:
            return _bool(props[name]) if name in props else default

        def text(name: str, default: bytes) -> bytes:
            return _utf8(props[name]) if name in props else default

        return cls(
            print_timestamp=flag("print.timestamp", False),
            print_partition=flag("print.partition", False),
            print_offset=flag("print.offset", False),
            print_headers=flag("print.headers", False),
            print_key=flag("print.key", False),
            print_value=flag("print.value", True),
            key_separator=text("key.separator", b"\t"),
            line_separator=text("line.separator", b"\n"),
            headers_separator=text("headers.separator", b","),
            null_literal=text("null.literal", b"null"),
        )

    def format(self, record: ConsumerRecord) -> bytes:
        """The output for one record (Kafka's field order and separators)."""
        fields: list[bytes] = []
        if self.print_timestamp:
            kind = _TIMESTAMP_TYPES.get(record.timestamp_type)
            fields.append(_utf8(f"{kind}:{record.timestamp}") if kind else b"NO_TIMESTAMP")
        if self.print_partition:
            fields.append(_utf8(f"Partition:{record.partition}"))
        if self.print_offset:
            fields.append(_utf8(f"Offset:{record.offset}"))
        if self.print_headers:
            if record.headers:
                fields.append(self.headers_separator.join(
                    _utf8(f"{k}:") + (self.null_literal if v is None else v)
                    for k, v in record.headers))
            else:
                fields.append(b"NO_HEADERS")
        if self.print_key:
            fields.append(self.null_literal if record.key is None else record.key)
        if self.print_value:
            fields.append(self.null_literal if record.value is None else record.value)
        if not fields:
            return b""
        # Kafka writes the line separator after the value, or after the last field printed
        # when the value is not.
        return self.key_separator.join(fields) + self.line_separator
