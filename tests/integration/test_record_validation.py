"""Issue 11, defects 1 and 11, against a running ``moldau serve`` over raw sockets: batches
whose header and CRC are valid but whose records are not are refused with Kafka's error code,
the partition's log end offset and records stay as they were, and real clients
(confluent-kafka, kafka-python) still read the partition; a compacted topic refuses records
without a key, to raw produces and to real producers.

Before the per-record validation each of these batches was appended: librdkafka then stopped
on the partition, kafka-python raised CorruptRecordError, and a count of 2**31-1 moved the
partition's offsets by 2,147,483,647.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
from broker_wire import (
    Wire,
    create_topic,
    fetch_all,
    list_offset,
    make_batch,
    produce,
    unexpected_tracebacks,
)
from record_shapes import batch, broken_record_sets, good_records, record

from moldau.protocol.errors import ErrorCode
from moldau.protocol.records.compression import Codec, compress
from moldau.testing.runner import BrokerProcess

RDKAFKA = logging.getLogger("rdkafka")
TOPIC = "validated"
COMPACTED = "validated-compacted"
CODECS = [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]
GOOD = [b"good-%d" % i for i in range(5)]


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    node = BrokerProcess()
    node.start()
    with Wire(node.port()) as wire:
        create_topic(wire, TOPIC)
        create_topic(wire, COMPACTED, configs={"cleanup.policy": "compact"})
        entry = produce(wire, TOPIC, 0, make_batch(GOOD))
        assert entry["error_code"] == ErrorCode.none, entry
    yield node
    crashes = unexpected_tracebacks(node.log_text())
    node.stop()
    node.close()
    assert not crashes, "a handler raised:\n" + crashes[0]


def now_ms() -> int:
    return int(time.time() * 1000)


def bad_batches() -> dict[str, tuple[bytes, ErrorCode]]:
    """Every broken shape with the error Kafka answers (see the unit tests for each)."""
    ts = now_ms()
    out = {name: (blob, ErrorCode.invalid_record)
           for name, blob in broken_record_sets(ts).items()}
    for codec in CODECS:
        name = codec.name.lower()
        out[f"{name}: not {name} data"] = (
            batch(b"", count=3, codec=codec, compressed=b"not compressed data" * 4,
                  base_timestamp=ts), ErrorCode.corrupt_message)
        out[f"{name}: truncated frame"] = (
            batch(b"", count=3, codec=codec, compressed=compress(codec, good_records(3))[:-6],
                  base_timestamp=ts), ErrorCode.corrupt_message)
        out[f"{name}: count lies inside a valid frame"] = (
            batch(good_records(3, b"x" * 30), count=4, codec=codec, base_timestamp=ts),
            ErrorCode.invalid_record)
        # Snappy expands at most ~21x: 18 MiB still fits max.message.bytes compressed.
        zeros = bytes((18 if codec == Codec.SNAPPY else 40) << 20)
        out[f"{name}: {len(zeros) >> 20} MiB of zeros (decompression bomb)"] = (
            batch(b"", count=1, codec=codec, compressed=compress(codec, zeros),
                  base_timestamp=ts), ErrorCode.message_too_large)
    return out


BAD = bad_batches()


@pytest.mark.parametrize("case", list(BAD))
def test_batch_is_refused_and_the_log_is_unchanged(broker: BrokerProcess, case: str) -> None:
    blob, code = BAD[case]
    before = fetch_all(broker.port(), TOPIC)
    with Wire(broker.port()) as wire:
        end = list_offset(wire, TOPIC, 0, -1)
        entry = produce(wire, TOPIC, 0, blob)
        assert entry["error_code"] == code, entry
        assert entry["base_offset"] == -1, entry
        if "bomb" in case:  # refused for what it expands to, not for its own size
            assert "decompresses to more than" in entry["error_message"], entry
        assert list_offset(wire, TOPIC, 0, -1) == end
        # The next valid batch gets the next offset: nothing was appended in between.
        after = produce(wire, TOPIC, 0, make_batch([b"after " + case.encode()]))
        assert after["error_code"] == ErrorCode.none, after
        assert after["base_offset"] == end, after
    got = fetch_all(broker.port(), TOPIC)
    assert got.records[: len(before.records)] == before.records
    assert [v for _o, _k, v in got.records[len(before.records):]] == [b"after " + case.encode()]


def test_keyless_record_in_a_compacted_topic(broker: BrokerProcess) -> None:
    ts = now_ms()
    with Wire(broker.port()) as wire:
        keyless = batch(record(0, b"a") + record(1, None), count=2, base_timestamp=ts)
        entry = produce(wire, COMPACTED, 0, keyless)
        assert entry["error_code"] == ErrorCode.invalid_record, entry
        assert "cleanup.policy=compact" in (entry.get("error_message") or ""), entry
        assert list_offset(wire, COMPACTED, 0, -1) == 0
        keyed = produce(wire, COMPACTED, 0, batch(record(0, b"a") + record(1, b"b", None),
                                                  count=2, base_timestamp=ts))
        assert keyed["error_code"] == ErrorCode.none, keyed
        assert list_offset(wire, COMPACTED, 0, -1) == 2


def test_real_producers_get_invalid_record_for_keyless_compacted(broker: BrokerProcess) -> None:
    import confluent_kafka
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError

    errors: list[confluent_kafka.KafkaError | None] = []
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap,
                                         "logger": RDKAFKA, "linger.ms": 0})
    producer.produce(COMPACTED, b"no key", partition=0,
                     on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(30) == 0
    # Separately: a batch with one keyless record is refused as a whole, as in Kafka.
    producer.produce(COMPACTED, b"keyed", key=b"k", partition=0,
                     on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(30) == 0
    assert errors[0] is not None and errors[0].code() == confluent_kafka.KafkaError.INVALID_RECORD
    assert errors[1] is None

    kp = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0)
    try:
        with pytest.raises(InvalidRecordError):
            kp.send(COMPACTED, b"no key", partition=0).get(timeout=30)
        kp.send(COMPACTED, b"keyed", key=b"k2", partition=0).get(timeout=30)
    finally:
        kp.close()


def test_zz_real_clients_read_the_partition(broker: BrokerProcess) -> None:
    """Runs after the refused batches: librdkafka and kafka-python read every record of the
    partition, in order, with offsets 0..end-1 (a stored bad batch stopped both)."""
    import confluent_kafka
    from kafka import KafkaConsumer, TopicPartition

    expected = fetch_all(broker.port(), TOPIC).records
    assert [v for _o, _k, v in expected[: len(GOOD)]] == GOOD
    assert len(expected) == len(GOOD) + len(BAD)
    assert [o for o, _k, _v in expected] == list(range(len(expected)))

    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap,
                                         "group.id": "validated-readers", "logger": RDKAFKA,
                                         "enable.auto.commit": False, "check.crcs": True})
    seen: list[tuple[int, bytes | None]] = []
    try:
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + 60
        while len(seen) < len(expected):
            assert time.monotonic() < deadline, f"librdkafka read {len(seen)} records"
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            seen.append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    assert seen == [(o, v) for o, _k, v in expected]

    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                       check_crcs=True, consumer_timeout_ms=10_000)
    try:
        partition = TopicPartition(TOPIC, 0)
        kc.assign([partition])
        kc.seek(partition, 0)
        got = [(m.offset, m.value) for m in kc]
    finally:
        kc.close()
    assert got == [(o, v) for o, _k, v in expected]
