"""Request/response headers and message codecs on top of kio's generated schemas.

A Kafka frame is ``int32 size`` followed by a header and a body. Request headers are v1
(non-flexible APIs) or v2 (flexible APIs, with tagged fields); response headers are v0 or v1 the
same way, except ApiVersions, whose response header is always v0 so that a client can read it
before it knows which versions the broker speaks (KIP-511).

Headers are parsed by hand (four fixed fields and a skip over tagged fields); bodies are decoded
with kio's native readers and encoded with kio's writers. Hot responses (Produce, Fetch,
Metadata) have hand-written encoders in :mod:`moldau.protocol.encoders`.
"""

from __future__ import annotations

import functools
import io
import struct
from dataclasses import dataclass
from typing import Any

from kio.serial import entity_reader, entity_writer
from kio.serial.readers import read_unsigned_varint

from .api_keys import ApiKey
from .errors import InvalidRequest
from .request_validator import validate_request_body
from .schemas import highest_version, request_schema, response_schema

__all__ = [
    "RequestHeader", "decode_request", "decode_request_header", "decode_response",
    "encode_body", "encode_request", "encode_response", "frame_response", "is_flexible",
    "request_schema", "response_header_bytes", "response_header_flexible", "response_schema",
    "skip_tagged_fields",
]

_HEADER_FIXED = struct.Struct(">hhi")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """The request header fields every API shares."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def is_flexible(api_key: int, version: int) -> bool:
    """Whether ``(api_key, version)`` uses compact encodings and tagged fields.

    A version newer than kio knows of a known API is as flexible as the newest version kio
    knows: every API that became flexible stays flexible, which is what lets a broker read the
    header of an ApiVersions request at a version it does not serve (KIP-511). Unknown api
    keys are not flexible. Two dict lookups, nothing cached: a made-up api key or version
    leaves nothing behind.
    """
    flexible = _flexible.get((api_key, version))
    if flexible is not None:
        return flexible
    first_flexible = HAND_CODED_FIRST_FLEXIBLE.get(api_key)
    if first_flexible is not None:
        return version >= first_flexible
    schema = request_schema(api_key, version)
    if schema is not None:
        flexible = _flexible[(api_key, version)] = bool(schema.__flexible__)
        return flexible
    newest = highest_version(api_key)
    if newest is None or version < newest:
        return False
    return is_flexible(api_key, newest)


# APIs kio has no schemas for, coded by hand (moldau.protocol.controlled_shutdown): the first
# flexible version, so their headers are read and written as Kafka's.
HAND_CODED_FIRST_FLEXIBLE = {7: 3}  # ControlledShutdown

# Flexibility of the pairs kio knows (unknown ones are not kept).
_flexible: dict[tuple[int, int], bool] = {}


def response_header_flexible(api_key: int, version: int) -> bool:
    """Whether the response header carries tagged fields (header v1)."""
    if api_key == ApiKey.API_VERSIONS:
        return False
    return is_flexible(api_key, version)


def skip_tagged_fields(buf: memoryview | bytes, pos: int) -> int:
    """Skip a tagged-field section starting at ``pos``; return the position after it."""
    count, size = read_unsigned_varint(buf, pos)
    pos += size
    for _ in range(count):
        _tag, size = read_unsigned_varint(buf, pos)
        pos += size
        length, size = read_unsigned_varint(buf, pos)
        pos += size + length
    if pos > len(buf):
        raise InvalidRequest("tagged fields run past the end of the frame")
    return pos


def decode_request_header(frame: memoryview | bytes) -> tuple[RequestHeader, int]:
    """Parse a request header from a frame (without its size prefix).

    Returns the header and the offset where the body starts. Raises InvalidRequest when the
    frame is too short or malformed.
    """
    if len(frame) < 10:
        raise InvalidRequest(f"request frame of {len(frame)} bytes is shorter than a header")
    api_key, api_version, correlation_id = _HEADER_FIXED.unpack_from(frame, 0)
    (client_len,) = _INT16.unpack_from(frame, 8)
    pos = 10
    if client_len < 0:
        client_id = None
    else:
        end = pos + client_len
        if end > len(frame):
            raise InvalidRequest("client id runs past the end of the frame")
        try:
            client_id = bytes(frame[pos:end]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRequest("client id is not UTF-8") from exc
        pos = end
    if api_version >= 0 and is_flexible(api_key, api_version):
        try:
            pos = skip_tagged_fields(frame, pos)
        except InvalidRequest:
            raise
        except Exception as exc:
            raise InvalidRequest(f"bad tagged fields in request header: {exc}") from exc
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def decode_request(header: RequestHeader, frame: memoryview | bytes, offset: int) -> Any:
    """Decode the body of a request with kio; raises InvalidRequest on malformed input.

    The body is checked first (:mod:`.request_validator`): kio's reader would abort the
    process on a huge array count and accepts null for arrays that are not nullable.
    """
    schema = request_schema(header.api_key, header.api_version)
    if schema is None:
        raise InvalidRequest(f"no schema for api {header.api_key} v{header.api_version}")
    validate_request_body(header.api_key, header.api_version, frame, offset)
    try:
        value, _size = _reader(schema)(frame, offset)
    except Exception as exc:
        raise InvalidRequest(
            f"malformed {schema.__name__} v{header.api_version}: {exc}"
        ) from exc
    return value


@functools.cache
def _reader(schema: type[Any]) -> Any:
    # Keyed by kio's schema classes, so bounded by the schemas kio ships.
    return entity_reader(schema)


def response_header_bytes(api_key: int, version: int, correlation_id: int) -> bytes:
    """The encoded response header (v0 or v1) for a response to ``(api_key, version)``."""
    if response_header_flexible(api_key, version):
        return _INT32.pack(correlation_id) + b"\x00"
    return _INT32.pack(correlation_id)


def encode_body(entity: Any) -> bytes:
    """Encode a kio entity (request or response body) to bytes."""
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def frame_response(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    """Prefix an encoded response body with its header and size."""
    header = response_header_bytes(api_key, version, correlation_id)
    return _INT32.pack(len(header) + len(body)) + header + body


def encode_response(api_key: int, version: int, correlation_id: int, entity: Any) -> bytes:
    """A whole size-prefixed response frame for a kio response entity."""
    return frame_response(api_key, version, correlation_id, encode_body(entity))


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str | None, entity: Any
) -> bytes:
    """A whole size-prefixed request frame for a kio request entity (used by the client)."""
    parts = [_HEADER_FIXED.pack(api_key, version, correlation_id)]
    if client_id is None:
        parts.append(_INT16.pack(-1))
    else:
        raw = client_id.encode("utf-8")
        parts.append(_INT16.pack(len(raw)) + raw)
    if is_flexible(api_key, version):
        parts.append(b"\x00")
    parts.append(encode_body(entity))
    payload = b"".join(parts)
    return _INT32.pack(len(payload)) + payload


def decode_response(api_key: int, version: int, frame: memoryview | bytes) -> tuple[int, Any]:
    """Decode a response frame (without size prefix): returns (correlation_id, entity)."""
    (correlation_id,) = _INT32.unpack_from(frame, 0)
    pos = 4
    if response_header_flexible(api_key, version):
        pos = skip_tagged_fields(frame, pos)
    schema = response_schema(api_key, version)
    if schema is None:
        raise InvalidRequest(f"no schema for api {api_key} v{version}")
    validate_request_body(api_key, version, frame, pos, response=True)
    try:
        value, _size = _reader(schema)(frame, pos)
    except Exception as exc:
        raise InvalidRequest(f"malformed {schema.__name__} v{version}: {exc}") from exc
    return correlation_id, value
