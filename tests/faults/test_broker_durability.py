"""Durability of a real ``moldau serve`` process: kill -9 under load, torn tails, flipped bytes,
clean versus unclean restarts, metadata that must survive.

Durability claim (as Kafka's default, DESIGN.md): a record is acknowledged once its batch is
written to the segment file (no fsync; ``log.flush.interval.*`` unset), so it survives the death
of the broker process (the bytes are in the page cache) but these tests claim nothing about a
power loss. Every restart must serve every acknowledged record, never a batch whose CRC-32C
does not match, and continue offsets right after the last good batch.

The storage layer's own recovery cases (log objects, no process) are in
test_storage_recovery.py and test_storage_kill9.py; these tests go through the broker, its
start-up log line and real clients.
"""

from __future__ import annotations

import logging
import random
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.records.batch import HEADER_SIZE, iter_batches
from moldau.testing.runner import BrokerProcess
from tests.integration.broker_wire import (
    Wire,
    create_topic,
    fetch_all,
    fetch_raw,
    list_offset,
    make_batch,
    metadata,
    produce,
)

# librdkafka logs go to logging (pytest shows them for failed tests only).
RDKAFKA = logging.getLogger("rdkafka")
ROOT = Path(__file__).resolve().parents[2]
_LOADED = re.compile(r"loaded (\d+) logs \((\d+) segments; (\d+) recovered, (\d+) batches "
                     r"scanned, (\d+) bytes truncated\)")


def load_stats(broker: BrokerProcess) -> dict[str, int]:
    """The numbers of the most recent start-up's "loaded N logs" line."""
    matches = _LOADED.findall(broker.log_text())
    assert matches, broker.log_text()[-2000:]
    logs, segments, recovered, scanned, truncated = map(int, matches[-1])
    return {"logs": logs, "segments": segments, "recovered": recovered, "scanned": scanned,
            "truncated": truncated}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    node = BrokerProcess(tmp_path / "data")
    yield node
    node.stop()
    node.close()


def partition_dir(broker: BrokerProcess, topic: str, partition: int = 0) -> Path:
    return broker.data_dir / f"{topic}-{partition}"


def segment_files(broker: BrokerProcess, topic: str, partition: int = 0) -> list[Path]:
    return sorted(partition_dir(broker, topic, partition).glob("*.log"))


def produce_values(port: int, topic: str, values: list[bytes], per_batch: int = 1,
                   partition: int = 0) -> dict[int, bytes]:
    """Produce (acks=all) and return {offset: value} of what was acknowledged."""
    acked: dict[int, bytes] = {}
    with Wire(port) as wire:
        for i in range(0, len(values), per_batch):
            chunk = values[i:i + per_batch]
            entry = produce(wire, topic, partition, make_batch(chunk))
            assert entry["error_code"] == ErrorCode.none, entry
            for j, value in enumerate(chunk):
                acked[entry["base_offset"] + j] = value
    return acked


def served(port: int, topic: str, partition: int = 0) -> dict[int, bytes | None]:
    """{offset: value} of everything the broker serves (CRC of every batch checked)."""
    fetched = fetch_all(port, topic, partition)
    offsets = [o for o, _k, _v in fetched.records]
    assert offsets == list(range(fetched.log_start_offset, fetched.high_watermark)), (
        "offsets are not contiguous")
    return {o: v for o, _k, v in fetched.records}


