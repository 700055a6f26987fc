"""Exceptions raised by the client.

Every message names what failed (which broker address, which config key, which partition)
and, where there is one, how to fix it. Broker error codes are kio's ``ErrorCode``, so
``BrokerError.code.retriable`` is Kafka's own classification.
"""

from __future__ import annotations

from moldau.protocol.errors import ErrorCode, KafkaError

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
    "UnsupportedVersionError",
]


class ClientError(Exception):
    """Base of every error the client raises on its own account."""

    retriable: bool = False


class ConfigError(ClientError, ValueError):
    """A configuration key or value that the client does not accept."""


class KafkaConnectionError(ClientError, ConnectionError):
    """A connection to one broker address could not be made or was lost.

    ``address`` is the ``host:port`` that failed and ``reason`` one of ``dns``, ``refused``,
    ``timeout``, ``closed``, ``protocol`` or ``os``.
    """

    retriable = True

    def __init__(self, address: str, reason: str, message: str) -> None:
        super().__init__(message)
        self.address = address
        self.reason = reason


class NotKafkaError(KafkaConnectionError):
    """The address answered in another protocol (HTTP, TLS, SSH): a wrong address or port,
    which retrying does not fix."""

    retriable = False


class NoBrokersAvailable(ClientError):
    """None of the bootstrap or known broker addresses answered."""

    retriable = True


class KafkaTimeoutError(ClientError, TimeoutError):
    """An operation did not complete within its time limit."""

    retriable = True


class UnsupportedVersionError(ClientError):
    """The broker supports no version of an API that this client can speak."""


class RecordCorruptError(ClientError):
    """A fetched record batch failed its CRC check or does not decode."""


class BrokerError(KafkaError, ClientError):
    """A broker answered with a non-zero error code.

    ``code`` is the ``ErrorCode``; ``retriable`` follows Kafka's classification of the code.
    """

    def __init__(self, code: ErrorCode | int, message: str = "", context: str = "") -> None:
        code = ErrorCode(code)
        text = code.name.upper()
        if context:
            text = f"{context}: {text}"
        if message:
            text = f"{text} ({message})"
        super().__init__(code, text)
        self.context = context

    @property
    def retriable(self) -> bool:  # type: ignore[override]
        return bool(self.code.retriable)


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


def raise_for_code(code: int, context: str = "", message: str | None = None) -> None:
    """Raise :class:`BrokerError` when ``code`` is not 0."""
    if code:
        raise BrokerError(code, message or "", context)
