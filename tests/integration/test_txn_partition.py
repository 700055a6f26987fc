"""Transactions on a partition, through a real broker process and real consumers: control
batches written by WriteTxnMarkers, the last stable offset, the aborted-transactions list of
read_committed fetches, and ListOffsets by isolation level; then kill -9 and recovery of the
``.txnindex`` and the LSO.

Producer ids come from InitProducerId without a transactional id and transactional batches are
produced raw, so this exercises the partition side alone (no transaction coordinator):
``transaction.partition.verification.enable`` is off, since no coordinator knows these
producers. confluent-kafka and kafka-python consumers read with read_committed (aborted
records never visible, the LSO holds them while a transaction is open) and read_uncommitted
(everything).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_wire import Wire, create_topic, fetch_body
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.records.codec import build_batch
from moldau.testing.runner import BrokerProcess

TOPIC = "txn-partition"
SETTINGS = {"transaction.partition.verification.enable": "false"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("txn-partition") / "data"
    node = BrokerProcess(data, settings=SETTINGS).start()
    try:
        yield node
    finally:
        node.stop()
        node.close()


class Txns:
    """Raw protocol calls of a transactional producer without a coordinator."""

    def __init__(self, wire: Wire, topic: str) -> None:
        self.wire = wire
        self.topic = topic
        self.seq: dict[int, int] = {}

    def new_producer(self) -> int:
        answer = self.wire.call(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": None, "transaction_timeout_ms": 60000,
            "producer_id": -1, "producer_epoch": -1})
        assert answer["error_code"] == ErrorCode.none, answer
        self.seq[answer["producer_id"]] = 0
        return answer["producer_id"]

    def produce(self, values: list[bytes], pid: int = -1) -> int:
        txn = pid >= 0
        seq = self.seq.get(pid, -1)
        batch = build_batch([(None, v, [], int(time.time() * 1000)) for v in values],
                            producer_id=pid, producer_epoch=0 if txn else -1,
                            base_sequence=seq, transactional=txn)
        if txn:
            self.seq[pid] = seq + len(values)
        answer = self.wire.call(ApiKey.PRODUCE, 9, {
            "transactional_id": f"h2-test-{pid}" if txn else None, "acks": -1,
            "timeout": 10000, "topic_data": [{"name": self.topic, "partition_data": [
                {"index": 0, "records": batch}]}]})
        [entry] = answer["responses"][0]["partition_responses"]
        assert entry["error_code"] == ErrorCode.none, entry
        return entry["base_offset"]

    def end(self, pid: int, commit: bool, coordinator_epoch: int = 0) -> int:
        answer = self.wire.call(ApiKey.WRITE_TXN_MARKERS, 1, {"markers": [{
            "producer_id": pid, "producer_epoch": 0, "transaction_result": commit,
            "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": self.topic, "partition_indexes": [0]}]}]})
        return answer["markers"][0]["topics"][0]["partitions"][0]["error_code"]

    def latest(self, committed: bool) -> int:
        answer = self.wire.call(ApiKey.LIST_OFFSETS, 7, {
            "replica_id": -1, "isolation_level": 1 if committed else 0,
            "topics": [{"name": self.topic, "partitions": [
                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
        entry = answer["topics"][0]["partitions"][0]
        assert entry["error_code"] == ErrorCode.none, entry
        return entry["offset"]

    def fetch_committed(self, offset: int) -> dict[str, Any]:
        body = fetch_body(self.topic, 0, offset)
        body["isolation_level"] = 1
        return self.wire.call(ApiKey.FETCH, 12, body)["responses"][0]["partitions"][0]


def confluent_values(port: int, isolation: str, count: int) -> tuple[list[bytes], int]:
    """The first ``count`` values a confluent-kafka consumer reads, and its position then."""
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "unused",
                         "enable.auto.commit": False, "isolation.level": isolation,
                         "enable.partition.eof": False})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        return values, consumer.position([TopicPartition(TOPIC, 0)])[0].offset
    finally:
        consumer.close()


def kafka_python_values(port: int, isolation: str, count: int) -> tuple[list[bytes], int]:
    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}",
                             isolation_level=isolation, enable_auto_commit=False)
    try:
        tp = KTopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values += [r.value for r in records]
        return values, consumer.position(tp)
    finally:
        consumer.close()


READERS = {"confluent-kafka": confluent_values, "kafka-python": kafka_python_values}
COMMITTED = [b"b0", b"b1", b"p0", b"p1"]
EVERYTHING = [b"a0", b"a1", b"b0", b"b1", b"p0", b"a2", b"p1"]


@pytest.fixture(scope="module")
def written(broker: BrokerProcess) -> dict[str, int]:
    """A aborts twice, B commits, plain records between; then C stays open."""
    with Wire(broker.port()) as wire:
        create_topic(wire, TOPIC)
        txns = Txns(wire, TOPIC)
        a, b = txns.new_producer(), txns.new_producer()
        assert txns.produce([b"a0", b"a1"], a) == 0
        assert txns.produce([b"b0", b"b1"], b) == 2
        assert txns.produce([b"p0"]) == 4
        assert (txns.latest(committed=False), txns.latest(committed=True)) == (5, 0)
        assert txns.end(a, commit=False) == ErrorCode.none  # marker at 5
        assert txns.latest(committed=True) == 2  # B is still open
        # A coordinator with an older epoch than the last marker's is a zombie.
        assert txns.end(b, commit=True, coordinator_epoch=-1) == ErrorCode.none
        assert txns.produce([b"a2"], a) == 7
        assert txns.end(a, commit=False, coordinator_epoch=3) == ErrorCode.none
        assert txns.end(a, commit=False, coordinator_epoch=2) \
            == ErrorCode.transaction_coordinator_fenced
        assert txns.produce([b"p1"]) == 9
        assert txns.latest(committed=True) == 10
        read = txns.fetch_committed(0)
        assert read["last_stable_offset"] == 10
        assert [(t["producer_id"], t["first_offset"]) for t in read["aborted_transactions"]] \
            == [(a, 0), (a, 7)]
        c = txns.new_producer()
        assert txns.produce([b"c0"], c) == 10
        assert txns.latest(committed=True) == 10  # held by C's open transaction
        return {"c": c, "lso": 10}


@pytest.mark.parametrize("client", sorted(READERS))
def test_read_committed_skips_aborted_and_stops_at_the_lso(broker: BrokerProcess,
                                                          written: dict[str, int],
                                                          client: str) -> None:
    values, position = READERS[client](broker.port(), "read_committed", len(COMMITTED))
    assert values == COMMITTED
    # Held at the LSO (C's open transaction), not past it.
    assert position == written["lso"]


@pytest.mark.parametrize("client", sorted(READERS))
def test_read_uncommitted_sees_everything(broker: BrokerProcess, written: dict[str, int],
                                          client: str) -> None:
    values, _position = READERS[client](broker.port(), "read_uncommitted", len(EVERYTHING) + 1)
    assert values == [*EVERYTHING, b"c0"]


def test_txnindex_and_lso_survive_kill_9(broker: BrokerProcess, written: dict[str, int],
                                         tmp_path: Path) -> None:
    """Last in the module: it kills the broker and commits C."""
    partition_dir = broker.data_dir / f"{TOPIC}-0"
    before = {p.name: p.read_bytes() for p in partition_dir.glob("*.txnindex")}
    assert sum(len(b) for b in before.values()) == 2 * 34  # two aborts
    broker.kill()
    broker.start()
    after = {p.name: p.read_bytes() for p in partition_dir.glob("*.txnindex")}
    assert after == before
    with Wire(broker.port()) as wire:
        txns = Txns(wire, TOPIC)
        deadline = time.monotonic() + 30
        while True:  # the partition is led again once the broker has replayed its metadata
            try:
                lso = txns.latest(committed=True)
                break
            except AssertionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert lso == written["lso"]  # C's transaction is still open after recovery
        assert txns.latest(committed=False) == 11
        assert txns.end(written["c"], commit=True) == ErrorCode.none
        assert txns.latest(committed=True) == 12
    values, _position = confluent_values(broker.port(), "read_committed", len(COMMITTED) + 1)
    assert values == [*COMMITTED, b"c0"]
