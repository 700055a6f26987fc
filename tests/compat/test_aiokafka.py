"""aiokafka 0.14 against Moldau.

Covers: 10,000 records with keys, headers and explicit timestamps per compression codec
(none, gzip, snappy, lz4, zstd — aiokafka compresses through cramjam), with idempotence off
(aiokafka's default, Produce v7) and on (InitProducerId v0); every record fetched back by
offset, byte-exact and in order (Fetch v11), and after seeks; ListOffsets (v3)
earliest/latest/by timestamp through ``beginning_offsets``, ``end_offsets`` and
``offsets_for_times``; batches stored with the codec the client chose; LogAppendTime topics;
topic admin through AIOKafkaAdminClient (create, describe, alter configs that take effect,
delete); a consumer group that commits, survives a broker restart and resumes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import MessageSizeTooLargeError

from .conftest import unique_name
from .endpoint import KafkaEndpoint
from .records import (
    CODEC_IDS,
    IDEMPOTENCE_CASES,
    N_RECORDS,
    Produced,
    Rec,
    case_id,
    first_mismatch,
    make_records,
    now_ms,
    records_to_produce,
    stored_batches,
    timestamp_cases,
)

TIMEOUT = 30
T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT * 2))


async def _admin_call(bootstrap: str, fn: Any) -> Any:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=TIMEOUT * 1000)
    await admin.start()
    try:
        return await fn(admin)
    finally:
        await admin.close()


def create_topic(bootstrap: str, name: str, partitions: int = 1,
                 config: dict[str, str] | None = None) -> None:
    async def create(admin: AIOKafkaAdminClient) -> None:
        response = await admin.create_topics([NewTopic(name, partitions, 1,
                                                       topic_configs=config or {})])
        assert all(t[1] == 0 for t in response.topic_errors), response

    run(_admin_call(bootstrap, create))


async def _produce(bootstrap: str, topic: str, records: list[Rec], **config: Any) -> list[int]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20,
                                max_batch_size=256 * 1024, **config)
    await producer.start()
    try:
        futures = [
            await producer.send(topic, r.value, r.key, partition=0, headers=r.headers,
                                timestamp_ms=r.timestamp if r.timestamp >= 0 else None)
            for r in records
        ]
        await producer.flush()
        return [(await f).offset for f in futures]
    finally:
        await producer.stop()


def produce(bootstrap: str, topic: str, records: list[Rec], **config: Any) -> list[int]:
    return run(_produce(bootstrap, topic, records, **config))


async def _consume(bootstrap: str, topic: str, start: int, count: int) -> list[Any]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, start)
    out: list[Any] = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(out) < count and time.monotonic() < deadline:
            for msgs in (await consumer.getmany(timeout_ms=500, max_records=5000)).values():
                out.extend(msgs)
    finally:
        await consumer.stop()
    return out


def consume(bootstrap: str, topic: str, start: int, count: int) -> list[Rec]:
    msgs = run(_consume(bootstrap, topic, start, count))
    return [Rec(m.key, m.value, list(m.headers), m.timestamp, m.offset) for m in msgs]


@pytest.fixture(scope="module", params=IDEMPOTENCE_CASES, ids=case_id)
def produced(request: pytest.FixtureRequest, kafka_endpoint: KafkaEndpoint) -> Produced:
    codec, idempotent = request.param
    topic = unique_name(f"aio-{codec}-{'idem' if idempotent else 'plain'}")
    create_topic(kafka_endpoint.bootstrap, topic)
    base_ts, records = records_to_produce(topic)
    offsets = produce(kafka_endpoint.bootstrap, topic, records,
                      compression_type=None if codec == "none" else codec,
                      enable_idempotence=idempotent)
    return Produced(topic, codec, idempotent, base_ts, records, offsets)


def test_acknowledged_offsets_contiguous(produced: Produced) -> None:
    assert produced.offsets == list(range(N_RECORDS))


def test_fetch_back_byte_exact(produced: Produced, kafka_endpoint: KafkaEndpoint) -> None:
    got = consume(kafka_endpoint.bootstrap, produced.topic, 0, N_RECORDS)
    assert first_mismatch(got, produced.records) is None


def test_fetch_from_offsets(produced: Produced, kafka_endpoint: KafkaEndpoint) -> None:
    for start in (5555, N_RECORDS - 1):
        got = consume(kafka_endpoint.bootstrap, produced.topic, start, N_RECORDS - start)
        assert first_mismatch(got, produced.records[start:], first_offset=start) is None


def test_batches_stored_as_sent(produced: Produced, kafka_endpoint: KafkaEndpoint) -> None:
    if kafka_endpoint.log_dir is None:
        pytest.skip("endpoint exposes no log directory")
    batches = stored_batches(kafka_endpoint.log_dir, produced.topic)
    assert sum(h.record_count for h in batches) == N_RECORDS
    assert {h.compression for h in batches} == {CODEC_IDS[produced.codec]}
    if produced.idempotent:
        assert len({h.producer_id for h in batches}) == 1 and batches[0].producer_id >= 0
        assert [h.base_sequence for h in batches] == [h.base_offset for h in batches]
    else:
        assert {h.producer_id for h in batches} == {-1}


def test_list_offsets(produced: Produced, kafka_endpoint: KafkaEndpoint) -> None:
    async def ask() -> tuple[Any, Any, list[Any]]:
        consumer = AIOKafkaConsumer(bootstrap_servers=kafka_endpoint.bootstrap)
        await consumer.start()
        tp = TopicPartition(produced.topic, 0)
        try:
            first = await consumer.beginning_offsets([tp])
            last = await consumer.end_offsets([tp])
            by_time = [(await consumer.offsets_for_times({tp: ts}))[tp]
                       for ts, _ in timestamp_cases(produced.base_ts)]
        finally:
            await consumer.stop()
        return first[tp], last[tp], by_time

    first, last, by_time = run(ask())
    assert (first, last) == (0, N_RECORDS)
    for (_, want), answer in zip(timestamp_cases(produced.base_ts), by_time, strict=True):
        if want is None:
            assert answer is None
        else:
            assert (answer.offset, answer.timestamp) == (want, produced.base_ts + want)


def test_log_append_time(kafka_endpoint: KafkaEndpoint) -> None:
    topic = unique_name("aio-lat")
    create_topic(kafka_endpoint.bootstrap, topic,
                 config={"message.timestamp.type": "LogAppendTime"})
    old = now_ms() - 86_400_000
    records = make_records("lat", 500, base_ts=old)
    before = now_ms()
    produce(kafka_endpoint.bootstrap, topic, records, compression_type="zstd")
    after = now_ms()
    msgs = run(_consume(kafka_endpoint.bootstrap, topic, 0, 500))
    assert len(msgs) == 500
    assert {m.timestamp_type for m in msgs} == {1}  # LogAppendTime
    assert all(before - 1000 <= m.timestamp <= after + 1000 for m in msgs)
    assert [m.value for m in msgs] == [r.value for r in records]


def test_create_time_is_reported(kafka_endpoint: KafkaEndpoint) -> None:
    topic = unique_name("aio-ct")
    create_topic(kafka_endpoint.bootstrap, topic)
    produce(kafka_endpoint.bootstrap, topic, [Rec(b"k", b"v", [], 1_600_000_000_123)])
    msgs = run(_consume(kafka_endpoint.bootstrap, topic, 0, 1))
    assert [(m.timestamp_type, m.timestamp) for m in msgs] == [(0, 1_600_000_000_123)]


def test_topic_admin(kafka_endpoint: KafkaEndpoint) -> None:
    topic = unique_name("aio-admin")
    create_topic(kafka_endpoint.bootstrap, topic, 2, {"retention.ms": "3600000"})

    async def configs(admin: AIOKafkaAdminClient) -> dict[str, str]:
        [response] = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic)])
        [resource] = response.resources
        return {entry[0]: entry[1] for entry in resource[4]}

    async def scenario(admin: AIOKafkaAdminClient) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        [described] = await admin.describe_topics([topic])
        seen["partitions"] = sorted(p["partition"] for p in described["partitions"])
        seen["before"] = await configs(admin)
        [response] = await admin.alter_configs([ConfigResource(
            ConfigResourceType.TOPIC, topic, {"max.message.bytes": "2000"})])
        seen["alter_errors"] = [r[0] for r in response.resources]
        seen["after"] = await configs(admin)
        seen["cluster"] = await admin.describe_cluster()
        return seen

    seen = run(_admin_call(kafka_endpoint.bootstrap, scenario))
    assert seen["partitions"] == [0, 1]
    assert seen["before"]["retention.ms"] == "3600000"
    assert seen["alter_errors"] == [0]
    assert seen["after"]["max.message.bytes"] == "2000"
    assert seen["after"]["retention.ms"] == "604800000"  # AlterConfigs replaces the set
    assert {(b["node_id"], b["host"], b["port"]) for b in seen["cluster"]["brokers"]} == {
        (node, host, port) for node, (host, port) in kafka_endpoint.brokers.items()}

    with pytest.raises(MessageSizeTooLargeError):
        produce(kafka_endpoint.bootstrap, topic, [Rec(b"k", b"x" * 5000)])

    async def delete(admin: AIOKafkaAdminClient) -> list[str]:
        await admin.delete_topics([topic])
        return await admin.list_topics()

    assert topic not in run(_admin_call(kafka_endpoint.bootstrap, delete))


async def _group_read(bootstrap: str, group: str, topic: str, n: int,
                      commit: bool) -> tuple[list[Any], dict[int, int | None], set[int]]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    out: list[Any] = []
    try:
        deadline = time.monotonic() + TIMEOUT
        while len(out) < n and time.monotonic() < deadline:
            for msgs in (await consumer.getmany(timeout_ms=500,
                                                max_records=n - len(out))).values():
                out.extend(msgs)
        assigned = {tp.partition for tp in consumer.assignment()}
        committed: dict[int, int | None] = {}
        if commit:
            await consumer.commit()
            for p in (0, 1):
                committed[p] = await consumer.committed(TopicPartition(topic, p))
    finally:
        await consumer.stop()
    return out, committed, assigned


def test_group_commit_restart_resume(kafka_endpoint: KafkaEndpoint) -> None:
    if kafka_endpoint.restart is None:
        pytest.skip(f"endpoint {kafka_endpoint.name} cannot restart its broker")
    topic = unique_name("aio-group")
    create_topic(kafka_endpoint.bootstrap, topic, 2)
    produce_all = [Rec(f"k{i}".encode(), f"v{i}".encode()) for i in range(200)]

    async def fill() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=kafka_endpoint.bootstrap)
        await producer.start()
        try:
            for r in produce_all:
                await producer.send(topic, r.value, r.key)
            await producer.flush()
        finally:
            await producer.stop()

    run(fill())
    group = unique_name("aio-grp")
    first, committed, assigned = run(_group_read(kafka_endpoint.bootstrap, group, topic, 120,
                                                 True))
    assert len(first) == 120 and assigned == {0, 1}
    for p in (0, 1):
        seen = [m.offset for m in first if m.partition == p]
        assert committed[p] == (max(seen) + 1 if seen else None)

    kafka_endpoint.restart()

    stored = run(_admin_call(kafka_endpoint.bootstrap,
                             lambda admin: admin.list_consumer_group_offsets(group)))
    assert {tp.partition: meta.offset for tp, meta in stored.items()} == {
        p: o for p, o in committed.items() if o is not None}
    rest, _, _ = run(_group_read(kafka_endpoint.bootstrap, group, topic, 80, False))
    assert len(rest) == 80
    assert {(m.partition, m.offset) for m in first}.isdisjoint(
        {(m.partition, m.offset) for m in rest})
    assert {m.value for m in first + rest} == {r.value for r in produce_all}
