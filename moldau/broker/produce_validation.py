"""Pure checks of a produce request's record set for one partition.

Returns a :class:`Rejection` (Kafka error code plus a message naming what is wrong) or the
validated batch headers. No I/O, no broker state: the partition applies the result.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..protocol.errors import ErrorCode
from ..protocol.records.batch import BatchHeader, InvalidBatch, validate_batches

_REASON_CODES = {
    "magic": ErrorCode.unsupported_for_message_format,
    "too_large": ErrorCode.message_too_large,
    "corrupt": ErrorCode.corrupt_message,
}


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
) -> Rejection | list[BatchHeader]:
    """Validate the record set of one partition of a produce request."""
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
    for h in headers:
        if h.is_control:
            return Rejection(ErrorCode.invalid_record,
                             "Clients may not produce control batches")
        if h.is_transactional and h.producer_id < 0:
            return Rejection(ErrorCode.invalid_record,
                             "A transactional batch needs a producer id")
        if not log_append_time and h.max_timestamp >= 0:
            if now_ms - h.max_timestamp > timestamp_before_max_ms or (
                h.base_timestamp >= 0 and now_ms - h.base_timestamp > timestamp_before_max_ms
            ):
                return Rejection(
                    ErrorCode.invalid_timestamp,
                    f"Timestamp {h.base_timestamp} of a record is more than "
                    f"message.timestamp.before.max.ms ({timestamp_before_max_ms}) in the past",
                )
            if h.max_timestamp - now_ms > timestamp_after_max_ms:
                return Rejection(
                    ErrorCode.invalid_timestamp,
                    f"Timestamp {h.max_timestamp} of a record is more than "
                    f"message.timestamp.after.max.ms ({timestamp_after_max_ms}) in the future",
                )
    return headers
