"""Confluent's wire format: the frame around every schema-registry serialized key and value.

    byte 0      magic byte 0
    bytes 1-4   the schema's global id, a big-endian unsigned 32-bit integer
    (Protobuf)  the message indexes: which message of the schema's file this is, as a
                zigzag-varint count followed by zigzag-varint indexes (nested types walk
                down from a top-level message); ``[0]``, the first top-level message, is the
                single byte 0 instead of count 1 + index 0
    rest        the payload (Avro binary, JSON text, Protobuf binary)

Pure functions, no registry access.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

MAGIC_BYTE = 0
_HEADER = struct.Struct(">bI")
HEADER_SIZE = _HEADER.size  # 5
# A guard against garbage: no schema nests messages this deep.
MAX_INDEXES = 100_000


class SerializationError(ValueError):
    """Data cannot be serialized, or bytes are not a valid frame or payload."""


@dataclass(frozen=True)
class Frame:
    """A parsed frame: the schema id, the Protobuf message indexes (None for Avro and JSON),
    and the payload."""

    schema_id: int
    payload: bytes
    message_indexes: tuple[int, ...] | None = None


def _zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def write_varint(out: bytearray, value: int) -> None:
    """Append ``value`` as a zigzag varint (as Confluent's index arrays are written)."""
    value = _zigzag(value) & 0xFFFFFFFFFFFFFFFF
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def read_varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """A zigzag varint at ``pos``: (value, position after it)."""
    result = 0
    shift = 0
    while True:
        if pos >= len(data):
            raise SerializationError("the frame ends inside a message index varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise SerializationError("a message index varint is longer than 10 bytes")
    return (result >> 1) ^ -(result & 1), pos


def encode_indexes(indexes: Sequence[int]) -> bytes:
    """The message-index array of a Protobuf frame (``[0]`` is the single byte 0)."""
    if not indexes:
        raise SerializationError("a Protobuf message index array cannot be empty")
    if list(indexes) == [0]:
        return b"\x00"
    out = bytearray()
    write_varint(out, len(indexes))
    for index in indexes:
        write_varint(out, index)
    return bytes(out)


def frame(schema_id: int, payload: bytes, message_indexes: Sequence[int] | None = None
          ) -> bytes:
    """Magic byte, schema id, (Protobuf) message indexes, then ``payload``."""
    if not 0 <= schema_id <= 0xFFFFFFFF:
        raise SerializationError(f"schema id {schema_id} does not fit in 4 bytes")
    head = struct.pack(">BI", MAGIC_BYTE, schema_id)
    if message_indexes is None:
        return head + payload
    return head + encode_indexes(message_indexes) + payload


def schema_id_of(data: bytes | memoryview) -> int:
    """The schema id of a frame (checks the magic byte and the length)."""
    if len(data) < HEADER_SIZE:
        raise SerializationError(
            f"expecting data framing of length 6 bytes or more but total data size is "
            f"{len(data)} bytes: this record was not written by a schema-registry serializer")
    magic, schema_id = struct.unpack_from(">BI", data)
    if magic != MAGIC_BYTE:
        raise SerializationError(
            f"unknown magic byte {magic}: this record was not written by a schema-registry "
            "serializer (or uses a newer framing)")
    return int(schema_id)


def parse_frame(data: bytes | memoryview, *, protobuf: bool = False) -> Frame:
    """Split a serialized key or value into schema id, (Protobuf) indexes and payload."""
    schema_id = schema_id_of(data)
    pos = HEADER_SIZE
    indexes: tuple[int, ...] | None = None
    if protobuf:
        count, pos = read_varint(data, pos)
        if count < 0 or count > MAX_INDEXES:
            raise SerializationError(f"invalid Protobuf message index count {count}")
        if count == 0:
            indexes = (0,)
        else:
            found = []
            for _ in range(count):
                index, pos = read_varint(data, pos)
                found.append(index)
            indexes = tuple(found)
    return Frame(schema_id, bytes(data[pos:]), indexes)
