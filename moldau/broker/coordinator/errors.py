"""Errors a coordinator answers with, and how a failed append to its log maps to them."""

from __future__ import annotations

from ...protocol.errors import ErrorCode


class CoordinatorError(Exception):
    """Answer the request (or the part of it at hand) with ``code``."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message or None


# How Kafka maps a failed append to a coordinator's partition to what its clients see (the
# same table for groups and transactions: CoordinatorRuntime / GroupMetadataManager).
_APPEND_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
    ErrorCode.invalid_fetch_size: ErrorCode.unknown_server_error,
}
# An offset commit too large for the log is the client's to fix (Kafka's storeOffsets).
_COMMIT_ERRORS = {
    ErrorCode.message_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.record_list_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.invalid_fetch_size: ErrorCode.invalid_commit_offset_size,
}


def append_error(code: int, *, commit: bool = False) -> ErrorCode:
    """The client-facing error for an append that failed with ``code`` (``commit``: the
    append held offset commits). Producer-state errors (INVALID_PRODUCER_EPOCH,
    TRANSACTION_COORDINATOR_FENCED) pass through unchanged."""
    error = ErrorCode(code)
    if commit and error in _COMMIT_ERRORS:
        return _COMMIT_ERRORS[error]
    return _APPEND_ERRORS.get(error, error)
