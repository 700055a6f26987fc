"""ProduceResponse encoder, versions 3-11 (byte-identical to kio's writer)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from .primitives import EMPTY_TAGS, INT32, array_len, string

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


def encode_produce_response(
    version: int,
    topics: Sequence[tuple[str, Sequence[PartitionProduceResult]]],
    throttle_ms: int = 0,
) -> bytes:
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
                    out.append(string(message, flexible))
                    if flexible:
                        out.append(EMPTY_TAGS)
                out.append(string(p.error_message, flexible))
            if flexible:
                out.append(EMPTY_TAGS)
        if flexible:
            out.append(EMPTY_TAGS)
    out.append(INT32.pack(throttle_ms))
    if flexible:
        out.append(EMPTY_TAGS)
    return b"".join(out)
