"""Varints as Kafka writes them: 7 bits a byte, low groups first, high bit = more follow.

Flexible messages carry lengths, counts and tags as unsigned varints of at most 5 bytes (an
int32, as Kafka's ``ByteUtils.readUnsignedVarint`` and kio allow). Records carry their fields
as zigzag varints (``(n << 1) ^ (n >> 63)`` written unsigned) of at most 10 bytes (an int64).
The hot decoders inline one- and two-byte varints and call these helpers for the rest.
"""

from __future__ import annotations

from typing import Any

from .errors import InvalidRequest, RecordDecodeError

__all__ = ["read_record_uvarint", "read_record_varint", "read_uvarint_rest", "uvarint_bytes"]


def uvarint_bytes(value: int) -> bytes:
    """The unsigned varint of ``value`` (>= 0)."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_uvarint_rest(buf: Any, pos: int, first: int) -> tuple[int, int]:
    """The rest of a message's unsigned varint whose first byte (``first`` > 127) is already
    read at ``pos - 1``: ``(value, position after it)``.

    Raises InvalidRequest past 5 bytes; IndexError when ``buf`` ends first.
    """
    value = first & 0x7F
    shift = 7
    while True:
        if shift == 35:
            raise InvalidRequest("a varint is longer than 5 bytes")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def read_record_uvarint(data: Any, pos: int) -> tuple[int, int]:
    """A record's varint at ``pos`` before zigzag decoding: ``(raw value, position after it)``.

    Raises RecordDecodeError past 10 bytes; IndexError when ``data`` ends first.
    """
    result = 0
    shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise RecordDecodeError("varint is longer than 10 bytes")


def read_record_varint(data: Any, pos: int) -> tuple[int, int]:
    """A record's (zigzag) varint at ``pos``: ``(value, position after it)``.

    The loop of :func:`read_record_uvarint` written out again rather than called: record
    decoding calls this for every field, and a second call per field costs a third more.
    """
    result = 0
    shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise RecordDecodeError("varint is longer than 10 bytes")
