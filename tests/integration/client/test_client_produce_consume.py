"""Produce with every codec and acks setting, read back byte-exact, against each peer."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from moldau.client import (
    AdminClient,
    Consumer,
    KafkaTimeoutError,
    NewTopic,
    OffsetOutOfRangeError,
    Producer,
    TopicPartition,
)
from moldau.client.partitioner import partition_for_key
from moldau.protocol.api_keys import ApiKey

from .conftest import require_apis, topic_name
from .peers import Peer

pytestmark = pytest.mark.timeout(120)


async def create(peer: Peer, topic: str, partitions: int = 1) -> None:
    async with AdminClient({"bootstrap.servers": peer.bootstrap}) as admin:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
        await admin.cluster.wait_for_topics([topic], 10000)


async def consume_all(peer: Peer, tps: list[TopicPartition], count: int,
                      **config: Any) -> list[Any]:
    records: list[Any] = []
    async with Consumer({"bootstrap.servers": peer.bootstrap, "auto.offset.reset": "earliest",
                         "fetch.max.wait.ms": 100, **config}) as consumer:
        consumer.assign(tps)
        deadline = time.monotonic() + 30
        while len(records) < count and time.monotonic() < deadline:
            records.extend(await consumer.poll(1.0))
    return records


RECORDS = [
    (b"key-0", b"value-0", [("h1", b"a"), ("h2", None)]),
    (None, b"no key", []),
    (b"no value", None, []),
    (b"", b"", [("empty", b"")]),
    (b"k" * 300, bytes(range(256)) * 40, []),
    ("unicode key \u00e9", "v\u00e4lue", [("\u00fc", b"x")]),
]


def expected(key: Any, value: Any) -> tuple[bytes | None, bytes | None]:
    def enc(x: Any) -> bytes | None:
        return x.encode() if isinstance(x, str) else x

    return enc(key), enc(value)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_codecs_round_trip(peer: Peer, codec: str) -> None:
    require_apis(peer, ApiKey.PRODUCE, ApiKey.FETCH)

    async def main() -> None:
        topic = topic_name(f"codec-{codec}")
        await create(peer, topic)
        ts = int(time.time() * 1000) - 5000
        async with Producer({"bootstrap.servers": peer.bootstrap, "compression.type": codec,
                             "linger.ms": 50}) as producer:
            futures = [
                producer.send(topic, value, key=key, headers=headers, timestamp_ms=ts + i)
                for i, (key, value, headers) in enumerate(RECORDS)
            ]
            metas = await asyncio.gather(*futures)
        assert [m.offset for m in metas] == list(range(len(RECORDS)))
        assert all(m.partition == 0 and m.topic == topic for m in metas)
        got = await consume_all(peer, [TopicPartition(topic, 0)], len(RECORDS))
        assert len(got) == len(RECORDS)
        for i, (record, (key, value, headers)) in enumerate(zip(got, RECORDS, strict=True)):
            assert record.offset == i
            assert (record.key, record.value) == expected(key, value)
            assert record.headers == [
                (k, v.encode() if isinstance(v, str) else v) for k, v in headers]
            assert record.timestamp == ts + i
            assert record.timestamp_type == 0

    asyncio.run(main())


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(peer: Peer, acks: str) -> None:
    require_apis(peer, ApiKey.PRODUCE, ApiKey.FETCH)

    async def main() -> None:
        topic = topic_name(f"acks{acks}")
        await create(peer, topic)
        async with Producer({"bootstrap.servers": peer.bootstrap, "acks": acks,
                             "enable.idempotence": acks == "all"}) as producer:
            metas = await asyncio.gather(
                *(producer.send(topic, f"v{i}".encode()) for i in range(200)))
        if acks == "0":
            assert all(m.offset == -1 for m in metas)
        else:
            assert sorted(m.offset for m in metas) == list(range(200))
        got = await consume_all(peer, [TopicPartition(topic, 0)], 200)
        assert [r.value for r in got] == [f"v{i}".encode() for i in range(200)]

    asyncio.run(main())


def test_send_order_kept_while_topic_metadata_arrives(peer: Peer) -> None:
    """Records sent before the producer knows a topic keep their order with those sent
    right after the metadata arrives (they used to wait in one task each and land last:
    offsets [0, 11, 12, ..., 1, 2, ...])."""
    require_apis(peer, ApiKey.PRODUCE)

    async def main() -> None:
        topic = topic_name("order")
        await create(peer, topic)
        async with Producer({"bootstrap.servers": peer.bootstrap,
                             "linger.ms": 20}) as producer:
            futures = [producer.send(topic, f"early-{i}", partition=0) for i in range(10)]
            while topic not in producer.cluster.topics:
                await asyncio.sleep(0)  # step the loop until the metadata has landed
            futures += [producer.send(topic, f"late-{i}", partition=0) for i in range(10)]
            metas = await asyncio.gather(*futures)
        assert [m.offset for m in metas] == list(range(20))
        got = await consume_all(peer, [TopicPartition(topic, 0)], 20)
        assert [r.value for r in got] == [f"early-{i}".encode() for i in range(10)] + [
            f"late-{i}".encode() for i in range(10)]

    asyncio.run(main())


def test_sends_to_a_missing_topic_fail_together(peer: Peer) -> None:
    """Every record queued for a topic that never appears fails with the time-out."""
    async def main() -> None:
        topic = topic_name("missing")
        async with Producer({"bootstrap.servers": peer.bootstrap,
                             "max.block.ms": 600}) as producer:
            futures = [producer.send(topic, b"x") for _ in range(5)]
            results = await asyncio.gather(*futures, return_exceptions=True)
            assert all(isinstance(r, KafkaTimeoutError) for r in results), results
            await asyncio.wait_for(producer.flush(), 5)

    asyncio.run(main())


def test_keyed_records_follow_murmur2(peer: Peer) -> None:
    require_apis(peer, ApiKey.PRODUCE, ApiKey.FETCH)

    async def main() -> None:
        topic = topic_name("keys")
        await create(peer, topic, 4)
        keys = [f"user-{i}".encode() for i in range(40)]
        async with Producer({"bootstrap.servers": peer.bootstrap}) as producer:
            metas = await asyncio.gather(*(producer.send(topic, b"x", key=k) for k in keys))
        for key, meta in zip(keys, metas, strict=True):
            assert meta.partition == partition_for_key(key, 4)
        got = await consume_all(peer, [TopicPartition(topic, p) for p in range(4)], 40)
        assert {(r.key, r.partition) for r in got} == {
            (k, partition_for_key(k, 4)) for k in keys}

    asyncio.run(main())


def test_idempotent_producer_numbers_batches(peer: Peer) -> None:
    require_apis(peer, ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.INIT_PRODUCER_ID)

    async def main() -> None:
        topic = topic_name("idem")
        await create(peer, topic)
        async with Producer({"bootstrap.servers": peer.bootstrap, "linger.ms": 0,
                             "batch.size": 200}) as producer:
            assert producer.idempotent and producer.producer_id >= 0
            pid = producer.producer_id
            for i in range(5):
                await producer.send(topic, b"x" * 150, key=str(i).encode())
        async with Consumer({"bootstrap.servers": peer.bootstrap,
                             "auto.offset.reset": "earliest"}) as consumer:
            consumer.assign([TopicPartition(topic, 0)])
            batches: list[Any] = []
            deadline = time.monotonic() + 20
            while sum(len(b) for _, b in batches) < 5 and time.monotonic() < deadline:
                batches.extend(await consumer.poll_batches(1.0))
        assert sum(len(b) for _, b in batches) == 5
        assert {b.producer_id for _, b in batches} == {pid}

    asyncio.run(main())


def test_seek_position_and_offset_reset(peer: Peer) -> None:
    require_apis(peer, ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS)

    async def main() -> None:
        topic = topic_name("seek")
        tp = TopicPartition(topic, 0)
        await create(peer, topic)
        # One record per batch: Tansu 0.6 answers ListOffsets(latest) with the last batch's
        # base offset + 1, so multi-record batches would hide the real end offset there.
        async with Producer({"bootstrap.servers": peer.bootstrap, "linger.ms": 0}) as producer:
            for i in range(50):
                await producer.send(topic, str(i).encode())
        bs = peer.bootstrap
        async with Consumer({"bootstrap.servers": bs, "auto.offset.reset": "latest"}) as c:
            c.assign([tp])
            assert await c.position(tp) == 50
            c.seek(tp, 17)
            assert await c.position(tp) == 17
            records = await c.poll(5.0, max_records=3)
            assert [r.offset for r in records] == [17, 18, 19]
            assert await c.position(tp) == 20
            c.seek_to_beginning([tp])
            assert await c.position(tp) == 0
            c.seek_to_end()
            assert await c.position(tp) == 50
            assert await c.end_offsets([tp]) == {tp: 50}
            assert await c.beginning_offsets([tp]) == {tp: 0}

    asyncio.run(main())


def test_offset_out_of_range_resets(peer: Peer) -> None:
    require_apis(peer, ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS)
    if peer.name == "tansu":
        pytest.skip("Tansu 0.6 answers a fetch past the log end with no error, not "
                    "OFFSET_OUT_OF_RANGE, so there is nothing to reset")

    async def main() -> None:
        topic = topic_name("oor")
        tp = TopicPartition(topic, 0)
        await create(peer, topic)
        async with Producer({"bootstrap.servers": peer.bootstrap}) as producer:
            await asyncio.gather(*(producer.send(topic, str(i).encode()) for i in range(50)))
        bs = peer.bootstrap
        async with Consumer({"bootstrap.servers": bs, "auto.offset.reset": "latest"}) as c:
            c.assign([tp])
            c.seek(tp, 10_000)  # out of range: reset to latest
            assert await c.poll(2.0) == []
            assert await c.position(tp) == 50
        async with Consumer({"bootstrap.servers": bs, "auto.offset.reset": "earliest"}) as c:
            c.assign([tp])
            c.seek(tp, 10_000)
            records = await c.poll(5.0, max_records=5)
            assert [r.offset for r in records] == [0, 1, 2, 3, 4]
        async with Consumer({"bootstrap.servers": bs, "auto.offset.reset": "none"}) as c:
            c.assign([tp])
            c.seek(tp, 10_000)
            with pytest.raises(OffsetOutOfRangeError, match=r"auto\.offset\.reset"):
                for _ in range(10):
                    await c.poll(1.0)

    asyncio.run(main())


def test_many_partitions_prefetch_and_columns(peer: Peer) -> None:
    require_apis(peer, ApiKey.PRODUCE, ApiKey.FETCH)

    async def main() -> None:
        topic = topic_name("many")
        await create(peer, topic, 3)
        n = 3000
        async with Producer({"bootstrap.servers": peer.bootstrap, "linger.ms": 10}) as p:
            await asyncio.gather(*(p.send(topic, i.to_bytes(4, "big"), partition=i % 3)
                                   for i in range(n)))
        async with Consumer({"bootstrap.servers": peer.bootstrap,
                             "auto.offset.reset": "earliest", "max.poll.records": 700}) as c:
            c.assign([TopicPartition(topic, p) for p in range(3)])
            seen: dict[int, list[int]] = {0: [], 1: [], 2: []}
            deadline = time.monotonic() + 30
            while sum(map(len, seen.values())) < n and time.monotonic() < deadline:
                batches = await c.poll_batches(1.0)
                assert sum(len(b) for _, b in batches) <= 700
                for tp, cols in batches:
                    seen[tp.partition].extend(cols.offsets)
                    for off, value in zip(cols.offsets, cols.values, strict=True):
                        assert int.from_bytes(value, "big") % 3 == tp.partition
                        del off
        for p in range(3):
            assert seen[p] == list(range(n // 3))

    asyncio.run(main())


def test_metadata_max_age_picks_up_new_partitions(peer: Peer) -> None:
    require_apis(peer, ApiKey.PRODUCE, ApiKey.CREATE_PARTITIONS)

    async def main() -> None:
        topic = topic_name("grow")
        await create(peer, topic, 1)
        async with Producer({"bootstrap.servers": peer.bootstrap,
                             "metadata.max.age.ms": 200}) as producer:
            await producer.send(topic, b"first")
            assert producer.partitions_for(topic) == [0]
            async with AdminClient({"bootstrap.servers": peer.bootstrap}) as admin:
                await admin.create_partitions({topic: 3})
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and producer.partitions_for(topic) != [0, 1, 2]:
                await producer.send(topic, b"x")  # the sender loop checks metadata age
                await asyncio.sleep(0.05)
            metas = await asyncio.gather(
                *(producer.send(topic, b"k", partition=p) for p in (1, 2)))
            assert [m.partition for m in metas] == [1, 2]
            assert producer.partitions_for(topic) == [0, 1, 2]

    asyncio.run(main())
