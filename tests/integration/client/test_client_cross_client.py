"""Cross-client: what this client writes, confluent-kafka (librdkafka) reads, and back.
Also the synchronous facade."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition

from moldau.client import (
    SyncAdminClient,
    SyncConsumer,
    SyncProducer,
    TopicPartition,
)
from moldau.client.admin_types import NewTopic
from moldau.client.partitioner import partition_for_key
from moldau.protocol.api_keys import ApiKey

from .conftest import require_apis, topic_name
from .peers import Peer

pytestmark = pytest.mark.timeout(120)


def _create(peer: Peer, topic: str, partitions: int) -> None:
    with SyncAdminClient({"bootstrap.servers": peer.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
        admin.cluster.partitions_for(topic)


def _ck_consume(peer: Peer, tps: list[tuple[str, int]], count: int) -> list:
    consumer = CKConsumer({"bootstrap.servers": peer.bootstrap, "group.id": "cross-read",
                           "enable.auto.commit": False, "log_level": 2})
    consumer.assign([CKTopicPartition(t, p, 0) for t, p in tps])
    got = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg)
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_confluent_reads_what_we_produce(peer: Peer, codec: str) -> None:
    require_apis(peer, ApiKey.PRODUCE, ApiKey.FETCH)
    topic = topic_name(f"to-ck-{codec}")
    _create(peer, topic, 1)
    records = [(f"k{i}".encode(), bytes([i % 256]) * (i * 37 % 2000), [("n", str(i).encode())],
                1_600_000_000_000 + i) for i in range(300)]
    with SyncProducer({"bootstrap.servers": peer.bootstrap, "compression.type": codec,
                       "linger.ms": 20}) as producer:
        futures = [producer.send(topic, v, key=k, headers=h, partition=0, timestamp_ms=ts)
                   for k, v, h, ts in records]
        producer.flush()
        assert [f.result().offset for f in futures] == list(range(300))
    got = _ck_consume(peer, [(topic, 0)], 300)
    assert len(got) == 300
    for msg, (k, v, h, ts) in zip(got, records, strict=True):
        assert (msg.key(), msg.value(), msg.headers(), msg.timestamp()[1]) == (
            k, v, h, ts)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_we_read_what_confluent_produces(peer: Peer, codec: str) -> None:
    require_apis(peer, ApiKey.PRODUCE, ApiKey.FETCH)
    topic = topic_name(f"from-ck-{codec}")
    partitions = 3
    _create(peer, topic, partitions)
    producer = CKProducer({"bootstrap.servers": peer.bootstrap, "compression.type": codec,
                           "partitioner": "murmur2_random", "linger.ms": 10,
                           "log_level": 2})
    keys = [f"key-{i}".encode() for i in range(200)]
    for i, key in enumerate(keys):
        producer.produce(topic, value=b"v" * i, key=key, headers=[("i", str(i).encode())],
                         timestamp=1_700_000_000_000 + i)
    assert producer.flush(30) == 0
    with SyncConsumer({"bootstrap.servers": peer.bootstrap,
                       "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < len(keys) and time.monotonic() < deadline:
            got.extend(consumer.poll(0.5))
    assert len(got) == len(keys)
    for record in got:
        i = int(record.headers[0][1])
        assert record.key == keys[i]
        assert record.value == b"v" * i
        assert record.timestamp == 1_700_000_000_000 + i
        # librdkafka's murmur2_random partitioner and ours agree (both are Java's)
        assert record.partition == partition_for_key(keys[i], partitions)
    per_partition: dict[int, list[int]] = {}
    for record in got:
        per_partition.setdefault(record.partition, []).append(record.offset)
    for offsets in per_partition.values():
        assert offsets == list(range(len(offsets)))


def test_sync_facade_round_trip(peer: Peer) -> None:
    require_apis(peer, ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS)
    topic = topic_name("sync")
    _create(peer, topic, 2)
    with SyncProducer({"bootstrap.servers": peer.bootstrap}) as producer:
        futures = [producer.send(topic, f"v{i}", key=f"k{i % 7}") for i in range(500)]
        producer.flush()
        metas = [f.result(10) for f in futures]
    assert {m.partition for m in metas} == {0, 1}
    with SyncConsumer({"bootstrap.servers": peer.bootstrap,
                       "auto.offset.reset": "earliest"}) as consumer:
        assert consumer.partitions_for(topic) == [0, 1]
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        consumer.assign(tps)
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 500 and time.monotonic() < deadline:
            got.extend(consumer.poll(0.5))
        assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(500))
        for tp in tps:
            assert consumer.position(tp) == sum(1 for m in metas if m.partition == tp.partition)
