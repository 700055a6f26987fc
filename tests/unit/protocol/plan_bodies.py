"""Request bodies written from a request plan, for validator tests.

:func:`encode` writes a body for any plan node; a :class:`Choices` object decides counts,
lengths, nulls and which known tagged fields appear. ``null`` (a field name) writes that field
as null whatever its nullability; ``huge`` (an array name) writes that array's count as the
5-byte varint ``ff ff ff ff 0f`` (2**32 - 2 elements) or int32 0x7fffffff.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from moldau.protocol.request_plan import Array, Blob, Fixed, Node, Struct
from moldau.protocol.varint import uvarint_bytes as uvarint

HUGE_COMPACT = bytes.fromhex("ffffffff0f")
HUGE_LEGACY = struct.pack(">i", 0x7FFFFFFF)


class Choices:
    """Minimal bodies: one element per array (so nested arrays appear), one-byte strings,
    nothing null, every known tagged field present."""

    def count(self, name: str) -> int:
        return 1

    def length(self, name: str) -> int:
        return 1

    def null(self, name: str) -> bool:
        return False

    def tags(self, struct_: Struct) -> list[int]:
        return [tag for tag, _node in struct_.tags]


def encode(node: Node, choices: Choices, *, null: str | None = None,
           huge: str | None = None) -> bytes:
    out = bytearray()
    _encode(node, choices, null, huge, out)
    return bytes(out)


def _encode(node: Node, c: Choices, null: str | None, huge: str | None,
            out: bytearray) -> None:
    match node:
        case Fixed(size):
            out += bytes(size)
        case Blob(name, compact, prefix, nullable):
            is_null = name == null or (nullable and c.null(name))
            data = b"" if is_null else b"a" * c.length(name)
            if compact:
                out += b"\x00" if is_null else uvarint(len(data) + 1) + data
            else:
                fmt = ">h" if prefix == 2 else ">i"
                out += struct.pack(fmt, -1) if is_null else struct.pack(fmt, len(data)) + data
        case Array(name, compact, nullable, item):
            if name == null or (nullable and c.null(name)):
                out += b"\x00" if compact else struct.pack(">i", -1)
                return
            count = c.count(name)
            if name == huge:
                out += HUGE_COMPACT if compact else HUGE_LEGACY
            else:
                out += uvarint(count + 1) if compact else struct.pack(">i", count)
            for _ in range(count):
                _encode(item, c, null, huge, out)
        case Struct(name, flexible, nullable, fields, tags):
            if nullable:
                if name == null or c.null(name):
                    out += b"\xff"
                    return
                out += b"\x01"
            for field in fields:
                _encode(field, c, null, huge, out)
            if flexible:
                chosen = sorted(c.tags(node))
                out += uvarint(len(chosen))
                by_tag = dict(tags)
                for tag in chosen:
                    value = bytearray()
                    _encode(by_tag[tag], c, null, huge, value)
                    out += uvarint(tag) + uvarint(len(value)) + value


def walk(node: Node) -> Iterator[Node]:
    """Every node of a plan, depth first (tagged fields included)."""
    yield node
    match node:
        case Array(item=item):
            yield from walk(item)
        case Struct(fields=fields, tags=tags):
            for field in fields:
                yield from walk(field)
            for _tag, sub in tags:
                yield from walk(sub)
