"""RecordBatch v2 (magic 2) headers: layout, parsing, validation and in-place patching.

The broker treats record batches as opaque bytes: it reads the 61-byte header, checks the
CRC-32C once, patches the base offset (and leader epoch) in place and appends. CRC-32C covers
everything from ``attributes`` to the end of the batch, so patching ``base_offset`` and
``partition_leader_epoch`` never changes the checksum; setting LogAppendTime does, and
:func:`set_log_append_time` recomputes it.

Layout (big-endian)::

    0  baseOffset int64          27 baseTimestamp int64
    8  batchLength int32         35 maxTimestamp int64
    12 partitionLeaderEpoch int32 43 producerId int64
    16 magic int8                51 producerEpoch int16
    17 crc uint32                53 baseSequence int32
    21 attributes int16          57 recordCount int32
    23 lastOffsetDelta int32     61 records...
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from crc32c import crc32c

HEADER_SIZE = 61
# Bytes before batchLength's count starts: baseOffset + batchLength.
LOG_OVERHEAD = 12
CRC_START = 21
MAGIC_OFFSET = 16
# Smallest magic-0 message after offset and size (Kafka's LegacyRecord.RECORD_OVERHEAD_V0).
LEGACY_RECORD_OVERHEAD = 14

_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")

# Attribute bits.
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08  # 1 = LogAppendTime
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1


class BatchHeader(NamedTuple):
    """The fixed fields of a RecordBatch v2."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch including the 12-byte log overhead."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


class InvalidBatch(ValueError):
    """A record batch that must be rejected; ``reason`` names the Kafka error to answer."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason  # "corrupt", "invalid", "magic" or "too_large"


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the batch header at ``pos``; the caller checks there are HEADER_SIZE bytes."""
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC-32C of a batch's checksummed region (attributes to end)."""
    return crc32c(memoryview(buf)[pos + CRC_START : pos + size])


def validate_batches(
    buf: bytes | bytearray | memoryview, max_batch_size: int | None = None
) -> list[BatchHeader]:
    """Validate a produce ``records`` blob and return the headers of its batches.

    Each batch must be magic 2, complete, CRC-correct, and internally consistent (record
    count matches last offset delta, at least one record). Raises :class:`InvalidBatch` with
    ``reason`` "magic" (UNSUPPORTED_FOR_MESSAGE_FORMAT), "too_large" (MESSAGE_TOO_LARGE),
    "corrupt" (CORRUPT_MESSAGE: framing and CRC, Kafka's ``CorruptRecordException``) or
    "invalid" (INVALID_RECORD: a header whose count and offsets disagree, as Kafka's
    ``LogValidator.validateBatch``). The records themselves are checked by
    :func:`moldau.protocol.records.validation.validate_records`.
    """
    headers: list[BatchHeader] = []
    total = len(buf)
    pos = 0
    if total == 0:
        raise InvalidBatch("corrupt", "empty record set")
    while pos < total:
        if total - pos < LOG_OVERHEAD + 5:
            raise InvalidBatch("corrupt", f"truncated batch header at byte {pos}")
        # As Kafka: a size below the smallest legacy message is corruption, whatever the
        # byte where magic would be says (garbage is not an "old format").
        (length,) = _INT32.unpack_from(buf, pos + 8)
        if length < LEGACY_RECORD_OVERHEAD:
            raise InvalidBatch("corrupt", f"batch length {length} is too small")
        magic = buf[pos + MAGIC_OFFSET]
        if magic != 2:
            raise InvalidBatch("magic", f"record batch magic {magic} is not supported (need 2)")
        if total - pos < HEADER_SIZE:
            raise InvalidBatch("corrupt", f"truncated batch header at byte {pos}")
        header = read_header(buf, pos)
        size = header.size
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise InvalidBatch("corrupt", f"batch length {header.batch_length} is too small")
        if pos + size > total:
            raise InvalidBatch("corrupt", f"batch of {size} bytes is truncated at byte {pos}")
        if max_batch_size is not None and size > max_batch_size:
            raise InvalidBatch(
                "too_large", f"batch of {size} bytes exceeds max.message.bytes {max_batch_size}"
            )
        if compute_crc(buf, pos, size) != header.crc:
            raise InvalidBatch("corrupt", "record batch CRC-32C mismatch")
        if header.record_count <= 0 or header.last_offset_delta != header.record_count - 1:
            raise InvalidBatch(
                "invalid",
                f"record count {header.record_count} does not match last offset delta "
                f"{header.last_offset_delta}",
            )
        headers.append(header)
        pos += size
    return headers


def iter_batches(
    buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each complete batch in ``buf[pos:end]``.

    Stops silently at a partial trailing batch (fetch responses may end with one). Does not
    check CRCs; use :func:`validate_batches` or :func:`check_crc` for that.
    """
    if end is None:
        end = len(buf)
    while end - pos >= HEADER_SIZE:
        header = read_header(buf, pos)
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + header.size > end:
            return
        yield pos, header
        pos += header.size


def check_crc(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    return compute_crc(buf, pos, header.size) == header.crc


def patch_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    _INT64.pack_into(buf, pos, base_offset)


def patch_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    _INT32.pack_into(buf, pos + 12, epoch)


def set_log_append_time(
    buf: bytearray | memoryview, pos: int, header: BatchHeader, timestamp_ms: int
) -> None:
    """Switch a batch to LogAppendTime at ``timestamp_ms`` and recompute its CRC.

    Kafka sets the timestamp-type attribute and overwrites maxTimestamp; records keep their
    deltas, and readers use maxTimestamp for every record of a LogAppendTime batch.
    """
    struct.pack_into(">h", buf, pos + 21, header.attributes | TIMESTAMP_TYPE_BIT)
    _INT64.pack_into(buf, pos + 35, timestamp_ms)
    _UINT32.pack_into(buf, pos + 17, compute_crc(buf, pos, header.size))
