"""Kafka error codes and the exceptions the protocol layer raises.

Error codes are kio's ``ErrorCode`` (generated from Kafka's own error list), so names and
numbers cannot drift from Kafka's.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "ForeignProtocol", "FrameTooLarge", "InvalidRequest", "KafkaError",
           "ProtocolError", "RecordDecodeError", "error_message"]

# The longest error message a response carries, in characters (at most 4 bytes each in UTF-8,
# well inside the 32,767 bytes of a non-flexible string). Messages quote what the client sent
# (topic and group names of up to 32,767 bytes, more in flexible requests, config values),
# so without a bound a response could be impossible to encode.
MAX_ERROR_MESSAGE = 1000
_KEEP_TAIL = 300  # the end of a message usually says how to fix the problem: keep it
_CUT = " [... {} characters left out ...] "


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


def error_message(text: str | None) -> str | None:
    """``text`` as a response's error message: at most :data:`MAX_ERROR_MESSAGE` characters.

    A longer message loses its middle (most often a name the client sent), marked with how
    many characters were left out; its start and its end, which usually says what to change,
    are kept.
    """
    if text is None or len(text) <= MAX_ERROR_MESSAGE:
        return text
    # Sized for the longest count, so the message never exceeds the bound.
    head = MAX_ERROR_MESSAGE - _KEEP_TAIL - len(_CUT.format(len(text)))
    cut = len(text) - head - _KEEP_TAIL
    return f"{text[:head]}{_CUT.format(cut)}{text[-_KEEP_TAIL:]}"
