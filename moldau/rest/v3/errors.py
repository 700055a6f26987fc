"""API v3 errors: ``{"error_code": ..., "message": ...}`` in ``application/json``.

The codes follow Confluent's REST Proxy (its ``KafkaExceptionMapper``, ``StatusCodeException``
and JAX-RS defaults):

* unknown cluster, broker, partition, config, consumer group, consumer: HTTP 404, error code
  404 (``Cluster X cannot be found.``, ``HTTP 404 Not Found``);
* unknown topic (Kafka's UNKNOWN_TOPIC_OR_PARTITION): 404 / 40403 ``This server does not host
  this topic-partition.``;
* bad requests of Kafka (topic exists, invalid partitions / replication factor / config /
  request / topic name, policy violation, unsupported version): 400 / 40002 with Kafka's
  message; a request body that does not parse or lacks a field: 400 / 400;
* wrong ``Content-Type``: 415 / 415; wrong ``Accept``: 406 / 406;
* authorization 403 / 40301, authentication 401 / 40101, throttled 429 / 42901, broker not
  available 503 / 50302, other retriable Kafka errors 500 / 50003, other Kafka errors
  500 / 50002, anything unexpected 500 / 500 (logged here, never a traceback to the client).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from moldau.client import AdminError, BrokerError, ClientError, KafkaTimeoutError
from moldau.http import HttpError
from moldau.protocol.errors import ErrorCode

log = logging.getLogger("moldau.rest.v3")

JSON = "application/json"

#: Confluent's codes (rest-utils ``KafkaExceptionMapper``)
KAFKA_BAD_REQUEST = 40002
UNKNOWN_TOPIC_OR_PARTITION = 40403
KAFKA_ERROR = 50002
KAFKA_RETRIABLE_ERROR = 50003

_BAD_REQUEST = frozenset({
    ErrorCode.topic_already_exists, ErrorCode.invalid_replication_factor,
    ErrorCode.invalid_partitions, ErrorCode.invalid_request, ErrorCode.policy_violation,
    ErrorCode.invalid_config, ErrorCode.topic_deletion_disabled,
    ErrorCode.unsupported_version, ErrorCode.security_disabled, ErrorCode.unknown_server_error,
    ErrorCode.invalid_topic_exception, ErrorCode.invalid_replica_assignment,
    ErrorCode.non_empty_group,
})
_FORBIDDEN = frozenset({
    ErrorCode.topic_authorization_failed, ErrorCode.group_authorization_failed,
    ErrorCode.cluster_authorization_failed, ErrorCode.transactional_id_authorization_failed,
})

#: Kafka's exception messages for the codes a proxy user meets most
_KAFKA_MESSAGES = {
    ErrorCode.unknown_topic_or_partition: "This server does not host this topic-partition.",
    ErrorCode.group_id_not_found: "The group id does not exist.",
}


class V3Error(HttpError):
    """An error answered as ``status`` with ``{"error_code": code, "message": message}``."""


def topic_or_partition_missing() -> V3Error:
    """404 / 40403, Kafka's UnknownTopicOrPartitionException message."""
    return V3Error(404, UNKNOWN_TOPIC_OR_PARTITION,
                   _KAFKA_MESSAGES[ErrorCode.unknown_topic_or_partition])


def not_found(message: str = "HTTP 404 Not Found") -> V3Error:
    """404 / 404 (JAX-RS NotFoundException)."""
    return V3Error(404, 404, message)


def bad_request(detail: str) -> V3Error:
    """400 / 400 ``Bad Request: <detail>`` (Confluent's BadRequestException)."""
    return V3Error(400, 400, f"Bad Request: {detail}")


def _broker_message(exc: BrokerError) -> str:
    """The broker's own error message inside a BrokerError's text (``ctx: NAME (message)``)."""
    text = str(exc)
    marker = f"{exc.code.name.upper()} ("
    start = text.find(marker)
    if start < 0 or not text.endswith(")"):
        return ""
    return text[start + len(marker):-1]


def from_broker_error(exc: BrokerError) -> V3Error:
    """The REST error for a Kafka error code, as Confluent's KafkaExceptionMapper maps the
    Java exception of that code."""
    code = exc.code
    message = (_broker_message(exc) or _KAFKA_MESSAGES.get(code)
               or code.name.replace("_", " ").capitalize() + ".")
    if code == ErrorCode.unknown_topic_or_partition:
        return topic_or_partition_missing()
    if code in _BAD_REQUEST:
        return V3Error(400, KAFKA_BAD_REQUEST, message)
    if code in _FORBIDDEN:
        return V3Error(403, 40301, message)
    if code == ErrorCode.sasl_authentication_failed:
        return V3Error(401, 40101, message)
    if code == ErrorCode.throttling_quota_exceeded:
        return V3Error(429, 42901, message)
    if code == ErrorCode.broker_not_available:
        return V3Error(503, 50302, message)
    if code.retriable:
        return V3Error(500, KAFKA_RETRIABLE_ERROR, message)
    return V3Error(500, KAFKA_ERROR, message)


def from_exception(exc: BaseException) -> V3Error:
    """Any failure of a v3 operation as a REST error (unexpected ones are logged)."""
    if isinstance(exc, HttpError):
        return V3Error(exc.status, exc.error_code, exc.message)
    if isinstance(exc, AdminError) and exc.errors:
        first = next(iter(exc.errors.values()))
        if isinstance(first, BrokerError):
            return from_broker_error(first)
    if isinstance(exc, BrokerError):
        return from_broker_error(exc)
    if isinstance(exc, KafkaTimeoutError | ClientError) and getattr(exc, "retriable", False):
        return V3Error(500, KAFKA_RETRIABLE_ERROR, str(exc))
    if isinstance(exc, ClientError):
        return V3Error(500, KAFKA_ERROR, str(exc))
    log.error("v3 request failed", exc_info=exc)
    return V3Error(500, 500, "Internal Server Error")


def body(error: V3Error) -> dict[str, Any]:
    """The JSON body of ``error``."""
    return {"error_code": error.error_code, "message": error.message}


def json_response(data: Any, status: int = 200,
                  headers: dict[str, str] | None = None) -> web.Response:
    """``data`` as compact JSON, ``application/json``."""
    return web.Response(status=status, body=json.dumps(data, separators=(",", ":")).encode(),
                        content_type=JSON, headers=headers)


def error_response(error: V3Error) -> web.Response:
    """The JSON error answer of ``error``."""
    return json_response(body(error), error.status)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def endpoint(handler: Handler) -> Handler:
    """Wrap a v3 handler: every failure becomes a JSON error answer in ``application/json``
    (whatever type the application negotiated for its other APIs)."""

    @functools.wraps(handler)
    async def wrapped(request: web.Request) -> web.StreamResponse:
        """The handler, its failures answered as JSON errors."""
        try:
            return await handler(request)
        except web.HTTPException:
            raise
        except Exception as exc:
            return error_response(from_exception(exc))

    return wrapped
