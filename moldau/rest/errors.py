"""Confluent REST Proxy error codes, and Kafka client failures turned into them.

Every error is answered as ``{"error_code": ..., "message": ...}`` (see
:mod:`moldau.http.errors`); the codes are Confluent's (``io.confluent.kafkarest.Errors``):
the first three digits are the HTTP status.
"""

from __future__ import annotations

from moldau.client.admin_types import AdminError
from moldau.client.errors import BrokerError, ClientError
from moldau.http import HttpError
from moldau.protocol.errors import ErrorCode

TOPIC_NOT_FOUND = 40401
PARTITION_NOT_FOUND = 40402
CONSUMER_INSTANCE_NOT_FOUND = 40403
LEADER_NOT_AVAILABLE = 40404
CONSUMER_FORMAT_MISMATCH = 40601
CONSUMER_ALREADY_SUBSCRIBED = 40901
CONSUMER_ALREADY_EXISTS = 40902
ILLEGAL_STATE = 40903
KEY_SCHEMA_MISSING = 42201
VALUE_SCHEMA_MISSING = 42202
JSON_CONVERSION = 42203
INVALID_CONSUMER_CONFIG = 42204
INVALID_SCHEMA = 42205
SERIALIZATION = 42207
UNPROCESSABLE = 422
KAFKA_ERROR = 50002
KAFKA_RETRIABLE_ERROR = 50003
NO_CONSUMER_AVAILABLE = 50301


def topic_not_found() -> HttpError:
    return HttpError(404, TOPIC_NOT_FOUND, "Topic not found.")


def partition_not_found() -> HttpError:
    return HttpError(404, PARTITION_NOT_FOUND, "Partition not found.")


def instance_not_found() -> HttpError:
    return HttpError(404, CONSUMER_INSTANCE_NOT_FOUND, "Consumer instance not found.")


def format_mismatch() -> HttpError:
    return HttpError(406, CONSUMER_FORMAT_MISMATCH,
                     "The requested embedded data format does not match the deserializer "
                     "for this consumer instance")


def already_exists() -> HttpError:
    return HttpError(409, CONSUMER_ALREADY_EXISTS,
                     "Consumer with specified consumer ID already exists in the specified "
                     "consumer group.")


def too_many_instances(count: int) -> HttpError:
    """503 with Confluent's "pool exhausted, retry" code: ``consumer.max.instances`` reached."""
    return HttpError(503, NO_CONSUMER_AVAILABLE,
                     f"Too many consumer instances ({count}, consumer.max.instances); retry "
                     "once idle ones expired, or delete instances no longer used")


def illegal_state(message: str) -> HttpError:
    return HttpError(409, ILLEGAL_STATE, f"Illegal state: {message}")


def unprocessable(message: str, code: int = UNPROCESSABLE) -> HttpError:
    """422: a body that parsed but does not say something valid."""
    return HttpError(422, code, message)


def bad_request(message: str) -> HttpError:
    return HttpError(400, 400, message)


def is_retriable(exc: BaseException) -> bool:
    """Kafka's classification: retrying the same operation may succeed."""
    if isinstance(exc, AdminError):
        return all(err.retriable for err in exc.errors.values())
    if isinstance(exc, TimeoutError | ConnectionError) and not isinstance(exc, ClientError):
        return True
    return bool(getattr(exc, "retriable", False))


def kafka_code(exc: BaseException) -> int:
    """50003 for a retriable Kafka failure, 50002 otherwise (per-record produce errors)."""
    return KAFKA_RETRIABLE_ERROR if is_retriable(exc) else KAFKA_ERROR


def kafka_error(exc: BaseException) -> HttpError:
    """A failed Kafka operation as Confluent answers it: 404s for unknown topics and
    partitions, 500 with 50003 (retriable) or 50002 otherwise."""
    causes = list(exc.errors.values()) if isinstance(exc, AdminError) else [exc]
    if causes and all(isinstance(c, BrokerError)
                      and c.code == ErrorCode.unknown_topic_or_partition for c in causes):
        return topic_not_found()
    if is_retriable(exc):
        return HttpError(500, KAFKA_RETRIABLE_ERROR, f"Retriable Kafka error: {exc}")
    return HttpError(500, KAFKA_ERROR, f"Kafka error: {exc}")


KAFKA_FAILURES = (ClientError, OSError, TimeoutError)
