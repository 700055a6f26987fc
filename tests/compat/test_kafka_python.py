"""kafka-python 3.0 against Moldau.

Covers: 10,000 records with keys, headers and explicit timestamps per compression codec
(none, gzip, snappy via python-snappy, lz4, zstd) with idempotence on, kafka-python's default
(InitProducerId v4, Produce v9); every record fetched back by offset, byte-exact and in order
(Fetch v12), and after seeks; ListOffsets (v11) earliest/latest/by timestamp through
``beginning_offsets``, ``end_offsets`` and ``offsets_for_times``; batches stored with the codec
and producer id the client chose; LogAppendTime topics; topic admin through KafkaAdminClient
(create, describe, alter configs that take effect, delete); a consumer group that commits,
survives a broker restart and resumes.
"""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, KafkaAdminClient, NewTopic
from kafka.errors import MessageSizeTooLargeError

from .conftest import unique_name
from .endpoint import KafkaEndpoint
from .records import (
    CODEC_IDS,
    CODECS,
    N_RECORDS,
    Produced,
    Rec,
    first_mismatch,
    make_records,
    now_ms,
    records_to_produce,
    stored_batches,
    timestamp_cases,
)

TIMEOUT = 30


@pytest.fixture(scope="module")
def admin(kafka_endpoint: KafkaEndpoint):  # type: ignore[no-untyped-def]
    client = KafkaAdminClient(bootstrap_servers=kafka_endpoint.bootstrap,
                              request_timeout_ms=TIMEOUT * 1000)
    yield client
    client.close()


def create_topic(admin: KafkaAdminClient, name: str, partitions: int = 1,
                 config: dict[str, str] | None = None) -> None:
    admin.create_topics([NewTopic(name, partitions, 1, topic_configs=config or {})])


