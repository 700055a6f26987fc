"""Produce of API v2: ``POST /topics/{topic}`` and ``POST /topics/{topic}/partitions/{p}``.

The body is ``{"records": [{"key": .., "value": .., "partition": ..}], "key_schema": ..,
"key_schema_id": .., "value_schema": .., "value_schema_id": ..}`` in the embedded format its
``Content-Type`` names (:mod:`.formats`). The answer lists one entry per record, in order:
``{"partition", "offset", "error_code", "error"}`` (error_code 50002 for a Kafka error, 50003
when retrying may succeed; partition and offset null then), plus ``key_schema_id`` and
``value_schema_id``. A topic that does not exist is created when the broker auto-creates
topics (as the Java producer's metadata request makes it), else 40401.

Back-pressure: the records of all produce requests in flight may hold at most
``producer.buffer.memory`` bytes (the producer's ``buffer.memory``, 32 MiB); a request
beyond it waits, up to ``max.block.ms``, for earlier ones to be acknowledged, then its
records fail with 50003 as the Java producer's ``send`` fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from aiohttp import web

from moldau.client import Producer, RecordMetadata
from moldau.client.errors import KafkaTimeoutError

from .. import errors
from ..context import CONTEXT_KEY, RestContext
from ..media import json_answer, produce_format, read_body
from .formats import SchemaCache, SchemaSide, encode_binary, encode_json, needs_schema

Encoded = tuple[int | None, bytes | None, bytes | None]


class ByteBudget:
    """Bytes of records in flight, bounded; ``acquire`` waits for room (back-pressure)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._freed = asyncio.Condition()

    async def acquire(self, size: int, timeout: float) -> bool:
        """Take ``size`` bytes (a request larger than the limit waits for an idle budget);
        False after ``timeout`` seconds without room."""
        size = min(size, self.limit)
        async with self._freed:
            try:
                async with asyncio.timeout(timeout):
                    await self._freed.wait_for(lambda: self.used + size <= self.limit)
            except TimeoutError:
                return False
            self.used += size
            return True

    async def release(self, size: int) -> None:
        async with self._freed:
            self.used -= min(size, self.limit)
            self._freed.notify_all()


def _records(body: Any) -> list[dict[str, Any]]:
    if not isinstance(body, dict):
        raise errors.unprocessable("The request body must be a JSON object with records")
    records = body.get("records")
    if not isinstance(records, list) or not records:
        raise errors.unprocessable("records may not be empty")
    for record in records:
        if not isinstance(record, dict):
            raise errors.unprocessable("each record must be a JSON object")
        partition = record.get("partition")
        if partition is not None and (isinstance(partition, bool)
                                      or not isinstance(partition, int) or partition < 0):
            raise errors.unprocessable(f"partition must be an integer >= 0, not {partition!r}")
    return records


def _where(record: dict[str, Any], partition: int | None) -> int | None:
    """The partition of one record: the path's, else the record's own (None: partitioner)."""
    return partition if partition is not None else record.get("partition")


async def _schema_side(cache: SchemaCache, fmt: str, topic: str, body: dict[str, Any],
                       records: list[dict[str, Any]], is_key: bool) -> SchemaSide | None:
    part = "key" if is_key else "value"
    text, schema_id = body.get(f"{part}_schema"), body.get(f"{part}_schema_id")
    if text is None and schema_id is None:
        if any(r.get(part) is not None for r in records):
            if is_key:
                raise errors.unprocessable("Request includes keys but does not include key "
                                           "schema", errors.KEY_SCHEMA_MISSING)
            raise errors.unprocessable("Request includes values but does not include value "
                                       "schema", errors.VALUE_SCHEMA_MISSING)
        return None
    return await cache.side(fmt, topic, is_key, text, schema_id)


async def _encode(cache: SchemaCache, fmt: str, topic: str,
                  body: dict[str, Any], records: list[dict[str, Any]],
                  partition: int | None) -> tuple[list[Encoded], int | None, int | None]:
    """Every record's (partition, key bytes, value bytes) and the schema ids used."""
    if not needs_schema(fmt):
        encode = encode_binary if fmt == "binary" else encode_json
        return ([(_where(r, partition), encode(r.get("key")), encode(r.get("value")))
                 for r in records], None, None)
    key_side = await _schema_side(cache, fmt, topic, body, records, True)
    value_side = await _schema_side(cache, fmt, topic, body, records, False)
    out = [(_where(r, partition),
            key_side.encode(r.get("key")) if key_side else None,
            value_side.encode(r.get("value")) if value_side else None) for r in records]
    return (out, key_side.schema_id if key_side else None,
            value_side.schema_id if value_side else None)


def _offset(result: RecordMetadata | BaseException) -> dict[str, Any]:
    if isinstance(result, BaseException):
        return {"partition": None, "offset": None, "error_code": errors.kafka_code(result),
                "error": str(result) or type(result).__name__}
    return {"partition": result.partition, "offset": result.offset, "error_code": None,
            "error": None}


async def _send(producer: Producer, topic: str, encoded: Sequence[Encoded]
                ) -> list[RecordMetadata | BaseException]:
    futures: list[asyncio.Future[RecordMetadata] | BaseException] = []
    for partition, key, value in encoded:
        try:
            futures.append(producer.send(topic, value, key=key, partition=partition))
        except Exception as exc:  # a closed or failed producer: this record's error
            futures.append(exc)
    return [item if isinstance(item, BaseException) else await _result(item)
            for item in futures]


async def _result(future: asyncio.Future[RecordMetadata]) -> RecordMetadata | BaseException:
    try:
        return await future
    except Exception as exc:
        return exc


async def produce(request: web.Request, partition: int | None) -> web.Response:
    """Produce the body's records to the path's topic (and partition)."""
    ctx = request.app[CONTEXT_KEY]
    state: ProduceState = request.app[PRODUCE_KEY]
    topic = request.match_info["topic"]
    fmt = produce_format(request)
    body = await read_body(request)
    records = _records(body)
    # As Confluent's: the records are serialized (schemas registered) before the topic is
    # looked up, so a bad request creates no topic.
    encoded, key_id, value_id = await _encode(state.schemas, fmt, topic, body, records,
                                              partition)
    info = await ctx.topic(topic, create=True)
    if any(p is not None and p not in info.partitions for p, _k, _v in encoded):
        raise errors.partition_not_found()
    producer = await ctx.producer()
    size = sum(len(k or b"") + len(v or b"") + 64 for _p, k, v in encoded)
    results: list[RecordMetadata | BaseException]
    if await state.budget.acquire(size, producer.config["max.block.ms"] / 1000):
        try:
            results = await _send(producer, topic, encoded)
        finally:
            await state.budget.release(size)
    else:
        late = KafkaTimeoutError("Failed to allocate memory within the configured max "
                                 "blocking time (producer buffer.memory is in use)")
        results = [late] * len(encoded)
    answer = {"offsets": [_offset(r) for r in results], "key_schema_id": key_id,
              "value_schema_id": value_id}
    return json_answer(request, answer)


class ProduceState:
    """What produce requests share: the byte budget and the resolved schemas."""

    def __init__(self, ctx: RestContext) -> None:
        limit = int(ctx.config.client("producer").get("buffer.memory", 33554432))
        self.budget = ByteBudget(limit)
        self.schemas = SchemaCache(ctx.registry)


PRODUCE_KEY: web.AppKey[ProduceState] = web.AppKey("moldau.rest.v2.produce", ProduceState)
