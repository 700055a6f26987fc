"""Segment rolling and retention of a running ``moldau serve``, through real clients.

Small segments (1-16 KiB), a retention check every 200 ms and deleted files removed after
300 ms keep this fast. Time-based retention uses two clocks: records whose CreateTime lies
hours in the past (a "fake clock" for the data: eligible at the next check) and a few seconds of
real waiting (retention.ms and segment.ms of about a second). Every change of a topic config
is made with AlterConfigs on the running broker and must act without a restart.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import confluent_kafka
import pytest
from broker_wire import Wire, fetch_all, fetch_raw, list_offset, make_batch, produce
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from moldau.protocol.errors import ErrorCode
from moldau.testing.runner import BrokerProcess

HOUR_MS = 3600 * 1000
# librdkafka logs go to logging (pytest shows them for failed tests only).
RDKAFKA = logging.getLogger("rdkafka")


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    node = BrokerProcess(settings={
        "log.retention.check.interval.ms": 200,
        "log.segment.delete.delay.ms": 300,
    })
    node.start()
    yield node
    node.stop()
    node.close()


@pytest.fixture
def admin(broker: BrokerProcess) -> AdminClient:
    # Per test: a test that restarts the broker changes its port.
    return AdminClient({"bootstrap.servers": broker.bootstrap, "logger": RDKAFKA})


def new_topic(admin: AdminClient, configs: dict[str, str], partitions: int = 1) -> str:
    name = f"rr-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, partitions, 1, config=configs)])[name].result(10)
    return name


def alter(admin: AdminClient, topic: str, **configs: str) -> None:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(key.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
        for key, value in configs.items()])
    admin.incremental_alter_configs([resource])[resource].result(10)


def produce_confluent(broker: BrokerProcess, topic: str, count: int, *, size: int = 200,
                      timestamp_ms: int = 0, prefix: str = "r",
                      batch_bytes: int = 900) -> dict[int, bytes]:
    """Produce with confluent-kafka (acks=all); returns {offset: value} of partition 0.
    Batches stay below ``batch_bytes``: a batch larger than segment.bytes is refused
    (RECORD_LIST_TOO_LARGE), as by Kafka."""
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap,
                                         "logger": RDKAFKA, "acks": "all", "linger.ms": 0,
                                         "batch.size": batch_bytes})
    acked: dict[int, bytes] = {}
    errors: list[object] = []

    def on_delivery(err: object, msg: confluent_kafka.Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked[msg.offset()] = msg.value()

    for i in range(count):
        value = f"{prefix}-{i}-".encode() + b"p" * size
        producer.produce(topic, value, partition=0, timestamp=timestamp_ms,
                         on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors, errors
    return acked


def segments(broker: BrokerProcess, topic: str) -> list[Path]:
    return sorted((broker.data_dir / f"{topic}-0").glob("*.log"))


def wait_until(what: str, check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting until {what}")
        time.sleep(0.1)


def earliest(broker: BrokerProcess, topic: str) -> int:
    with Wire(broker.port()) as wire:
        return list_offset(wire, topic, 0, -2)


def latest(broker: BrokerProcess, topic: str) -> int:
    with Wire(broker.port()) as wire:
        return list_offset(wire, topic, 0, -1)


def consume_from(broker: BrokerProcess, topic: str, offset: int, reset: str, until: int,
                 timeout: float = 20.0) -> list[confluent_kafka.Message]:
    """Assign partition 0 at ``offset`` with ``auto.offset.reset=reset`` and read until the
    offset ``until`` (exclusive) was passed."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "logger": RDKAFKA,
        "group.id": f"rr-{uuid.uuid4().hex[:6]}",
        "enable.auto.commit": False, "auto.offset.reset": reset, "check.crcs": True,
        "fetch.wait.max.ms": 50})
    out: list[confluent_kafka.Message] = []
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, offset)])
        deadline = time.monotonic() + timeout
        while not out or out[-1].offset() + 1 < until:
            assert time.monotonic() < deadline, [m.offset() for m in out[-5:]]
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append(msg)
    finally:
        consumer.close()
    return out


# --- rolling ------------------------------------------------------------------------------


