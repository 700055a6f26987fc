"""Small wire primitives shared by the hand-written encoders."""

from __future__ import annotations

import struct
from collections.abc import Sequence

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


def leader_tags(tag: int, leader: tuple[int, int] | None) -> bytes:
    """The tagged-field section of an entity whose only tagged field in use is a
    ``CurrentLeader`` at ``tag``: empty when there is no hint or it is Kafka's default
    (-1, -1), which writers omit."""
    if leader is None or leader == (-1, -1):
        return EMPTY_TAGS
    # One field: tag, size 9 (leader id, leader epoch, its own empty tagged fields).
    return (b"\x01" + uvarint_bytes(tag) + b"\x09" + INT32.pack(leader[0])
            + INT32.pack(leader[1]) + EMPTY_TAGS)


def node_endpoints_tags(tag: int, nodes: Sequence[tuple[int, str, int, str | None]]) -> bytes:
    """The top-level tagged-field section carrying ``NodeEndpoints`` (KIP-951) at ``tag``:
    (node id, host, port, rack) of each leader named in a hint; empty when there are none."""
    if not nodes:
        return EMPTY_TAGS
    body = bytearray(array_len(len(nodes), True))
    for node_id, host, port, rack in nodes:
        body += INT32.pack(node_id) + string(host, True) + INT32.pack(port) + string(rack, True)
        body += EMPTY_TAGS
    return b"\x01" + uvarint_bytes(tag) + uvarint_bytes(len(body)) + bytes(body)
