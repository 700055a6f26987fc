"""ProduceResponse encoder, versions 3-11 (byte-identical to kio's writer).

v10+ carries KIP-951 leader hints: a partition's ``current_leader`` (leader id, leader epoch)
and the top-level ``node_endpoints`` of the leaders named, both tagged fields written only when
set.

Error messages are bounded by :func:`~moldau.protocol.errors.error_message`, as the kio-built
responses' are.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from ..errors import error_message
from .primitives import EMPTY_TAGS, INT32, array_len, leader_tags, node_endpoints_tags, string

_PARTITION_V3 = struct.Struct(">ihqq")  # index, error, base offset, log append time
_INT64 = struct.Struct(">q")


class PartitionProduceResult(NamedTuple):
    index: int
    error_code: int = 0
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: Sequence[tuple[int, str | None]] = ()
    # KIP-951 (v10+): where the partition's leader is now, (leader id, leader epoch).
    current_leader: tuple[int, int] | None = None


def _partition_layout(version: int) -> tuple[struct.Struct, bytes]:
    """The fixed fields of one partition response and the constant bytes after them when it
    has no record errors and no error message."""
    flexible = version >= 9
    fields = ">ihqq" + ("q" if version >= 5 else "")
    tail = b""
    if version >= 8:
        tail = array_len(0, flexible) + string(None, flexible)
    if flexible:
        tail += EMPTY_TAGS
    return struct.Struct(fields), tail


_LAYOUTS = {v: _partition_layout(v) for v in range(3, 12)}
# Encoded "one topic named X with one partition" heads, per (version, topic).
_HEADS: dict[tuple[int, str], bytes] = {}
_HEADS_MAX = 4096


def _single(version: int, name: str, p: PartitionProduceResult, throttle_ms: int) -> bytes:
    """The common response: one topic, one partition, no error text (a librdkafka producer
    sends one partition per request)."""
    flexible = version >= 9
    head = _HEADS.get((version, name))
    if head is None:
        if len(_HEADS) >= _HEADS_MAX:
            _HEADS.clear()
        head = _HEADS[(version, name)] = (array_len(1, flexible) + string(name, flexible)
                                          + array_len(1, flexible))
    fields, tail = _LAYOUTS[version]
    if version >= 5:
        part = fields.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms,
                           p.log_start_offset)
    else:
        part = fields.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms)
    if flexible:
        return head + part + tail + EMPTY_TAGS + INT32.pack(throttle_ms) + EMPTY_TAGS
    return head + part + tail + INT32.pack(throttle_ms)


def encode_produce_response(
    version: int,
    topics: Sequence[tuple[str, Sequence[PartitionProduceResult]]],
    throttle_ms: int = 0,
    node_endpoints: Sequence[tuple[int, str, int, str | None]] = (),
) -> bytes:
    """The response body; ``node_endpoints`` (v10+) are (node id, host, port, rack) of the
    leaders the partitions' ``current_leader`` hints name."""
    hints = version >= 10
    if len(topics) == 1 and len(topics[0][1]) == 1 and version in _LAYOUTS and not (
            hints and node_endpoints):
        p = topics[0][1][0]
        if p.error_message is None and not p.record_errors and (
                not hints or p.current_leader is None):
            return _single(version, topics[0][0], p, throttle_ms)
    flexible = version >= 9
    out = [array_len(len(topics), flexible)]
    for name, partitions in topics:
        out.append(string(name, flexible))
        out.append(array_len(len(partitions), flexible))
        for p in partitions:
            out.append(_PARTITION_V3.pack(p.index, p.error_code, p.base_offset,
                                          p.log_append_time_ms))
            if version >= 5:
                out.append(_INT64.pack(p.log_start_offset))
            if version >= 8:
                out.append(array_len(len(p.record_errors), flexible))
                for batch_index, message in p.record_errors:
                    out.append(INT32.pack(batch_index))
                    out.append(string(error_message(message), flexible))
                    if flexible:
                        out.append(EMPTY_TAGS)
                out.append(string(error_message(p.error_message), flexible))
            if hints:
                out.append(leader_tags(0, p.current_leader))
            elif flexible:
                out.append(EMPTY_TAGS)
        if flexible:
            out.append(EMPTY_TAGS)
    out.append(INT32.pack(throttle_ms))
    if hints:
        out.append(node_endpoints_tags(0, node_endpoints))
    elif flexible:
        out.append(EMPTY_TAGS)
    return b"".join(out)