def test_segments_roll_by_size(broker: BrokerProcess, admin: AdminClient) -> None:
    topic = new_topic(admin, {"segment.bytes": "4096"})
    acked = produce_confluent(broker, topic, 300, size=150)
    files = segments(broker, topic)
    assert len(files) >= 10, len(files)
    for f in files[:-1]:
        assert f.stat().st_size <= 4096, (f, f.stat().st_size)
    # Each segment is named by its base offset; together they hold every offset once.
    bases = [int(f.stem) for f in files]
    assert bases[0] == 0 and bases == sorted(set(bases))
    got = consume_from(broker, topic, 0, "earliest", until=max(acked) + 1)
    assert {m.offset(): m.value() for m in got} == acked


def test_segments_roll_by_time(broker: BrokerProcess, admin: AdminClient) -> None:
    """segment.ms, as Kafka applies it: a batch rolls the active segment when its timestamp
    is more than segment.ms past that of the segment's first batch. The records carry set
    timestamps, so how long the clients take to start (seconds on a busy machine, which
    rolled or did not roll a segment when this test slept 1 s against 800 ms) is no factor."""
    topic = new_topic(admin, {"segment.ms": "800"})
    t0 = int(time.time() * 1000)
    produce_confluent(broker, topic, 3, timestamp_ms=t0)
    assert len(segments(broker, topic)) == 1
    produce_confluent(broker, topic, 3, timestamp_ms=t0 + 1000)
    assert len(segments(broker, topic)) == 2
    # Within segment.ms of the new segment's first batch nothing rolls.
    produce_confluent(broker, topic, 3, timestamp_ms=t0 + 1500)
    assert len(segments(broker, topic)) == 2
    assert [int(f.stem) for f in segments(broker, topic)] == [0, 3]
    # segment.ms changed at runtime applies to the next append (2 s past the segment's first
    # batch: 800 ms would roll).
    alter(admin, topic, segment_ms=str(7 * 24 * HOUR_MS))
    produce_confluent(broker, topic, 1, timestamp_ms=t0 + 3000)
    assert len(segments(broker, topic)) == 2


# --- retention ----------------------------------------------------------------------------


def test_time_retention_of_old_records_moves_the_log_start(broker: BrokerProcess,
                                                           admin: AdminClient) -> None:
    """Records stamped two hours ago in a topic that keeps one hour: their segments go at
    the next check; the segment that also holds fresh records stays."""
    topic = new_topic(admin, {"segment.bytes": "2048", "retention.ms": str(HOUR_MS)})
    old = produce_confluent(broker, topic, 60, timestamp_ms=int(time.time() * 1000)
                            - 2 * HOUR_MS, prefix="old")
    fresh = produce_confluent(broker, topic, 30, prefix="fresh")
    first_fresh = min(fresh)
    # The segment holding the first fresh record (possibly with old ones before it).
    bases = [int(f.stem) for f in segments(broker, topic)]
    keep_from = max(b for b in bases if b <= first_fresh)
    wait_until("old segments are deleted", lambda: earliest(broker, topic) == keep_from)
    assert keep_from > 0
    assert int(segments(broker, topic)[0].stem) == keep_from
    wait_until("deleted files are removed",
               lambda: not list((broker.data_dir / f"{topic}-0").glob("*.deleted")))
    fetched = fetch_all(broker.port(), topic)
    assert fetched.log_start_offset == keep_from
    assert {o: v for o, _k, v in fetched.records} == {
        o: v for o, v in {**old, **fresh}.items() if o >= keep_from}


def test_time_retention_in_real_time_empties_the_log(broker: BrokerProcess,
                                                     admin: AdminClient) -> None:
    """retention.ms of 1 s: after a few seconds even the active segment is gone; the log
    start and end meet, and new records continue the offsets."""
    topic = new_topic(admin, {"segment.bytes": "4096", "retention.ms": "1000"})
    acked = produce_confluent(broker, topic, 50)
    end = max(acked) + 1
    wait_until("everything expired", lambda: earliest(broker, topic) == end)
    assert latest(broker, topic) == end
    more = produce_confluent(broker, topic, 2, prefix="after")
    assert sorted(more) == [end, end + 1]


def test_size_retention_keeps_the_newest_bytes(broker: BrokerProcess,
                                               admin: AdminClient) -> None:
    topic = new_topic(admin, {"segment.bytes": "1024", "retention.bytes": "4096"})
    acked = produce_confluent(broker, topic, 200, size=100)
    end = max(acked) + 1

    def trimmed() -> bool:
        # Kafka's rule: drop oldest segments while the log stays at least retention.bytes
        # without them; so what is left exceeds the limit by less than its oldest segment.
        try:
            sizes = [f.stat().st_size for f in segments(broker, topic)]
        except FileNotFoundError:  # renamed to .deleted between listing and stat
            return False
        return sum(sizes) - sizes[0] < 4096 <= sum(sizes)

    wait_until("size retention ran", trimmed)
    start = earliest(broker, topic)
    assert 0 < start < end
    assert int(segments(broker, topic)[0].stem) == start
    fetched = fetch_all(broker.port(), topic)
    assert {o: v for o, _k, v in fetched.records} == {o: v for o, v in acked.items()
                                                      if o >= start}


