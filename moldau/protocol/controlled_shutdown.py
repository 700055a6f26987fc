"""ControlledShutdown (key 7), versions 1-3, by hand: kio (Kafka 4.x schemas) has no
broker-to-controller APIs of ZooKeeper mode.

Kafka's ``ControlledShutdownRequest.json`` / ``ControlledShutdownResponse.json``:

* request ``broker_id`` int32, from v2 ``broker_epoch`` int64 (-1 unknown); v3 is flexible
  (request header v2, compact encodings, tagged fields);
* response ``error_code`` int16, ``remaining_partitions`` [``topic_name`` string,
  ``partition_index`` int32]; v3 flexible (response header v1).

Version 0 has a non-standard request header without a client id; Moldau does not serve it.
Sans-I/O: both sides' bodies and frames as bytes, the broker's handler and its sender use the
same functions.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kio.serial.readers import read_unsigned_varint

from .encoders.primitives import EMPTY_TAGS, INT16, INT32, INT64, array_len, string
from .errors import InvalidRequest
from .messages import skip_tagged_fields

API_KEY = 7
MIN_VERSION = 1
MAX_VERSION = 3
FIRST_FLEXIBLE = 3
_HEADER = struct.Struct(">hhi")


def flexible(version: int) -> bool:
    return version >= FIRST_FLEXIBLE


@dataclass(frozen=True)
class ControlledShutdownRequest:
    broker_id: int
    broker_epoch: int = -1


@dataclass(frozen=True)
class ControlledShutdownResponse:
    error_code: int
    remaining_partitions: tuple[tuple[str, int], ...] = ()


def _need(buf: bytes | memoryview, pos: int, size: int) -> None:
    if pos + size > len(buf):
        raise InvalidRequest("ControlledShutdown: the body ends early")


def _skip_tags(buf: bytes | memoryview, pos: int) -> int:
    try:
        return skip_tagged_fields(buf, pos)
    except InvalidRequest:
        raise
    except Exception as exc:  # kio's varint reader: BufferUnderflow and the like
        raise InvalidRequest(f"ControlledShutdown: bad tagged fields: {exc!r}") from exc


def decode_request_body(version: int, buf: bytes | memoryview, pos: int,
                        header_tags: bool = True) -> ControlledShutdownRequest:
    """The request body at ``pos`` (for v3, after the header's tagged fields unless
    ``header_tags`` is False, i.e. they were skipped already)."""
    if flexible(version) and header_tags:
        pos = _skip_tags(buf, pos)
    _need(buf, pos, 4)
    (broker_id,) = INT32.unpack_from(buf, pos)
    pos += 4
    epoch = -1
    if version >= 2:
        _need(buf, pos, 8)
        (epoch,) = INT64.unpack_from(buf, pos)
        pos += 8
    if flexible(version):
        _need(buf, pos, 1)
        pos = _skip_tags(buf, pos)
    if pos != len(buf):
        raise InvalidRequest(f"ControlledShutdown v{version}: {len(buf) - pos} bytes after "
                             f"the body")
    return ControlledShutdownRequest(broker_id, epoch)


def encode_request(version: int, correlation_id: int, client_id: str | None,
                   request: ControlledShutdownRequest) -> bytes:
    """A whole request frame, size prefix included."""
    head = _HEADER.pack(API_KEY, version, correlation_id) + string(client_id, False)
    if flexible(version):
        head += EMPTY_TAGS
    body = INT32.pack(request.broker_id)
    if version >= 2:
        body += INT64.pack(request.broker_epoch)
    if flexible(version):
        body += EMPTY_TAGS
    payload = head + body
    return INT32.pack(len(payload)) + payload


def encode_response_body(version: int, response: ControlledShutdownResponse) -> bytes:
    """The response body (the dispatcher adds the header)."""
    flex = flexible(version)
    parts = [INT16.pack(response.error_code),
             array_len(len(response.remaining_partitions), flex)]
    for topic, partition in response.remaining_partitions:
        parts += [string(topic, flex), INT32.pack(partition)]
        if flex:
            parts.append(EMPTY_TAGS)
    if flex:
        parts.append(EMPTY_TAGS)
    return b"".join(parts)


def decode_response(version: int, frame: bytes | memoryview
                    ) -> tuple[int, ControlledShutdownResponse]:
    """(correlation id, response) of a response frame without its size prefix; ValueError
    when it is not one."""
    flex = flexible(version)
    try:
        (correlation_id,) = INT32.unpack_from(frame, 0)
        pos = 4
        if flex:
            pos = skip_tagged_fields(frame, pos)
        (error_code,) = INT16.unpack_from(frame, pos)
        pos += 2
        if flex:
            count, size = read_unsigned_varint(frame, pos)
            count -= 1
        else:
            (count,), size = INT32.unpack_from(frame, pos), 4
        pos += size
        remaining = []
        for _ in range(max(count, 0)):
            if flex:
                length, size = read_unsigned_varint(frame, pos)
                length -= 1
            else:
                (length,), size = INT16.unpack_from(frame, pos), 2
            pos += size
            topic = bytes(frame[pos:pos + length]).decode("utf-8")
            pos += length
            (partition,) = INT32.unpack_from(frame, pos)
            pos += 4
            if flex:
                pos = skip_tagged_fields(frame, pos)
            remaining.append((topic, partition))
    except Exception as exc:  # whatever the peer sent: struct, varint, UTF-8 errors
        raise ValueError(f"cannot decode a ControlledShutdown v{version} response: {exc}"
                         ) from exc
    return correlation_id, ControlledShutdownResponse(error_code, tuple(remaining))
