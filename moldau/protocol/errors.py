"""Kafka error codes and the exceptions the protocol layer raises.

Error codes are kio's ``ErrorCode`` (generated from Kafka's own error list), so names and
numbers cannot drift from Kafka's.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "ForeignProtocol", "FrameTooLarge", "InvalidRequest", "KafkaError",
           "ProtocolError", "RecordDecodeError"]


class ProtocolError(Exception):
    """The bytes on a connection cannot be understood; the connection must be closed."""


class FrameTooLarge(ProtocolError):
    """A size prefix exceeds the configured limit (``socket.request.max.bytes``)."""


class ForeignProtocol(ProtocolError):
    """The first bytes of a connection belong to another protocol (HTTP, TLS, SSH).

    ``kind`` is ``http-response``, ``http-request``, ``tls`` or ``ssh``; ``description``
    says it in words ("an HTTP response"); ``head`` holds the first bytes seen.
    """

    def __init__(self, kind: str, description: str, head: bytes) -> None:
        super().__init__(f"the peer sent {description} ({head!r}), not the Kafka protocol")
        self.kind = kind
        self.description = description
        self.head = head


class InvalidRequest(ProtocolError):
    """A request frame whose header or body does not decode."""


class RecordDecodeError(ValueError):
    """A batch's records section does not decode (corrupt or truncated)."""


class KafkaError(Exception):
    """An error that maps to a Kafka error code in a response."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message
