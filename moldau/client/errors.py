"""Exceptions raised by the client.

Every message names what failed (which broker address, which config key, which partition)
and, where there is one, how to fix it. Broker error codes are kio's ``ErrorCode``, so
``BrokerError.code.retriable`` is Kafka's own classification.

The errors of a connection (``ClientError``, ``KafkaConnectionError``, ``NotKafkaError``,
``KafkaTimeoutError``, ``UnsupportedVersionError``, ``BrokerError``) are defined in
:mod:`moldau.wire.errors`, which the broker's own outbound connections share, and re-exported
here.
"""

from __future__ import annotations

from moldau.protocol.errors import ErrorCode
from moldau.wire.errors import (
    BrokerError,
    ClientError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NotKafkaError,
    UnsupportedVersionError,
)

__all__ = [
    "BrokerError",
    "ClientError",
    "ConfigError",
    "ErrorCode",
    "KafkaConnectionError",
    "KafkaTimeoutError",
    "NoBrokersAvailable",
    "NotKafkaError",
    "OffsetOutOfRangeError",
    "ProducerFenced",
    "RecordCorruptError",
    "TransactionAbortableError",
    "TransactionAbortedError",
    "TransactionStateError",
    "UnsupportedVersionError",
]


class ConfigError(ClientError, ValueError):
    """A configuration key or value that the client does not accept."""


class NoBrokersAvailable(ClientError):
    """None of the bootstrap or known broker addresses answered."""

    retriable = True


class RecordCorruptError(ClientError):
    """A fetched record batch failed its CRC check or does not decode."""


class OffsetOutOfRangeError(BrokerError):
    """A fetch position is outside the partition's log and ``auto.offset.reset`` is none."""

    def __init__(self, partitions: dict[tuple[str, int], int]) -> None:
        listing = ", ".join(f"{t}-{p} at {o}" for (t, p), o in sorted(partitions.items()))
        super().__init__(
            ErrorCode.offset_out_of_range,
            "set auto.offset.reset to earliest or latest, or seek() to a valid offset",
            listing,
        )
        self.partitions = partitions


class ProducerFenced(BrokerError):
    """The producer's id/epoch was fenced by a newer producer; it cannot continue."""


class TransactionStateError(ClientError):
    """A transactional call made in a state that does not allow it (e.g. send() before
    begin_transaction(), commit_transaction() after a fatal error)."""


class TransactionAbortableError(ClientError):
    """The current transaction failed and can only be aborted: call abort_transaction(),
    then begin a new one. ``cause`` is the error that made it abortable."""

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.cause = cause


class TransactionAbortedError(ClientError):
    """A record that was still unsent when its transaction was aborted."""


def raise_for_code(code: int, context: str = "", message: str | None = None) -> None:
    """Raise :class:`BrokerError` when ``code`` is not 0."""
    if code:
        raise BrokerError(code, message or "", context)
