"""``GET /consumers/{group}/instances/{name}/records``: one read of a consumer instance.

As Confluent's read task: it polls until ``consumer.request.timeout.ms`` passed (the
request's ``timeout`` and the instance's own setting may only shorten it), or the records
add up to at least ``fetch.min.bytes`` (instance setting, else the proxy's; -1 = never), or
the next record would reach ``max_bytes`` (capped by ``consumer.request.max.bytes``). Sizes
are key plus value bytes as stored in Kafka. A new member's first reads may be empty while
the group assigns its partitions; read again.

Records the answer could not hold are not kept: the instance's position moves back to the
first of them, so the next read starts there (and a commit of "everything read" commits
only what was answered). A record that cannot be read in the instance's format ends the
answer before it; when it is the first, the answer is 500 with 50002 naming it (seek past
it to go on).
"""

from __future__ import annotations

import time
from typing import Any

from moldau.client import Consumer, ConsumerRecord, TopicPartition
from moldau.client.errors import ClientError
from moldau.http import HttpError
from moldau.registry.client import SchemaRegistryError
from moldau.registry.serde import SerializationError

from .. import errors
from ..config import RestConfig
from .instances import POLL_RECORDS, ConsumerInstance

UNREADABLE = (SerializationError, SchemaRegistryError, OSError, ValueError, TypeError)


def _limits(instance: ConsumerInstance, config: RestConfig, timeout_ms: int,
            max_bytes: int) -> tuple[float, int, float]:
    """(seconds to wait, byte limit, minimum bytes) of one read."""
    settings = instance.settings
    wait_ms = (settings.request_timeout_ms if settings.request_timeout_ms is not None
               else config["consumer.request.timeout.ms"])
    if timeout_ms > 0:
        wait_ms = min(wait_ms, timeout_ms)
    limit = config["consumer.request.max.bytes"]
    if max_bytes > 0:
        limit = min(limit, max_bytes)
    min_bytes = (settings.fetch_min_bytes if settings.fetch_min_bytes is not None
                 else config["fetch.min.bytes"])
    return max(0, wait_ms) / 1000, limit, float("inf") if min_bytes < 0 else min_bytes


def _rewind(consumer: Consumer, left: list[ConsumerRecord]) -> None:
    """Move each partition of ``left`` back to its first record there."""
    first: dict[TopicPartition, int] = {}
    for record in left:
        first.setdefault(TopicPartition(record.topic, record.partition), record.offset)
    have = consumer.assignment()
    for tp, offset in first.items():
        if tp in have:
            consumer.seek(tp, offset)


def _check_reading(consumer: Consumer) -> None:
    group = consumer.group
    if not consumer.assignment() and (group is None or not group.subscribed):
        raise errors.illegal_state("Consumer is not subscribed to any topics or assigned any "
                                   "partitions")


async def read(instance: ConsumerInstance, config: RestConfig, timeout_ms: int,
               max_bytes: int) -> list[dict[str, Any]]:
    """The records of one read (see the module docstring)."""
    consumer = await instance.client()
    _check_reading(consumer)
    wait_s, limit, min_bytes = _limits(instance, config, timeout_ms, max_bytes)
    deadline = time.monotonic() + wait_s
    out: list[dict[str, Any]] = []
    size = 0
    while True:
        left = max(0.0, deadline - time.monotonic())
        try:
            batch = await consumer.poll(left, max_records=POLL_RECORDS)
        except (ClientError, OSError) as exc:
            if out:
                return out
            raise errors.kafka_error(exc) from exc
        for index, record in enumerate(batch):
            record_size = len(record.key or b"") + len(record.value or b"")
            if size + record_size >= limit:
                _rewind(consumer, batch[index:])
                return out
            try:
                out.append(await _record(instance, record))
            except UNREADABLE as exc:
                _rewind(consumer, batch[index:])
                if out:
                    return out
                raise HttpError(500, errors.KAFKA_ERROR,
                                f"Kafka error: cannot read the record at {record.topic}-"
                                f"{record.partition} offset {record.offset} as "
                                f"{instance.format}: {exc}") from None
            size += record_size
        if size >= min_bytes or time.monotonic() >= deadline:
            return out


async def _record(instance: ConsumerInstance, record: ConsumerRecord) -> dict[str, Any]:
    decode = instance.decoder.decode
    return {"topic": record.topic,
            "key": await decode(record.topic, record.key, True),
            "value": await decode(record.topic, record.value, False),
            "partition": record.partition, "offset": record.offset}