def produce(bootstrap: str, topic: str, records: list[Rec], **config: object) -> list[int]:
    """Produce ``records`` to partition 0 (idempotent, kafka-python's default); return the
    offsets the broker acknowledged."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20,
                             batch_size=256 * 1024, **config)
    try:
        assert producer.config["enable_idempotence"]
        futures = [
            producer.send(topic, value=r.value, key=r.key, headers=r.headers, partition=0,
                          timestamp_ms=r.timestamp if r.timestamp >= 0 else None)
            for r in records
        ]
        producer.flush(TIMEOUT)
        return [f.get(TIMEOUT).offset for f in futures]
    finally:
        producer.close(TIMEOUT)


def _consumer(bootstrap: str, **config: object) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                         request_timeout_ms=TIMEOUT * 1000 + 5000, **config)


def consume(bootstrap: str, topic: str, start: int, count: int) -> list[Rec]:
    """Read ``count`` records of partition 0 from offset ``start`` (assign + seek, no group)."""
    consumer = _consumer(bootstrap)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, start)
    out: list[Rec] = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(out) < count and time.monotonic() < deadline:
            for msgs in consumer.poll(timeout_ms=500, max_records=5000).values():
                out.extend(Rec(m.key, m.value, list(m.headers), m.timestamp, m.offset)
                           for m in msgs)
    finally:
        consumer.close()
    return out


@pytest.fixture(scope="module", params=CODECS)
def produced(request: pytest.FixtureRequest, kafka_endpoint: KafkaEndpoint,
             admin: KafkaAdminClient) -> Produced:
    codec = request.param
    topic = unique_name(f"kp-{codec}")
    create_topic(admin, topic)
    base_ts, records = records_to_produce(topic)
    offsets = produce(kafka_endpoint.bootstrap, topic, records,
                      compression_type=None if codec == "none" else codec)
    return Produced(topic, codec, True, base_ts, records, offsets)  # idempotent: the default


def test_acknowledged_offsets_contiguous(produced: Produced) -> None:
    assert produced.offsets == list(range(N_RECORDS))


def test_fetch_back_byte_exact(produced: Produced, kafka_endpoint: KafkaEndpoint) -> None:
    got = consume(kafka_endpoint.bootstrap, produced.topic, 0, N_RECORDS)
    assert first_mismatch(got, produced.records) is None


def test_fetch_from_offsets(produced: Produced, kafka_endpoint: KafkaEndpoint) -> None:
    for start in (6789, N_RECORDS - 1):
        got = consume(kafka_endpoint.bootstrap, produced.topic, start, N_RECORDS - start)
        assert first_mismatch(got, produced.records[start:], first_offset=start) is None


def test_batches_stored_as_sent(produced: Produced, kafka_endpoint: KafkaEndpoint) -> None:
    if kafka_endpoint.log_dir is None:
        pytest.skip("endpoint exposes no log directory")
    batches = stored_batches(kafka_endpoint.log_dir, produced.topic)
    assert sum(h.record_count for h in batches) == N_RECORDS
    assert {h.compression for h in batches} == {CODEC_IDS[produced.codec]}
    # idempotent: one producer id, sequences contiguous from 0
    assert len({h.producer_id for h in batches}) == 1 and batches[0].producer_id >= 0
    assert [h.base_sequence for h in batches] == [h.base_offset for h in batches]


def test_list_offsets(produced: Produced, kafka_endpoint: KafkaEndpoint) -> None:
    consumer = _consumer(kafka_endpoint.bootstrap)
    tp = TopicPartition(produced.topic, 0)
    try:
        assert consumer.beginning_offsets([tp], TIMEOUT * 1000) == {tp: 0}
        assert consumer.end_offsets([tp], TIMEOUT * 1000) == {tp: N_RECORDS}
        for ts, want in timestamp_cases(produced.base_ts):
            [answer] = consumer.offsets_for_times({tp: ts}, TIMEOUT * 1000).values()
            if want is None:
                assert answer is None
            else:
                assert (answer.offset, answer.timestamp) == (want, produced.base_ts + want)
    finally:
        consumer.close()


def test_log_append_time(kafka_endpoint: KafkaEndpoint, admin: KafkaAdminClient) -> None:
    topic = unique_name("kp-lat")
    create_topic(admin, topic, config={"message.timestamp.type": "LogAppendTime"})
    old = now_ms() - 86_400_000
    records = make_records("lat", 500, base_ts=old)
    before = now_ms()
    produce(kafka_endpoint.bootstrap, topic, records, compression_type="gzip")
    after = now_ms()
    consumer = _consumer(kafka_endpoint.bootstrap)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    try:
        got = []
        deadline = time.monotonic() + TIMEOUT
        while len(got) < 500 and time.monotonic() < deadline:
            for msgs in consumer.poll(timeout_ms=500).values():
                got.extend(msgs)
        [answer] = consumer.offsets_for_times({tp: old}, TIMEOUT * 1000).values()
    finally:
        consumer.close()
    assert len(got) == 500
    assert {m.timestamp_type for m in got} == {1}  # LogAppendTime
    assert all(before - 1000 <= m.timestamp <= after + 1000 for m in got)
    assert [m.value for m in got] == [r.value for r in records]
    assert answer is not None and answer.offset == 0


def test_create_time_is_reported(kafka_endpoint: KafkaEndpoint,
                                 admin: KafkaAdminClient) -> None:
    topic = unique_name("kp-ct")
    create_topic(admin, topic)
    produce(kafka_endpoint.bootstrap, topic, [Rec(b"k", b"v", [], 1_600_000_000_123)])
    consumer = _consumer(kafka_endpoint.bootstrap, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, 0)])
    try:
        msgs = []
        deadline = time.monotonic() + TIMEOUT
        while not msgs and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                msgs.extend(batch)
    finally:
        consumer.close()
    assert [(m.timestamp_type, m.timestamp) for m in msgs] == [(0, 1_600_000_000_123)]


def _topic_config(admin: KafkaAdminClient, topic: str) -> dict[str, str]:
    described = admin.describe_configs([ConfigResource("topic", topic)], config_filter="all")
    return {name: entry["value"] for name, entry in described["topic"][topic].items()}


def test_topic_admin(kafka_endpoint: KafkaEndpoint, admin: KafkaAdminClient) -> None:
    topic = unique_name("kp-admin")
    create_topic(admin, topic, 2, {"retention.ms": "3600000"})
    [description] = admin.describe_topics([topic])
    assert sorted(p["partition_index"] for p in description["partitions"]) == [0, 1]
    assert {p["leader_id"] for p in description["partitions"]} <= set(kafka_endpoint.brokers)
    assert _topic_config(admin, topic)["retention.ms"] == "3600000"
    admin.alter_configs([ConfigResource("topic", topic, {"max.message.bytes": "2000"})])
    configs = _topic_config(admin, topic)
    assert configs["max.message.bytes"] == "2000"
    # kafka-python 3 alters incrementally (IncrementalAlterConfigs): the rest stays
    assert configs["retention.ms"] == "3600000"
    producer = KafkaProducer(bootstrap_servers=kafka_endpoint.bootstrap)
    try:
        # the small one first: kafka-python's idempotent producer aborts every pending batch
        # once one fails with a non-retriable error
        assert producer.send(topic, b"small", partition=1).get(TIMEOUT).offset == 0
        big = producer.send(topic, b"x" * 5000, partition=0)
        producer.flush(TIMEOUT)
        with pytest.raises(MessageSizeTooLargeError):
            big.get(TIMEOUT)
    finally:
        producer.close(TIMEOUT)
    admin.delete_topics([topic])
    assert topic not in admin.list_topics()


def _group_consumer(bootstrap: str, group: str, topic: str) -> KafkaConsumer:
    consumer = _consumer(bootstrap, group_id=group, auto_offset_reset="earliest",
                         max_poll_records=30)
    consumer.subscribe([topic])
    consumer.topics()  # works around a kafka-python 3.0.12 rejoin bug (docs/compatibility.md)
    return consumer


def _poll_n(consumer: KafkaConsumer, n: int) -> list:  # type: ignore[type-arg]
    out = []
    deadline = time.monotonic() + TIMEOUT
    while len(out) < n and time.monotonic() < deadline:
        for msgs in consumer.poll(timeout_ms=500, max_records=n - len(out)).values():
            out.extend(msgs)
    return out


def test_group_commit_restart_resume(kafka_endpoint: KafkaEndpoint,
                                     admin: KafkaAdminClient) -> None:
    if kafka_endpoint.restart is None:
        pytest.skip(f"endpoint {kafka_endpoint.name} cannot restart its broker")
    topic = unique_name("kp-group")
    create_topic(admin, topic, 2)
    producer = KafkaProducer(bootstrap_servers=kafka_endpoint.bootstrap)
    for i in range(200):
        producer.send(topic, f"v{i}".encode(), f"k{i}".encode())
    producer.flush(TIMEOUT)
    producer.close(TIMEOUT)
    group = unique_name("kp-grp")

    consumer = _group_consumer(kafka_endpoint.bootstrap, group, topic)
    first = _poll_n(consumer, 120)
    assert {tp.partition for tp in consumer.assignment()} == {0, 1}
    consumer.commit()
    committed = {p: consumer.committed(TopicPartition(topic, p)) for p in (0, 1)}
    consumer.close()
    assert len(first) == 120
    for p in (0, 1):
        seen = [m.offset for m in first if m.partition == p]
        assert committed[p] == (max(seen) + 1 if seen else None)

    kafka_endpoint.restart()

    admin2 = KafkaAdminClient(bootstrap_servers=kafka_endpoint.bootstrap)
    try:
        stored = admin2.list_group_offsets(group)[group]
    finally:
        admin2.close()
    assert {tp.partition: meta.offset for tp, meta in stored.items()} == {
        p: o for p, o in committed.items() if o is not None}

    consumer = _group_consumer(kafka_endpoint.bootstrap, group, topic)
    rest = _poll_n(consumer, 80)
    consumer.close()
    assert len(rest) == 80
    assert {(m.partition, m.offset) for m in first}.isdisjoint(
        {(m.partition, m.offset) for m in rest})
    assert {m.value for m in first + rest} == {f"v{i}".encode() for i in range(200)}
