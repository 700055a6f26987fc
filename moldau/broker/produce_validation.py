"""Pure checks of a produce request's record set for one partition.

Returns a :class:`Rejection` (Kafka error code plus a message naming what is wrong) or the
validated batch headers. No I/O, no broker state: the partition applies the result.

The batch headers are checked first (size, magic, CRC-32C, count against last offset delta:
:func:`~moldau.protocol.records.batch.validate_batches`), then the batch-level rules of Kafka's
``LogValidator.validateBatch``, then every record
(:func:`~moldau.protocol.records.validation.validate_records`: framing, varints, offset deltas,
keys of a compacted topic, bounded decompression), and last the record timestamps.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..protocol.errors import ErrorCode
from ..protocol.records.batch import (
    COMPRESSION_MASK,
    LOG_OVERHEAD,
    BatchHeader,
    InvalidBatch,
    validate_batches,
)
from ..protocol.records.validation import max_decompressed_bytes, validate_records

_REASON_CODES = {
    "magic": ErrorCode.unsupported_for_message_format,
    "too_large": ErrorCode.message_too_large,
    "corrupt": ErrorCode.corrupt_message,
    "invalid": ErrorCode.invalid_record,
}

# Kafka's RecordBatch.NO_TIMESTAMP: a record without a timestamp, never out of range.
_NO_TIMESTAMP = -1
_LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Rejection:
    code: ErrorCode
    message: str


def check_record_set(
    records: bytes | bytearray | memoryview | None,
    *,
    max_message_bytes: int,
    segment_bytes: int,
    now_ms: int,
    timestamp_before_max_ms: int,
    timestamp_after_max_ms: int,
    log_append_time: bool,
    compacted: bool = False,
    control_allowed: bool = False,
) -> Rejection | list[BatchHeader]:
    """Validate the record set of one partition of a produce request.

    ``compacted`` (the topic's cleanup.policy includes compact) requires a key on every record.
    ``control_allowed``: the set comes from a coordinator, which writes transaction markers.
    """
    if records is None or len(records) == 0:
        return Rejection(ErrorCode.corrupt_message, "The record set is empty")
    if len(records) > segment_bytes:
        return Rejection(
            ErrorCode.record_list_too_large,
            f"The record set of {len(records)} bytes is larger than segment.bytes "
            f"({segment_bytes})",
        )
    try:
        headers = validate_batches(records, max_message_bytes)
    except InvalidBatch as exc:
        return Rejection(_REASON_CODES[exc.reason], str(exc))
    producer_ids = {h.producer_id for h in headers}
    if len(headers) > 1 and any(pid >= 0 for pid in producer_ids):
        return Rejection(
            ErrorCode.invalid_record,
            "An idempotent or transactional producer must send one batch per partition",
        )
    # The records' own timestamps matter only under a finite bound (both are Long.MAX_VALUE
    # by default); the scan then tracks their range, ~7% of its time.
    record_timestamps = not log_append_time and (
        timestamp_before_max_ms < _LONG_MAX or timestamp_after_max_ms < _LONG_MAX)
    pos = 0
    for index, h in enumerate(headers):
        if h.is_control and not control_allowed:
            return Rejection(ErrorCode.invalid_record,
                             "Clients may not produce control batches")
        if h.is_transactional and h.producer_id < 0:
            return Rejection(ErrorCode.invalid_record,
                             "A transactional batch needs a producer id")
        limit = (max_decompressed_bytes(max_message_bytes)
                 if h.attributes & COMPRESSION_MASK else 0)
        try:
            min_delta, max_delta = validate_records(
                records, pos, h, require_keys=compacted, max_decompressed_bytes=limit,
                timestamps=record_timestamps)
        except InvalidBatch as exc:
            where = f" (batch {index + 1} of the record set)" if len(headers) > 1 else ""
            return Rejection(_REASON_CODES[exc.reason], f"{exc}{where}")
        pos += LOG_OVERHEAD + h.batch_length
        if log_append_time or h.max_timestamp < 0:
            continue
        # The header's timestamps and the records' own (base + delta), as Kafka checks each
        # record: a header can claim a max timestamp its records exceed.
        earliest = latest = h.max_timestamp
        base = h.base_timestamp
        if base != _NO_TIMESTAMP:
            if base + min_delta < earliest:
                earliest = base + min_delta
            if base + max_delta > latest:
                latest = base + max_delta
        if now_ms - earliest > timestamp_before_max_ms:
            return Rejection(
                ErrorCode.invalid_timestamp,
                f"Timestamp {earliest} of a record is more than "
                f"message.timestamp.before.max.ms ({timestamp_before_max_ms}) in the past",
            )
        if latest - now_ms > timestamp_after_max_ms:
            return Rejection(
                ErrorCode.invalid_timestamp,
                f"Timestamp {latest} of a record is more than "
                f"message.timestamp.after.max.ms ({timestamp_after_max_ms}) in the future",
            )
    return headers
