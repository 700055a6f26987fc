"""Produce request decoder (versions 3-12), hand-written for the hot path.

The broker's Produce handler needs the transactional id, acks, the timeout and, per topic and
partition, the record set. This decoder reads exactly that and leaves each record set in place
as a ``memoryview`` slice of the frame (kio would copy every record set into a new ``bytes``),
checking bounds itself: no count or length is trusted beyond the bytes left, null is refused
where the schema does not allow it (``topic_data``, ``partition_data``, topic names), strings
must be UTF-8, varints at most 5 bytes. Anything malformed raises :class:`InvalidRequest`
(the broker closes the connection, as Kafka does).

Layouts: v3-8 use int16-length strings, int32-length bytes and int32 array counts; v9+
(flexible) use compact strings/arrays (unsigned varint length + 1, 0 = null) and a tagged-field
section after each struct. Produce requests have no known tagged fields up to v12; unknown ones
are skipped by their size, as Kafka does. v3-12 share one layout (v13 names topics by id).
Parity with kio over every version is tested in tests/unit/protocol/test_produce_request.py.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from .errors import InvalidRequest
from .varint import read_uvarint_rest as _varint

__all__ = ["MAX_VERSION", "MIN_VERSION", "ProduceRequestData", "decode_produce_body",
           "decode_produce_request"]

MIN_VERSION = 3
MAX_VERSION = 12
_FIRST_FLEXIBLE = 9

_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from
_ACKS_TIMEOUT = struct.Struct(">hi").unpack_from
_INDEX_SIZE = struct.Struct(">ii").unpack_from
_INDEX_2BYTES = struct.Struct(">iBB").unpack_from

PartitionRecords = tuple[int, memoryview | None]


class ProduceRequestData(NamedTuple):
    """What a Produce request asks: ``topics`` is ``[(name, [(partition index, records or
    None), ...]), ...]`` in request order, records being slices of the frame."""

    transactional_id: str | None
    acks: int
    timeout_ms: int
    topics: list[tuple[str, list[PartitionRecords]]]


def decode_produce_request(header: Any, frame: bytes | memoryview, offset: int
                           ) -> ProduceRequestData:
    """Dispatch's decoder hook: the body of ``frame`` from ``offset`` at ``header``'s version."""
    return decode_produce_body(header.api_version, frame, offset)


def decode_produce_body(version: int, buf: bytes | bytearray | memoryview,
                        offset: int) -> ProduceRequestData:
    """Decode a Produce request body (``buf[offset:]``) of ``version``; trailing bytes after
    the body are ignored, as kio does."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise InvalidRequest(f"no Produce decoder for v{version}")
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    try:
        if version >= _FIRST_FLEXIBLE:
            return _decode_flexible(view, offset, len(view))
        return _decode_legacy(view, offset, len(view))
    except InvalidRequest as exc:
        raise InvalidRequest(f"malformed ProduceRequest v{version}: {exc}") from None
    except (IndexError, struct.error):
        raise InvalidRequest(f"malformed ProduceRequest v{version}: the body ends early"
                             ) from None
    except UnicodeDecodeError:
        raise InvalidRequest(f"malformed ProduceRequest v{version}: a string is not UTF-8"
                             ) from None


def _too_many(name: str, count: int, remaining: int) -> InvalidRequest:
    return InvalidRequest(f"{name}: tried to allocate a collection of size {count}, but there "
                          f"are only {max(remaining, 0)} bytes remaining")


def _decode_legacy(view: memoryview, pos: int, end: int) -> ProduceRequestData:
    length = _I16(view, pos)[0]
    pos += 2
    transactional_id: str | None = None
    if length >= 0:
        if pos + length > end:
            raise InvalidRequest("transactional_id runs past the end")
        transactional_id = str(view[pos:pos + length], "utf-8")
        pos += length
    elif length != -1:
        raise InvalidRequest("transactional_id has a negative length")
    acks, timeout_ms = _ACKS_TIMEOUT(view, pos)
    pos += 6
    count = _I32(view, pos)[0]
    pos += 4
    if count < 0:
        raise InvalidRequest("topic_data is null but not nullable")
    if count * 6 > end - pos:  # a topic takes at least 2 + 4 bytes
        raise _too_many("topic_data", count, end - pos)
    topics = []
    for _ in range(count):
        length = _I16(view, pos)[0]
        pos += 2
        if length < 0:
            raise InvalidRequest("topic_data[].name is null but not nullable")
        if pos + length > end:
            raise InvalidRequest("topic_data[].name runs past the end")
        name = str(view[pos:pos + length], "utf-8")
        pos += length
        n = _I32(view, pos)[0]
        pos += 4
        if n < 0:
            raise InvalidRequest("topic_data[].partition_data is null but not nullable")
        if n * 8 > end - pos:  # a partition takes at least 4 + 4 bytes
            raise _too_many("topic_data[].partition_data", n, end - pos)
        partitions: list[PartitionRecords] = []
        append = partitions.append
        for _ in range(n):
            index, size = _INDEX_SIZE(view, pos)
            pos += 8
            if size >= 0:
                stop = pos + size
                if stop > end:
                    raise InvalidRequest("topic_data[].partition_data[].records runs past the end")
                append((index, view[pos:stop]))
                pos = stop
            elif size == -1:
                append((index, None))
            else:
                raise InvalidRequest("topic_data[].partition_data[].records has a negative length")
        topics.append((name, partitions))
    return ProduceRequestData(transactional_id, acks, timeout_ms, topics)


