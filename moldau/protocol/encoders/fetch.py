"""FetchResponse encoder, versions 4-16 (byte-identical to kio's writer).

Returns a list of chunks: record blobs (bytes or memoryviews read from segment files) are
passed through as their own chunks and written with ``writelines``.

v12+ partitions may carry ``current_leader`` (leader id, leader epoch) and v16 the top-level
``node_endpoints`` of the leaders named (KIP-951), both tagged fields written only when set.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import NamedTuple

from .primitives import (
    EMPTY_TAGS,
    INT32,
    array_len,
    bytes_len,
    leader_tags,
    node_endpoints_tags,
    string,
)

_HEAD_V7 = struct.Struct(">ihi")  # throttle, error, session id
_PARTITION = struct.Struct(">ihqq")  # index, error, high watermark, last stable offset
_INT64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")


class FetchPartitionData(NamedTuple):
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: Sequence[tuple[int, int]] | None = None
    preferred_read_replica: int = -1
    records: bytes | memoryview | None = None
    # Where the partition's leader is now, (leader id, leader epoch): tagged, v12+.
    current_leader: tuple[int, int] | None = None


def encode_fetch_response(
    version: int,
    topics: Sequence[tuple[str | uuid.UUID, Sequence[FetchPartitionData]]],
    *,
    error_code: int = 0,
    session_id: int = 0,
    throttle_ms: int = 0,
    node_endpoints: Sequence[tuple[int, str, int, str | None]] = (),
) -> list[bytes | memoryview]:
    """The response body as chunks; ``node_endpoints`` (v16) are (node id, host, port, rack)
    of the leaders the partitions' ``current_leader`` hints name."""
    flexible = version >= 12
    chunks: list[bytes | memoryview] = []
    head = bytearray()
    if version >= 7:
        head += _HEAD_V7.pack(throttle_ms, error_code, session_id)
    else:
        head += INT32.pack(throttle_ms)
    head += array_len(len(topics), flexible)
    for topic, partitions in topics:
        if version >= 13:
            assert isinstance(topic, uuid.UUID)
            head += topic.bytes
        else:
            assert isinstance(topic, str)
            head += string(topic, flexible)
        head += array_len(len(partitions), flexible)
        for p in partitions:
            head += _PARTITION.pack(p.partition_index, p.error_code, p.high_watermark,
                                    p.last_stable_offset)
            if version >= 5:
                head += _INT64.pack(p.log_start_offset)
            aborted = p.aborted_transactions
            head += array_len(None if aborted is None else len(aborted), flexible)
            if aborted:
                for producer_id, first_offset in aborted:
                    head += _ABORTED.pack(producer_id, first_offset)
                    if flexible:
                        head += EMPTY_TAGS
            if version >= 11:
                head += INT32.pack(p.preferred_read_replica)
            records = p.records
            head += bytes_len(None if records is None else len(records), flexible)
            if records:
                chunks.append(bytes(head))
                chunks.append(records)
                head = bytearray()
            if flexible:
                head += leader_tags(1, p.current_leader)
        if flexible:
            head += EMPTY_TAGS
    if version >= 16:
        head += node_endpoints_tags(0, node_endpoints)
    elif flexible:
        head += EMPTY_TAGS
    chunks.append(bytes(head))
    return chunks
