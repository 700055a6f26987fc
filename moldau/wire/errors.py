"""Errors of the client side of a Kafka connection, whoever opens it (a client, a tool, or a
broker talking to another broker).

:mod:`moldau.client.errors` re-exports these classes, so client code catches the same types
as before the connection moved here. Every message names the address that failed and the
cause; broker error codes are kio's ``ErrorCode``, so ``BrokerError.code.retriable`` is
Kafka's own classification.
"""

from __future__ import annotations

from moldau.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "BrokerError",
    "ClientError",
    "KafkaConnectionError",
    "KafkaTimeoutError",
    "NotKafkaError",
    "UnsupportedVersionError",
]


class ClientError(Exception):
    """Base of every error the client raises on its own account."""

    retriable: bool = False


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


class KafkaTimeoutError(ClientError, TimeoutError):
    """An operation did not complete within its time limit."""

    retriable = True


class UnsupportedVersionError(ClientError):
    """The broker supports no version of an API that this client can speak."""


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
