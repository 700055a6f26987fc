"""Rewriting broker addresses in the responses that carry them.

A client learns broker addresses from four places, all rewritten here to the proxy's own
listeners:

- Metadata (all versions): ``brokers``;
- FindCoordinator: ``node_id/host/port`` (v0-3) or each of ``coordinators`` (v4+, batched);
- DescribeCluster: ``brokers`` (``endpoint_type`` 2 lists controllers, mapped separately);
- Produce v10+ and Fetch v16+: the ``node_endpoints`` tagged field (KIP-951: a broker that is
  no longer a partition's leader names the new leader's address so the client can go there
  without a metadata round trip).

Frames are decoded with kio (:mod:`moldau.protocol.messages`) and encoded again only when an
address changed. Metadata is spliced: only its ``brokers`` array is decoded and re-encoded
(with kio's entity reader/writer), the topics that follow are copied as they came, because a
big cluster's Metadata takes kio's writer tens of milliseconds. Fetch responses are walked by
hand first: only the ones that carry top-level tagged fields (almost never) are decoded, so
record data is not copied out of a fetch.

The :data:`Resolver` decides the new address and is where the proxy learns brokers: it is
called with ``(kind, node_id, host, port)`` as the upstream advertised it, ``kind`` being
``"broker"`` or ``"controller"``, and returns the address to give the client (or None to
leave that entry alone).
"""

from __future__ import annotations

import dataclasses
import functools
import io
import logging
import struct
import typing
from collections.abc import Callable
from typing import Any

from kio.serial import entity_reader, entity_writer
from kio.serial.readers import read_unsigned_varint
from kio.serial.writers import write_unsigned_varint

from moldau.protocol.api_keys import ApiKey, api_name
from moldau.protocol.messages import (
    decode_response,
    encode_response,
    response_header_flexible,
    response_schema,
    skip_tagged_fields,
)
from moldau.protocol.request_validator import validate_request_body

log = logging.getLogger(__name__)

Resolver = Callable[[str, int, str, int], tuple[str, int] | None]

BROKER = "broker"
CONTROLLER = "controller"

# First versions carrying KIP-951 node endpoints.
PRODUCE_NODE_ENDPOINTS = 10
FETCH_NODE_ENDPOINTS = 16

_I32 = struct.Struct(">i")


def needs_rewrite(api_key: int, version: int) -> bool:
    """Whether responses to ``(api_key, version)`` may carry broker addresses."""
    if api_key in (ApiKey.METADATA, ApiKey.FIND_COORDINATOR, ApiKey.DESCRIBE_CLUSTER):
        return True
    if api_key == ApiKey.PRODUCE:
        return version >= PRODUCE_NODE_ENDPOINTS
    if api_key == ApiKey.FETCH:
        return version >= FETCH_NODE_ENDPOINTS
    return False


class RewriteError(Exception):
    """A response that should be rewritten could not be decoded or encoded."""


def rewrite_response(api_key: int, version: int, frame: bytes | memoryview,
                     resolve: Resolver) -> bytes | None:
    """The rewritten whole frame (size prefix included), or None to keep ``frame`` as is.

    ``frame`` is the response without its size prefix. Raises :class:`RewriteError` when the
    frame cannot be decoded (unknown version, malformed bytes).
    """
    if api_key == ApiKey.FETCH and not _fetch_has_tagged_fields(version, frame):
        return None
    if response_schema(api_key, version) is None:
        raise RewriteError(f"no schema for {api_name(api_key)} v{version} (kio 0.6.5)")
    if api_key == ApiKey.METADATA:
        try:
            return _splice_metadata(version, frame, resolve)
        except Exception as exc:
            raise RewriteError(f"cannot decode metadata v{version} response: {exc}") from exc
    try:
        correlation_id, response = decode_response(api_key, version, frame)
    except Exception as exc:
        raise RewriteError(f"cannot decode {api_name(api_key)} v{version} response: {exc}") \
            from exc
    changed = _REWRITERS[api_key](response, resolve)
    if changed is None:
        return None
    try:
        return encode_response(api_key, version, correlation_id, changed)
    except Exception as exc:
        raise RewriteError(f"cannot encode {api_name(api_key)} v{version} response: {exc}") \
            from exc


def _moved(entity: Any, kind: str, node_id: int, resolve: Resolver) -> Any:
    """``entity`` with host/port replaced by what ``resolve`` says (same object if unchanged)."""
    target = resolve(kind, int(node_id), entity.host, int(entity.port))
    if target is None or (target[0], target[1]) == (entity.host, entity.port):
        return entity
    return dataclasses.replace(entity, host=target[0], port=target[1])


def _replace_all(response: Any, field: str, kind: str, id_field: str,
                 resolve: Resolver) -> Any:
    old = getattr(response, field)
    new = tuple(_moved(item, kind, getattr(item, id_field), resolve) for item in old)
    if all(a is b for a, b in zip(old, new, strict=True)):
        return None
    return dataclasses.replace(response, **{field: new})


def _metadata(response: Any, resolve: Resolver) -> Any:
    return _replace_all(response, "brokers", BROKER, "node_id", resolve)


