"""confluent-kafka 2.16 (librdkafka 2.16) against Moldau.

Covers: 10,000 records with keys, headers and explicit timestamps per compression codec
(none, gzip, snappy, lz4, zstd), each with ``enable.idempotence`` off and on (Produce v10,
InitProducerId v4); every record fetched back by offset, byte-exact and in order (Fetch v16,
topic ids); seeks into the middle; ListOffsets earliest/latest/by timestamp/max timestamp
through ``get_watermark_offsets``, ``offsets_for_times`` and ``AdminClient.list_offsets``
(ListOffsets v7+); batches stored with the codec the producer chose; LogAppendTime topics;
topic admin (create, describe, alter configs that take effect, delete); a consumer group that
commits, survives a broker restart and resumes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
)

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


@pytest.fixture(scope="module")
def admin(kafka_endpoint: KafkaEndpoint) -> AdminClient:
    return AdminClient({"bootstrap.servers": kafka_endpoint.bootstrap, "log_level": 2})


def create_topic(admin: AdminClient, name: str, partitions: int = 1,
                 config: dict[str, str] | None = None) -> None:
    [future] = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})],
                                   operation_timeout=TIMEOUT).values()
    future.result(TIMEOUT)


def to_rec(msg: Message) -> Rec:
    return Rec(msg.key(), msg.value(), list(msg.headers() or []), msg.timestamp()[1],
               msg.offset())


def produce(bootstrap: str, topic: str, records: list[Rec], **config: object) -> list[int]:
    """Produce ``records`` to partition 0; return the offsets from the delivery reports."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "log_level": 2,
                         **config})
    offsets: list[int] = []
    errors: list[KafkaError] = []

    def report(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            offsets.append(msg.offset())

    for rec in records:
        kwargs = {"timestamp": rec.timestamp} if rec.timestamp >= 0 else {}
        while True:
            try:
                producer.produce(topic, rec.value, rec.key, partition=0, headers=rec.headers,
                                 on_delivery=report, **kwargs)
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0
    assert errors == []
    return offsets


def consume(bootstrap: str, topic: str, start: int, count: int, **config: object) -> list[Rec]:
    """Read ``count`` records of partition 0 from offset ``start`` (assign, no group)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("assign"),
                         "enable.auto.commit": False, "log_level": 2, **config})
    consumer.assign([TopicPartition(topic, 0, start)])
    out: list[Rec] = []
    try:
        idle = 0
        while len(out) < count and idle < 20:
            batch = consumer.consume(min(1000, count - len(out)), 1.0)
            idle = 0 if batch else idle + 1
            for msg in batch:
                if msg.error():
                    raise KafkaException(msg.error())
                out.append(to_rec(msg))
    finally:
        consumer.close()
    return out


@pytest.fixture(scope="module", params=IDEMPOTENCE_CASES, ids=case_id)
def produced(request: pytest.FixtureRequest, kafka_endpoint: KafkaEndpoint,
             admin: AdminClient) -> Produced:
    codec, idempotent = request.param
    topic = unique_name(f"ck-{codec}-{'idem' if idempotent else 'plain'}")
    create_topic(admin, topic)
    base_ts, records = records_to_produce(topic)
    offsets = produce(kafka_endpoint.bootstrap, topic, records, **{
        "compression.type": codec, "enable.idempotence": idempotent})
    return Produced(topic, codec, idempotent, base_ts, records, offsets)


def test_delivery_reports_contiguous_offsets(produced: Produced) -> None:
    assert produced.offsets == list(range(N_RECORDS))


def test_fetch_back_byte_exact(produced: Produced, kafka_endpoint: KafkaEndpoint) -> None:
    got = consume(kafka_endpoint.bootstrap, produced.topic, 0, N_RECORDS)
    assert first_mismatch(got, produced.records) is None
    assert all(r.timestamp >= 0 for r in got)


def test_fetch_from_offsets(produced: Produced, kafka_endpoint: KafkaEndpoint) -> None:
    for start in (4321, N_RECORDS - 1):
        got = consume(kafka_endpoint.bootstrap, produced.topic, start, N_RECORDS - start)
        assert first_mismatch(got, produced.records[start:], first_offset=start) is None


def test_batches_stored_as_sent(produced: Produced, kafka_endpoint: KafkaEndpoint) -> None:
    if kafka_endpoint.log_dir is None:
        pytest.skip("endpoint exposes no log directory")
    batches = stored_batches(kafka_endpoint.log_dir, produced.topic)
    assert sum(h.record_count for h in batches) == N_RECORDS
    codec = CODEC_IDS[produced.codec]
    # librdkafka sends a batch uncompressed when compressing would make it larger, which
    # happens to a batch of one or two records (seen under load): only those may differ.
    assert {h.compression for h in batches if h.record_count > 2} == {codec}
    assert {h.compression for h in batches} <= {codec, 0}
    producer_ids = {h.producer_id for h in batches}
    if produced.idempotent:
        assert len(producer_ids) == 1 and min(producer_ids) >= 0
        assert batches[0].base_sequence == 0
    else:
        assert producer_ids == {-1}


def test_list_offsets(produced: Produced, kafka_endpoint: KafkaEndpoint,
                      admin: AdminClient) -> None:
    consumer = Consumer({"bootstrap.servers": kafka_endpoint.bootstrap,
                         "group.id": unique_name("lo"), "log_level": 2})
    tp = TopicPartition(produced.topic, 0)
    try:
        assert consumer.get_watermark_offsets(tp, TIMEOUT, cached=False) == (0, N_RECORDS)
        cases = list(timestamp_cases(produced.base_ts))
        got = []
        for ts, _ in cases:  # one lookup per call: a request names each partition once
            [answer] = consumer.offsets_for_times([TopicPartition(produced.topic, 0, ts)],
                                                  TIMEOUT)
            assert answer.error is None
            got.append(answer.offset)
    finally:
        consumer.close()
    assert got == [-1 if want is None else want for _, want in cases]

    specs = {
        "earliest": OffsetSpec.earliest(),
        "latest": OffsetSpec.latest(),
        "max_timestamp": OffsetSpec.max_timestamp(),
        "ts": OffsetSpec.for_timestamp(produced.base_ts + 777),
    }
    results = {}
    for name, spec in specs.items():
        [future] = admin.list_offsets({tp: spec}, request_timeout=TIMEOUT).values()
        info = future.result(TIMEOUT)
        results[name] = (info.offset, info.timestamp)
    assert results["earliest"][0] == 0
    assert results["latest"][0] == N_RECORDS
    assert results["max_timestamp"] == (N_RECORDS - 1, produced.base_ts + N_RECORDS - 1)
    assert results["ts"] == (777, produced.base_ts + 777)


def test_log_append_time(kafka_endpoint: KafkaEndpoint, admin: AdminClient) -> None:
    topic = unique_name("ck-lat")
    create_topic(admin, topic, config={"message.timestamp.type": "LogAppendTime"})
    old = now_ms() - 86_400_000
    records = make_records("lat", 500, base_ts=old)
    before = now_ms()
    produce(kafka_endpoint.bootstrap, topic, records, **{"compression.type": "lz4"})
    after = now_ms()
    got = consume(kafka_endpoint.bootstrap, topic, 0, 500)
    assert first_mismatch(got, records, check_timestamps=False) is None
    consumer = Consumer({"bootstrap.servers": kafka_endpoint.bootstrap,
                         "group.id": unique_name("lat"), "log_level": 2,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        msg = consumer.poll(TIMEOUT)
        assert msg is not None and msg.error() is None
        ts_type, ts = msg.timestamp()
        assert ts_type == TIMESTAMP_LOG_APPEND_TIME
        assert before - 1000 <= ts <= after + 1000
        # by-timestamp lookups use the broker's time, not the producer's
        [answer] = consumer.offsets_for_times([TopicPartition(topic, 0, old)], TIMEOUT)
        assert answer.offset == 0
    finally:
        consumer.close()
    assert all(before - 1000 <= r.timestamp <= after + 1000 for r in got)


def test_create_time_is_reported(kafka_endpoint: KafkaEndpoint, admin: AdminClient) -> None:
    topic = unique_name("ck-ct")
    create_topic(admin, topic)
    produce(kafka_endpoint.bootstrap, topic, [Rec(b"k", b"v", [], 1_600_000_000_123)])
    consumer = Consumer({"bootstrap.servers": kafka_endpoint.bootstrap,
                         "group.id": unique_name("ct"), "log_level": 2})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        msg = consumer.poll(TIMEOUT)
        assert msg is not None and msg.error() is None
        assert msg.timestamp() == (TIMESTAMP_CREATE_TIME, 1_600_000_000_123)
    finally:
        consumer.close()


def _configs(admin: AdminClient, topic: str) -> dict[str, str | None]:
    [future] = admin.describe_configs([ConfigResource("topic", topic)],
                                      request_timeout=TIMEOUT).values()
    return {name: entry.value for name, entry in future.result(TIMEOUT).items()}


def test_topic_admin(kafka_endpoint: KafkaEndpoint, admin: AdminClient) -> None:
    topic = unique_name("ck-admin")
    create_topic(admin, topic, 3, {"retention.ms": "3600000"})
    description = admin.describe_topics(TopicCollection([topic]))[topic].result(TIMEOUT)
    assert [p.id for p in description.partitions] == [0, 1, 2]
    assert all(p.leader.id in kafka_endpoint.brokers for p in description.partitions)
    assert _configs(admin, topic)["retention.ms"] == "3600000"
    metadata = admin.list_topics(topic, timeout=TIMEOUT)
    assert len(metadata.topics[topic].partitions) == 3
    assert {(b.id, b.host, b.port) for b in metadata.brokers.values()} == {
        (node, host, port) for node, (host, port) in kafka_endpoint.brokers.items()}

    # an altered config takes effect: records over max.message.bytes are refused
    [future] = admin.incremental_alter_configs([ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    ])]).values()
    assert future.result(TIMEOUT) is None
    configs = _configs(admin, topic)
    assert configs["max.message.bytes"] == "2000"
    assert configs["retention.ms"] == "604800000"
    producer = Producer({"bootstrap.servers": kafka_endpoint.bootstrap, "log_level": 2,
                         "message.max.bytes": 100_000})
    outcome: list[KafkaError | None] = []
    producer.produce(topic, b"x" * 5000, partition=0,
                     on_delivery=lambda err, msg: outcome.append(err))
    producer.produce(topic, b"small", partition=1,
                     on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(TIMEOUT)
    codes = sorted((e.code() if e else 0) for e in outcome)
    assert codes == sorted([0, KafkaError.MSG_SIZE_TOO_LARGE])

    [future] = admin.delete_topics([topic], operation_timeout=TIMEOUT).values()
    assert future.result(TIMEOUT) is None
    assert topic not in admin.list_topics(timeout=TIMEOUT).topics


def _group_consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 2,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "session.timeout.ms": 10_000})


def _poll_n(consumer: Consumer, n: int) -> list[Message]:
    out: list[Message] = []
    idle = 0
    while len(out) < n and idle < 30:
        msgs = consumer.consume(n - len(out), 1.0)
        idle = 0 if msgs else idle + 1
        for msg in msgs:
            assert msg.error() is None, msg.error()
            out.append(msg)
    return out


@pytest.fixture
def restartable(kafka_endpoint: KafkaEndpoint) -> Iterator[KafkaEndpoint]:
    if kafka_endpoint.restart is None:
        pytest.skip(f"endpoint {kafka_endpoint.name} cannot restart its broker")
    yield kafka_endpoint


def test_group_commit_restart_resume(restartable: KafkaEndpoint, admin: AdminClient) -> None:
    endpoint = restartable
    topic = unique_name("ck-group")
    create_topic(admin, topic, 2)
    producer = Producer({"bootstrap.servers": endpoint.bootstrap, "log_level": 2})
    for i in range(200):
        producer.produce(topic, f"v{i}".encode(), f"k{i}".encode())
    assert producer.flush(TIMEOUT) == 0
    group = unique_name("ck-grp")

    consumer = _group_consumer(endpoint.bootstrap, group)
    consumer.subscribe([topic])
    first = _poll_n(consumer, 120)
    assert len(first) == 120
    assert consumer.assignment() and {tp.partition for tp in consumer.assignment()} == {0, 1}
    consumer.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in consumer.committed(
        [TopicPartition(topic, 0), TopicPartition(topic, 1)], TIMEOUT)}
    consumer.close()
    seen_before = {(m.partition(), m.offset()) for m in first}
    assert committed == {p: 1 + max(o for q, o in seen_before if q == p) for p in (0, 1)
                         if any(q == p for q, _ in seen_before)} | {
        p: -1001 for p in (0, 1) if not any(q == p for q, _ in seen_before)}

    endpoint.restart()  # type: ignore[misc]

    admin2 = AdminClient({"bootstrap.servers": endpoint.bootstrap, "log_level": 2})
    [future] = admin2.list_consumer_group_offsets(
        [_group_request(group)], request_timeout=TIMEOUT).values()
    after_restart = {tp.partition: tp.offset for tp in future.result(TIMEOUT).topic_partitions}
    assert after_restart == {p: o for p, o in committed.items() if o >= 0}

    consumer = _group_consumer(endpoint.bootstrap, group)
    consumer.subscribe([topic])
    rest = _poll_n(consumer, 80)
    consumer.close()
    seen_after = {(m.partition(), m.offset()) for m in rest}
    assert len(rest) == 80
    assert not seen_before & seen_after
    assert {m.value() for m in first} | {m.value() for m in rest} == {
        f"v{i}".encode() for i in range(200)}


def _group_request(group: str):  # type: ignore[no-untyped-def]
    from confluent_kafka import ConsumerGroupTopicPartitions

    return ConsumerGroupTopicPartitions(group)
