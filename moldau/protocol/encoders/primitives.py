"""Small wire primitives shared by the hand-written encoders."""

from __future__ import annotations

import struct

from ..varint import uvarint_bytes

INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
EMPTY_TAGS = b"\x00"


def string(value: str | None, flexible: bool) -> bytes:
    """A (nullable) string, compact when ``flexible``."""
    if value is None:
        return b"\x00" if flexible else INT16.pack(-1)
    raw = value.encode("utf-8")
    if flexible:
        return uvarint_bytes(len(raw) + 1) + raw
    return INT16.pack(len(raw)) + raw


def array_len(count: int | None, flexible: bool) -> bytes:
    if count is None:
        return b"\x00" if flexible else INT32.pack(-1)
    return uvarint_bytes(count + 1) if flexible else INT32.pack(count)


def bytes_len(length: int | None, flexible: bool) -> bytes:
    """Length prefix of a (nullable) bytes/records field."""
    if length is None:
        return b"\x00" if flexible else INT32.pack(-1)
    return uvarint_bytes(length + 1) if flexible else INT32.pack(length)