def test_consumer_below_the_log_start_gets_out_of_range(broker: BrokerProcess,
                                                        admin: AdminClient) -> None:
    topic = new_topic(admin, {"segment.bytes": "2048", "retention.ms": str(HOUR_MS)})
    produce_confluent(broker, topic, 60, timestamp_ms=int(time.time() * 1000) - 2 * HOUR_MS)
    fresh = produce_confluent(broker, topic, 20, prefix="fresh")
    wait_until("old segments are deleted", lambda: earliest(broker, topic) > 0)
    start = earliest(broker, topic)
    end = max(fresh) + 1
    with Wire(broker.port()) as wire:
        entry = fetch_raw(wire, topic, 0, 0)
        assert entry["error_code"] == ErrorCode.offset_out_of_range, entry
        assert entry["log_start_offset"] == start
        # Just below the end is fine, just past it is not.
        assert fetch_raw(wire, topic, 0, end)["error_code"] == ErrorCode.none
        assert fetch_raw(wire, topic, 0, end + 1)["error_code"] == ErrorCode.offset_out_of_range
    # auto.offset.reset=earliest: the consumer restarts at the new log start.
    got = consume_from(broker, topic, 0, "earliest", until=end)
    assert got[0].offset() == start and got[-1].offset() == end - 1
    # auto.offset.reset=latest: old records are skipped, only new ones arrive.
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "logger": RDKAFKA,
        "group.id": f"rr-{uuid.uuid4().hex[:6]}",
        "enable.auto.commit": False, "auto.offset.reset": "latest", "fetch.wait.max.ms": 50})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 20
        msg = None
        while msg is None:  # keep producing: the reset may land after the first new record
            assert time.monotonic() < deadline, "nothing arrived after the reset to latest"
            produce_confluent(broker, topic, 1, prefix="next")
            msg = consumer.poll(0.5)
        assert msg.error() is None and msg.offset() >= end, (msg.error(), msg.offset())
    finally:
        consumer.close()
    # auto.offset.reset=error: the application hears about it.
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "logger": RDKAFKA,
        "group.id": f"rr-{uuid.uuid4().hex[:6]}",
        "enable.auto.commit": False, "auto.offset.reset": "error", "fetch.wait.max.ms": 50})
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        msg = consumer.poll(10)
        assert msg is not None and msg.error() is not None, msg
        assert msg.error().code() == confluent_kafka.KafkaError._AUTO_OFFSET_RESET, msg.error()
    finally:
        consumer.close()


def test_delete_records_moves_the_low_watermark(broker: BrokerProcess,
                                                admin: AdminClient) -> None:
    topic = new_topic(admin, {"segment.bytes": "2048"})
    acked = produce_confluent(broker, topic, 100)
    end = max(acked) + 1
    keep_from = max(int(f.stem) for f in segments(broker, topic) if int(f.stem) <= 37)
    assert keep_from > 0
    futures = admin.delete_records([confluent_kafka.TopicPartition(topic, 0, 37)])
    [result] = [f.result(10) for f in futures.values()]
    assert result.low_watermark == 37
    assert earliest(broker, topic) == 37
    # Whole segments below the new start go; the one holding offset 37 stays.
    wait_until("segments below 37 are deleted",
               lambda: int(segments(broker, topic)[0].stem) == keep_from)
    got = consume_from(broker, topic, confluent_kafka.OFFSET_BEGINNING, "earliest", until=end)
    assert got[0].offset() == 37
    assert {m.offset(): m.value() for m in got} == {o: v for o, v in acked.items() if o >= 37}
    watcher = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "logger": RDKAFKA,
                                        "group.id": "wm"})
    try:
        lo, hi = watcher.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0),
                                               timeout=10)
    finally:
        watcher.close()
    assert (lo, hi) == (37, end)
    # Beyond the high watermark: refused, nothing moves.
    futures = admin.delete_records([confluent_kafka.TopicPartition(topic, 0, end + 5)])
    with pytest.raises(confluent_kafka.KafkaException) as failure:
        next(iter(futures.values())).result(10)
    assert failure.value.args[0].code() == confluent_kafka.KafkaError.OFFSET_OUT_OF_RANGE
    assert earliest(broker, topic) == 37
    # Everything (offset -1 means the high watermark); offsets then continue.
    futures = admin.delete_records([confluent_kafka.TopicPartition(
        topic, 0, confluent_kafka.OFFSET_END)])
    assert next(iter(futures.values())).result(10).low_watermark == end
    assert produce_confluent(broker, topic, 1, prefix="after").keys() == {end}
    # The new log start survives a restart.
    broker.stop()
    broker.start()
    assert earliest(broker, topic) == end