def consume_with_confluent(bootstrap: str, topic: str, partitions: int,
                           expected_ends: dict[int, int]) -> dict[tuple[int, int], bytes]:
    """Read every partition from the start to ``expected_ends`` with librdkafka's CRC checks
    on; any error (a corrupt batch among them) fails the test."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "logger": RDKAFKA, "group.id": f"verify-{time.time()}",
        "enable.auto.commit": False, "check.crcs": True, "auto.offset.reset": "error",
        "fetch.wait.max.ms": 50})
    got: dict[tuple[int, int], bytes] = {}
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                         for p in range(partitions)])
        done = {p for p in range(partitions) if expected_ends.get(p, 0) == 0}
        deadline = time.monotonic() + 60
        while len(done) < partitions:
            assert time.monotonic() < deadline, f"consumer stuck; done {done}"
            for msg in consumer.consume(1000, 0.5):
                assert msg.error() is None, msg.error()
                got[(msg.partition(), msg.offset())] = msg.value()
                if msg.offset() + 1 >= expected_ends[msg.partition()]:
                    done.add(msg.partition())
    finally:
        consumer.close()
    return got


# --- kill -9 under a real producer's load -------------------------------------------------

PRODUCER_CHILD = textwrap.dedent("""
    import sys, confluent_kafka
    bootstrap, topic, path = sys.argv[1:4]
    out = open(path, "a", buffering=1)  # one write(2) per line: survives our own kill -9

    def on_delivery(err, msg):
        if err is None:
            out.write(f"{msg.partition()} {msg.offset()} {msg.value().decode()}\\n")

    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
        "linger.ms": 2, "message.timeout.ms": 30000})
    i = 0
    while True:
        value = f"rec-{i}-" + "x" * (i % 300)
        try:
            producer.produce(topic, value.encode(), partition=i % 3, on_delivery=on_delivery)
            i += 1
        except BufferError:
            producer.poll(0.01)
        if i % 100 == 0:
            producer.poll(0)