def _find_coordinator(response: Any, resolve: Resolver) -> Any:
    if hasattr(response, "coordinators"):  # v4+: one entry per key
        old = response.coordinators
        new = tuple(
            _moved(c, BROKER, c.node_id, resolve) if not c.error_code and c.node_id >= 0 else c
            for c in old
        )
        if all(a is b for a, b in zip(old, new, strict=True)):
            return None
        return dataclasses.replace(response, coordinators=new)
    if response.error_code or response.node_id < 0:
        return None
    moved = _moved(response, BROKER, response.node_id, resolve)
    return None if moved is response else moved


def _describe_cluster(response: Any, resolve: Resolver) -> Any:
    kind = CONTROLLER if getattr(response, "endpoint_type", 1) == 2 else BROKER
    return _replace_all(response, "brokers", kind, "broker_id", resolve)


def _node_endpoints(response: Any, resolve: Resolver) -> Any:
    if not response.node_endpoints:
        return None
    return _replace_all(response, "node_endpoints", BROKER, "node_id", resolve)


_REWRITERS: dict[int, Callable[[Any, Resolver], Any]] = {
    ApiKey.METADATA: _metadata,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.DESCRIBE_CLUSTER: _describe_cluster,
    ApiKey.PRODUCE: _node_endpoints,
    ApiKey.FETCH: _node_endpoints,
}


@functools.cache
def _metadata_broker_class(version: int) -> type[Any]:
    schema = response_schema(ApiKey.METADATA, version)
    hint = typing.get_type_hints(schema)["brokers"]
    return typing.get_args(hint)[0]  # type: ignore[no-any-return]


def _splice_metadata(version: int, frame: bytes | memoryview,
                     resolve: Resolver) -> bytes | None:
    """Metadata with only its ``brokers`` array re-encoded; the rest (topics, partitions:
    the bulk of a big cluster's answer) is copied as it came. Byte-identical to decoding and
    encoding the whole response with kio, at a fraction of the cost."""
    flexible = response_header_flexible(ApiKey.METADATA, version)
    pos = skip_tagged_fields(frame, 4) if flexible else 4
    # kio's native reader trusts counts it is given; a hostile answer must not abort us
    validate_request_body(ApiKey.METADATA, version, frame, pos, response=True)
    if version >= 3:
        pos += 4  # throttle_time_ms
    if flexible:
        count, size = read_unsigned_varint(frame, pos)
        count -= 1
    else:
        (count,) = _I32.unpack_from(frame, pos)
        size = 4
    start = pos
    pos += size
    broker_cls = _metadata_broker_class(version)
    read = entity_reader(broker_cls)
    old = []
    for _ in range(max(count, 0)):
        broker, size = read(frame, pos)
        old.append(broker)
        pos += size
    new = [_moved(b, BROKER, b.node_id, resolve) for b in old]
    if all(a is b for a, b in zip(old, new, strict=True)):
        return None
    out = io.BytesIO()
    out.write(b"\0\0\0\0")  # size, patched below
    out.write(frame[:start])
    if flexible:
        write_unsigned_varint(out, count + 1)
    else:
        out.write(_I32.pack(count))
    write = entity_writer(broker_cls)
    for broker in new:
        write(out, broker)
    out.write(frame[pos:])
    data = out.getbuffer()
    _I32.pack_into(data, 0, len(data) - 4)
    return bytes(data)


def _skip_compact(buf: bytes | memoryview, pos: int) -> int:
    """Skip a compact (nullable) string or bytes field."""
    length, size = read_unsigned_varint(buf, pos)
    return pos + size + max(length - 1, 0)


def _fetch_has_tagged_fields(version: int, frame: bytes | memoryview) -> bool:
    """Whether a flexible Fetch response has top-level tagged fields (node endpoints).

    Walks the frame without copying records: the common answer is False, and then the
    response is passed on untouched. Malformed frames answer True so the decoder reports them.
    """
    try:
        pos = 4
        if response_header_flexible(ApiKey.FETCH, version):
            pos = skip_tagged_fields(frame, pos)
        pos += 4 + 2 + 4  # throttle_time_ms, error_code, session_id
        topics, size = read_unsigned_varint(frame, pos)
        pos += size
        for _ in range(max(topics - 1, 0)):
            pos += 16  # topic_id (v13+)
            partitions, size = read_unsigned_varint(frame, pos)
            pos += size
            for _ in range(max(partitions - 1, 0)):
                pos += 4 + 2 + 8 + 8 + 8  # index, error, high watermark, LSO, log start
                aborted, size = read_unsigned_varint(frame, pos)
                pos += size
                for _ in range(max(aborted - 1, 0)):
                    pos = skip_tagged_fields(frame, pos + 16)
                pos += 4  # preferred_read_replica
                pos = _skip_compact(frame, pos)  # records
                pos = skip_tagged_fields(frame, pos)
            pos = skip_tagged_fields(frame, pos)
        count, _size = read_unsigned_varint(frame, pos)
    except Exception:
        return True
    return count > 0
