"""The error the coordinator raises to answer a request with a Kafka error code."""

from __future__ import annotations

from ...protocol.errors import ErrorCode


class GroupError(Exception):
    """Answer the request (or the part of it at hand) with ``code``."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message or None