def _skip_tags(view: memoryview, pos: int, end: int) -> int:
    """Skip a tagged-field section (none are known in Produce requests up to v12)."""
    count = view[pos]
    pos += 1
    if count > 127:
        count, pos = _varint(view, pos, count)
    if count * 2 > end - pos:
        raise _too_many("tagged fields", count, end - pos)
    for _ in range(count):
        tag = view[pos]
        pos += 1
        if tag > 127:
            tag, pos = _varint(view, pos, tag)
        size = view[pos]
        pos += 1
        if size > 127:
            size, pos = _varint(view, pos, size)
        pos += size
        if pos > end:
            raise InvalidRequest(f"tagged field {tag} runs past the end")
    return pos


def _decode_flexible(view: memoryview, pos: int, end: int) -> ProduceRequestData:
    length = view[pos]
    pos += 1
    if length > 127:
        length, pos = _varint(view, pos, length)
    transactional_id: str | None = None
    if length:
        stop = pos + length - 1
        if stop > end:
            raise InvalidRequest("transactional_id runs past the end")
        transactional_id = str(view[pos:stop], "utf-8")
        pos = stop
    acks, timeout_ms = _ACKS_TIMEOUT(view, pos)
    pos += 6
    count = view[pos]
    pos += 1
    if count > 127:
        count, pos = _varint(view, pos, count)
    if not count:
        raise InvalidRequest("topic_data is null but not nullable")
    count -= 1
    if count * 3 > end - pos:  # a topic takes at least name + partitions + tags = 3 bytes
        raise _too_many("topic_data", count, end - pos)
    topics = []
    for _ in range(count):
        length = view[pos]
        pos += 1
        if length > 127:
            length, pos = _varint(view, pos, length)
        if not length:
            raise InvalidRequest("topic_data[].name is null but not nullable")
        stop = pos + length - 1
        if stop > end:
            raise InvalidRequest("topic_data[].name runs past the end")
        name = str(view[pos:stop], "utf-8")
        pos = stop
        n = view[pos]
        pos += 1
        if n > 127:
            n, pos = _varint(view, pos, n)
        if not n:
            raise InvalidRequest("topic_data[].partition_data is null but not nullable")
        n -= 1
        if n * 6 > end - pos:  # index 4 + records 1 + tags 1
            raise _too_many("topic_data[].partition_data", n, end - pos)
        partitions: list[PartitionRecords] = []
        append = partitions.append
        for _ in range(n):
            # The index and the first two bytes of the records length (a partition ends with
            # at least its tag-section byte, so the second always exists in a valid body).
            index, size, byte = _INDEX_2BYTES(view, pos)
            if size < 128:
                pos += 5
            elif byte < 128:  # two-byte lengths (128 B - 16 KiB record sets) inline
                size = (size & 127) | (byte << 7)
                pos += 6
            else:
                size, pos = _varint(view, pos + 5, size)
            if size:
                stop = pos + size - 1
                if stop > end:
                    raise InvalidRequest("topic_data[].partition_data[].records runs past the end")
                append((index, view[pos:stop]))
                pos = stop
            else:
                append((index, None))
            if view[pos]:
                pos = _skip_tags(view, pos, end)
            else:
                pos += 1
        if view[pos]:
            pos = _skip_tags(view, pos, end)
        else:
            pos += 1
        topics.append((name, partitions))
    if view[pos]:
        pos = _skip_tags(view, pos, end)
    else:
        pos += 1
    return ProduceRequestData(transactional_id, acks, timeout_ms, topics)
