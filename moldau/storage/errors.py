"""Exceptions raised by the storage layer, each carrying the Kafka error code to answer with."""

from __future__ import annotations

from moldau.protocol.errors import ErrorCode, KafkaError


class OffsetOutOfRange(KafkaError):
    """A read or offset lookup outside ``[log_start_offset, log_end_offset]``."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int, what: str) -> None:
        super().__init__(
            ErrorCode.offset_out_of_range,
            f"offset {offset} is out of range for {what}: valid offsets are "
            f"{log_start_offset}..{log_end_offset}",
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class KafkaStorageError(KafkaError):
    """A disk failure; the log is offline until the broker restarts (Kafka's behaviour)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.kafka_storage_error, message)


class LogDirError(OSError):
    """A log dir that cannot be used at start-up (missing, not a directory, read-only, a bad
    checkpoint file). The message names the path, what is wrong and how to fix it; it is an
    ``OSError`` so ``moldau serve`` reports it as a start-up failure without a traceback."""

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = errno

    def __str__(self) -> str:
        return self.message


class RecordTooLarge(KafkaError):
    """A batch bigger than ``max.message.bytes`` (MESSAGE_TOO_LARGE)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.message_too_large, message)


class RecordBatchTooLarge(KafkaError):
    """A batch that cannot fit in a segment (``segment.bytes``) (RECORD_LIST_TOO_LARGE)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.record_list_too_large, message)


class ProducerStateError(KafkaError):
    """Idempotence/transaction check failed: OUT_OF_ORDER_SEQUENCE_NUMBER,
    INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE or TRANSACTION_COORDINATOR_FENCED."""


class CorruptRecord(KafkaError):
    """Batches that fail validation (CORRUPT_MESSAGE), e.g. in a follower append."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.corrupt_message, message)


class InvalidRecord(KafkaError):
    """A batch a client may not write, e.g. a control batch (INVALID_RECORD)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.invalid_record, message)


class UnexpectedAppendOffset(KafkaError):
    """A follower append whose first offset is below the log end offset."""

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(ErrorCode.unknown_server_error, message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class InvalidLogConfig(KafkaError):
    """A topic config value that is not valid (INVALID_CONFIG)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.invalid_config, message)


class CorruptIndex(Exception):
    """An index file that fails its sanity check; the loader rebuilds it."""


class CorruptSnapshot(Exception):
    """A producer-state snapshot that fails its CRC or layout check; the loader drops it."""