# --- dynamic topic configs ----------------------------------------------------------------


def test_retention_ms_change_applies_without_restart(broker: BrokerProcess,
                                                     admin: AdminClient) -> None:
    old_ms = int(time.time() * 1000) - 48 * HOUR_MS

    def old_and_fresh(configs: dict[str, str]) -> str:
        name = new_topic(admin, {"segment.bytes": "2048", **configs})
        produce_confluent(broker, name, 60, timestamp_ms=old_ms)
        produce_confluent(broker, name, 10, prefix="fresh")
        return name

    # Two controls that keep an hour, around the topic that keeps everything: once both lost
    # their old records, retention checks have looked at the topic after its records were
    # written (a wait for that event, instead of a pause that may hold no check at all).
    before = old_and_fresh({"retention.ms": str(HOUR_MS)})
    topic = old_and_fresh({"retention.ms": "-1"})
    after = old_and_fresh({"retention.ms": str(HOUR_MS)})
    wait_until("retention checks ran",
               lambda: earliest(broker, before) > 0 and earliest(broker, after) > 0)
    assert earliest(broker, topic) == 0  # retention.ms=-1 keeps everything
    alter(admin, topic, retention_ms=str(HOUR_MS))
    wait_until("retention.ms acts", lambda: earliest(broker, topic) > 0)


def test_max_message_bytes_change_applies_without_restart(broker: BrokerProcess,
                                                          admin: AdminClient) -> None:
    topic = new_topic(admin, {})
    with Wire(broker.port()) as wire:
        assert produce(wire, topic, 0, make_batch([b"x" * 5000]))["error_code"] == 0
        alter(admin, topic, max_message_bytes="2048")
        entry = produce(wire, topic, 0, make_batch([b"x" * 5000]))
        assert entry["error_code"] == ErrorCode.message_too_large, entry
        assert produce(wire, topic, 0, make_batch([b"x" * 1000]))["error_code"] == 0
        alter(admin, topic, max_message_bytes="100000")
        assert produce(wire, topic, 0, make_batch([b"x" * 50000]))["error_code"] == 0
    # The real client sees the broker's refusal as a delivery error.
    alter(admin, topic, max_message_bytes="2048")
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "logger": RDKAFKA})
    errors: list[confluent_kafka.KafkaError] = []
    producer.produce(topic, b"y" * 5000, partition=0,
                     on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(20)
    assert errors and errors[0] is not None
    assert errors[0].code() == confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE, errors


def test_message_timestamp_type_change_applies_without_restart(broker: BrokerProcess,
                                                               admin: AdminClient) -> None:
    topic = new_topic(admin, {"message.timestamp.type": "CreateTime"})
    created = int(time.time() * 1000) - 60_000  # recent: 7-day retention keeps it
    produce_confluent(broker, topic, 1, timestamp_ms=created, prefix="create")
    alter(admin, topic, message_timestamp_type="LogAppendTime")
    before = int(time.time() * 1000)
    produce_confluent(broker, topic, 1, timestamp_ms=created, prefix="append")
    after = int(time.time() * 1000)
    alter(admin, topic, message_timestamp_type="CreateTime")
    produce_confluent(broker, topic, 1, timestamp_ms=created + 1, prefix="create-again")
    got = consume_from(broker, topic, 0, "earliest", until=3)
    kinds = [m.timestamp() for m in got]
    assert kinds[0] == (confluent_kafka.TIMESTAMP_CREATE_TIME, created)
    assert kinds[1][0] == confluent_kafka.TIMESTAMP_LOG_APPEND_TIME
    assert before - 1000 <= kinds[1][1] <= after + 1000
    assert kinds[2] == (confluent_kafka.TIMESTAMP_CREATE_TIME, created + 1)
    # ListOffsets by timestamp follows the stored (append) time.
    with Wire(broker.port()) as wire:
        assert list_offset(wire, topic, 0, created + 2) == 1