""")


def test_kill9_during_produce_load_keeps_every_acknowledged_record(
        broker: BrokerProcess, tmp_path: Path) -> None:
    broker.settings.update({"log.segment.bytes": 256 * 1024})
    broker.start()
    with Wire(broker.port()) as wire:
        create_topic(wire, "load", partitions=3)
    acks_path = tmp_path / "acks.txt"
    child = subprocess.Popen(
        [sys.executable, "-c", PRODUCER_CHILD, broker.bootstrap, "load", str(acks_path)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        started = time.monotonic()
        while time.monotonic() < deadline:
            lines = acks_path.read_text().count("\n") if acks_path.exists() else 0
            if lines >= 5000 and time.monotonic() - started > 2.5:
                break
            assert child.poll() is None, child.stderr.read() if child.stderr else ""
            time.sleep(0.05)
        else:
            pytest.fail("the producer did not get 5000 acknowledgements within 60 s")
        broker.kill()  # mid-load: requests in flight, segments half written
        time.sleep(0.5)
    finally:
        child.kill()
        child.wait()
    acked: dict[tuple[int, int], bytes] = {}
    for line in acks_path.read_text().splitlines():
        partition, offset, value = line.split(" ", 2)
        acked[(int(partition), int(offset))] = value.encode()
    assert len(acked) >= 5000

    broker.start()
    stats = load_stats(broker)
    assert stats["recovered"] >= 3 and stats["scanned"] > 0, stats
    ends = {}
    with Wire(broker.port()) as wire:
        for p in range(3):
            ends[p] = list_offset(wire, "load", p, -1)
    for p in range(3):
        on_disk = served(broker.port(), "load", p)  # raw fetch: every batch's CRC checked
        mine = {o: v for (q, o), v in acked.items() if q == p}
        missing = sorted(set(mine) - set(on_disk))
        assert not missing, f"partition {p}: acknowledged offsets lost: {missing[:20]}"
        assert all(on_disk[o] == v for o, v in mine.items())
    got = consume_with_confluent(broker.bootstrap, "load", 3, ends)
    assert all(got[key] == value for key, value in acked.items())
    # The log goes on where it stopped.
    more = produce_values(broker.port(), "load", [b"after-restart"])
    assert list(more) == [ends[0]]


# --- torn tails ---------------------------------------------------------------------------

def _tail(kind: str, sample_batch: bytes) -> bytes:
    rng = random.Random(kind)
    if kind == "garbage":
        return rng.randbytes(5000)
    if kind == "partial header":
        return sample_batch[:HEADER_SIZE - 20]
    if kind == "partial body":
        return sample_batch[:len(sample_batch) - 17]
    if kind == "zeros":  # a preallocated or zero-filled tail after a crash
        return bytes(4096)
    raise AssertionError(kind)


@pytest.mark.parametrize(("tail", "shutdown"), [
    ("garbage", "clean"), ("partial header", "kill"), ("partial body", "kill"),
    ("zeros", "clean"),
])
def test_torn_tail_is_truncated_and_offsets_continue(broker: BrokerProcess, tail: str,
                                                     shutdown: str) -> None:
    broker.start()
    with Wire(broker.port()) as wire:
        create_topic(wire, "torn")
    values = [b"torn-%d-" % i + b"v" * (i % 50) for i in range(300)]
    acked = produce_values(broker.port(), "torn", values, per_batch=3)
    end = max(acked) + 1
    broker.stop() if shutdown == "clean" else broker.kill()
    active = segment_files(broker, "torn")[-1]
    garbage = _tail(tail, make_batch([b"t" * 200, b"u" * 200]))
    with open(active, "ab") as f:
        f.write(garbage)

    broker.start()
    stats = load_stats(broker)
    assert stats["truncated"] >= len(garbage), stats
    assert active.stat().st_size == sum(
        h.size for _p, h in iter_batches(active.read_bytes())), "torn bytes left in the file"
    assert served(broker.port(), "torn") == acked
    more = produce_values(broker.port(), "torn", [b"after-1", b"after-2"], per_batch=2)
    assert sorted(more) == [end, end + 1]
    broker.kill()
    broker.start()
    assert served(broker.port(), "torn") == {**acked, **more}


# --- flipped bytes ------------------------------------------------------------------------

def test_flipped_bytes_in_the_unflushed_tail_are_detected(broker: BrokerProcess) -> None:
    """kill -9 (no clean-shutdown marker), then a byte flips in the middle of the active
    segment: start-up truncates at that batch; no client ever sees a corrupt batch."""
    broker.start()
    with Wire(broker.port()) as wire:
        create_topic(wire, "flip")
    values = [b"flip-%04d-" % i + b"w" * 100 for i in range(400)]
    acked = produce_values(broker.port(), "flip", values, per_batch=4)
    broker.kill()
    active = segment_files(broker, "flip")[-1]
    data = bytearray(active.read_bytes())
    batches = list(iter_batches(data))
    pos, victim = batches[len(batches) // 2]
    data[pos + HEADER_SIZE + 30] ^= 0x5A  # inside the records: only the CRC can tell
    active.write_bytes(bytes(data))

    broker.start()
    stats = load_stats(broker)
    assert stats["truncated"] == len(data) - pos, stats
    kept = {o: v for o, v in acked.items() if o < victim.base_offset}
    assert served(broker.port(), "flip") == kept
    got = consume_with_confluent(broker.bootstrap, "flip", 1, {0: victim.base_offset})
    assert {o: v for (_p, o), v in got.items()} == kept
    more = produce_values(broker.port(), "flip", [b"after-flip"])
    assert list(more) == [victim.base_offset]


def test_flipped_bytes_below_the_recovery_point(broker: BrokerProcess) -> None:
    """A byte flips in an old segment the broker already flushed and checkpointed, so start-up
    does not scan it (as in Kafka). The broker serves that batch as stored, or refuses it
    with an error; a client with CRC checks on (librdkafka ``check.crcs``) stops at it with an
    error and never receives a wrong value; everything before it arrives intact."""
    broker.settings.update({"log.segment.bytes": 16 * 1024})
    broker.start()
    with Wire(broker.port()) as wire:
        create_topic(wire, "old")
    values = [b"old-%04d-" % i + b"z" * 150 for i in range(600)]
    acked = produce_values(broker.port(), "old", values, per_batch=5)
    broker.stop()  # clean: everything flushed and checkpointed
    first = segment_files(broker, "old")[0]
    data = bytearray(first.read_bytes())
    pos, victim = list(iter_batches(data))[3]
    data[pos + HEADER_SIZE + 10] ^= 0x01
    first.write_bytes(bytes(data))
    stored = bytes(data[pos:pos + victim.size])

    broker.start()
    assert load_stats(broker)["truncated"] == 0
    with Wire(broker.port()) as wire:
        entry = fetch_raw(wire, "old", 0, victim.base_offset)
    if entry["error_code"] == ErrorCode.none:
        assert bytes(entry["records"][:victim.size]) == stored, "served a modified batch"

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "logger": RDKAFKA, "group.id": "bitrot",
        "check.crcs": True, "enable.auto.commit": False, "auto.offset.reset": "error"})
    got: dict[int, bytes] = {}
    first_error = None
    try:
        consumer.assign([confluent_kafka.TopicPartition("old", 0, 0)])
        deadline = time.monotonic() + 30
        while first_error is None and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.5):
                if msg.error() is not None:
                    first_error = (msg.offset(), msg.error())
                    break
                got[msg.offset()] = msg.value()
    finally:
        consumer.close()
    assert first_error is not None, "the corrupt batch went unnoticed"
    assert first_error[0] == victim.base_offset, first_error
    assert got == {o: v for o, v in acked.items() if o < victim.base_offset}


# --- clean versus unclean restarts ---------------------------------------------------------

def _wait_for_recovery_checkpoint(broker: BrokerProcess, topic: str, offset: int) -> None:
    path = broker.data_dir / "recovery-point-offset-checkpoint"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if path.exists():
            for line in path.read_text().splitlines()[2:]:
                name, part, point = line.split()
                if name == topic and int(part) == 0 and int(point) >= offset:
                    return
        time.sleep(0.2)
    pytest.fail(f"recovery point of {topic}-0 did not reach {offset}")


def test_clean_restart_skips_the_scan_that_kill9_needs(broker: BrokerProcess) -> None:
    """~48 MB in 16 KiB batches over 4 MiB segments. After kill -9 only the unflushed tail
    (the active segment) is scanned; after SIGTERM nothing is."""
    broker.settings.update({"log.segment.bytes": 4 * 1024 * 1024})
    broker.start()
    with Wire(broker.port()) as wire:
        create_topic(wire, "big")
    rng = random.Random(7)
    payload = rng.randbytes(16 * 1024 - 100)
    batches = 3000
    with Wire(broker.port()) as wire:
        for i in range(batches):
            entry = produce(wire, "big", 0, make_batch([b"%06d" % i + payload]), acks=1)
            assert entry["error_code"] == ErrorCode.none, entry
    segments = segment_files(broker, "big")
    assert len(segments) >= 10
    active_base = int(segments[-1].stem)
    _wait_for_recovery_checkpoint(broker, "big", active_base)
    in_active = len(list(iter_batches(segments[-1].read_bytes())))

    broker.kill()
    began = time.monotonic()
    broker.start()
    unclean_s = time.monotonic() - began
    unclean = load_stats(broker)
    assert unclean["recovered"] >= 1 and unclean["truncated"] == 0, unclean
    # The active segment is scanned; the flushed, checkpointed ones are not.
    assert in_active <= unclean["scanned"] < batches, (unclean, in_active)

    broker.stop()
    began = time.monotonic()
    broker.start()
    clean_s = time.monotonic() - began
    clean = load_stats(broker)
    assert clean["scanned"] == 0 and clean["recovered"] == 0, clean
    assert clean["segments"] == unclean["segments"]
    with Wire(broker.port()) as wire:
        assert list_offset(wire, "big", 0, -1) == batches
    print(f"start after kill -9: {unclean_s:.2f}s ({unclean['scanned']} batches scanned); "
          f"after SIGTERM: {clean_s:.2f}s")


# --- metadata -----------------------------------------------------------------------------

def _admin_state(admin: AdminClient, port: int, topics: list[str]) -> dict[str, object]:
    meta = admin.list_topics(timeout=10)
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics
                 if t in meta.topics]
    configs = {}
    for resource, future in admin.describe_configs(resources).items():
        entries = future.result(10)
        configs[resource.name] = {k: e.value for k, e in entries.items()
                                  if e.source == confluent_kafka.admin.ConfigSource.
                                  DYNAMIC_TOPIC_CONFIG.value}
    with Wire(port) as wire:
        ids = {t["name"]: t["topic_id"] for t in metadata(wire, topics, allow_create=False,
                                                          version=12)["topics"]}
    return {"topics": {t: len(meta.topics[t].partitions) for t in topics if t in meta.topics},
            "configs": configs, "ids": ids}


@pytest.mark.parametrize("shutdown", ["kill", "clean"])
def test_topics_configs_and_ids_survive_restart(broker: BrokerProcess, shutdown: str) -> None:
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "logger": RDKAFKA})
    topics = ["meta-a", "meta-b", "meta-gone"]
    futures = admin.create_topics([
        NewTopic("meta-a", 2, 1, config={"retention.ms": "123456789",
                                         "cleanup.policy": "compact"}),
        NewTopic("meta-b", 1, 1),
        NewTopic("meta-gone", 1, 1),
    ])
    for future in futures.values():
        future.result(10)
    admin.incremental_alter_configs([ConfigResource(
        ConfigResource.Type.TOPIC, "meta-b", incremental_configs=[
            ConfigEntry("max.message.bytes", "2048",
                        incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("message.timestamp.type", "LogAppendTime",
                        incremental_operation=AlterConfigOpType.SET)])])[
        ConfigResource(ConfigResource.Type.TOPIC, "meta-b")].result(10)
    for future in admin.create_partitions([NewPartitions("meta-a", 4)]).values():
        future.result(10)
    for future in admin.delete_topics(["meta-gone"]).values():
        future.result(10)
    before = _admin_state(admin, broker.port(), topics)
    assert before["topics"] == {"meta-a": 4, "meta-b": 1}
    assert before["configs"]["meta-b"] == {"max.message.bytes": "2048",
                                           "message.timestamp.type": "LogAppendTime"}
    assert before["configs"]["meta-a"] == {"retention.ms": "123456789",
                                           "cleanup.policy": "compact"}

    del admin  # its reconnect attempts would only add noise while the broker is down
    broker.stop() if shutdown == "clean" else broker.kill()
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "logger": RDKAFKA})
    after = _admin_state(admin, broker.port(), topics)
    assert after == before
    assert not partition_dir(broker, "meta-gone").exists()
    # The configs are in force, not just described.
    with Wire(broker.port()) as wire:
        too_big = produce(wire, "meta-b", 0, make_batch([b"x" * 3000]))
        assert too_big["error_code"] == ErrorCode.message_too_large, too_big
        ok = produce(wire, "meta-b", 0, make_batch([b"y" * 100], timestamp_ms=1000))
        assert ok["error_code"] == ErrorCode.none and ok["log_append_time"] is not None, ok
        # A new topic gets an id of its own, never an old one.
        create_topic(wire, "meta-new")
        [new] = metadata(wire, ["meta-new"], version=12)["topics"]
    assert new["topic_id"] not in before["ids"].values()


def test_producer_state_survives_kill9(broker: BrokerProcess) -> None:
    """An idempotent producer's retry of its last batch after the broker was killed and
    restarted is still recognised as a duplicate (producer state rebuilt from the log)."""
    broker.start()
    with Wire(broker.port()) as wire:
        create_topic(wire, "idem")
        reply = wire.call(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": None, "transaction_timeout": 60000,
            "producer_id": -1, "producer_epoch": -1})
        pid = reply["producer_id"]
        offsets = []
        for seq in range(0, 30, 3):
            batch = make_batch([b"i%d" % (seq + k) for k in range(3)], producer_id=pid,
                               producer_epoch=0, base_sequence=seq)
            entry = produce(wire, "idem", 0, batch)
            assert entry["error_code"] == ErrorCode.none, entry
            offsets.append(entry["base_offset"])
    broker.kill()
    broker.start()
    with Wire(broker.port()) as wire:
        retry = produce(wire, "idem", 0, batch)
        assert retry["error_code"] == ErrorCode.none and retry["base_offset"] == offsets[-1]
        gap = produce(wire, "idem", 0, make_batch([b"gap"], producer_id=pid, producer_epoch=0,
                                                  base_sequence=40))
        assert gap["error_code"] == ErrorCode.out_of_order_sequence_number, gap
        nxt = produce(wire, "idem", 0, make_batch([b"next"], producer_id=pid,
                                                  producer_epoch=0, base_sequence=30))
        assert nxt["error_code"] == ErrorCode.none and nxt["base_offset"] == 30, nxt
    assert len(served(broker.port(), "idem")) == 31
