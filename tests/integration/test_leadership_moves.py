"""Leadership leaving and coming back, as a cluster's controller makes it happen, seen by real
clients on one node: the metadata records a ZooKeeper-fed broker replays
(PartitionChangeRecord with no leader, then this broker again in a new epoch) and the fence a
broker puts up when its session expires. confluent-kafka's producer and consumer get
NOT_LEADER_OR_FOLLOWER / LEADER_NOT_AVAILABLE while there is no leader, NOT_COORDINATOR /
COORDINATOR_NOT_AVAILABLE while the group's ``__consumer_offsets`` partition has none, and go
on when it returns: nothing lost, nothing read twice, the committed offset kept (the shard is
loaded again from the log). After the epoch change librdkafka validates its position with
OffsetForLeaderEpoch (KIP-320).
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.broker.dispatch import REGISTRY, load_handlers
from moldau.broker.group.partitioning import OFFSETS_TOPIC, partition_for
from moldau.protocol.api_keys import ApiKey
from moldau.testing.runner import InProcessBroker

TIMEOUT = 60


@pytest.fixture()
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker(settings={"group.initial.rebalance.delay.ms": 0}) as b:
        yield b


class Lines(logging.Handler):
    """librdkafka's log lines (it logs a response it cannot parse, and retries)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def client_log(name: str) -> tuple[logging.Logger, Lines]:
    logger = logging.getLogger(f"librdkafka.{name}.{uuid.uuid4().hex[:6]}")
    logger.propagate = False
    lines = Lines()
    logger.addHandler(lines)
    return logger, lines


def consume(consumer: Consumer, count: int, seen: list[bytes]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while len(seen) < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            seen.append(message.value())


def set_leader(broker: InProcessBroker, topic: str, partition: int, leader: int) -> None:
    context = broker.broker.context
    topic_id = context.image.topics_by_name[topic].topic_id
    broker.call(lambda: context.controller.change_partition(topic_id, partition, leader=leader))


def epoch_requests(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The OffsetForLeaderEpoch requests the broker gets from now on."""
    load_handlers()
    spec = REGISTRY[ApiKey.OFFSET_FOR_LEADER_EPOCH]
    seen: list[Any] = []

    def recording(ctx: Any, request: Any) -> Any:
        seen.append(request)
        return spec.fn(ctx, request)

    monkeypatch.setitem(REGISTRY, ApiKey.OFFSET_FOR_LEADER_EPOCH,
                        dataclasses.replace(spec, fn=recording))
    return seen


def test_clients_wait_out_a_partition_without_leader(broker: InProcessBroker,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    validations = epoch_requests(monkeypatch)
    topic = f"moves-{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(TIMEOUT)
    delivered: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                         "message.timeout.ms": TIMEOUT * 1000})

    def report(err: Any, _msg: Any) -> None:
        delivered.append(err)

    for i in range(5):
        producer.produce(topic, value=f"a{i}".encode(), on_delivery=report)
    assert producer.flush(TIMEOUT) == 0
    logger, lines = client_log("consumer")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "topic.metadata.refresh.interval.ms": 1000}, logger=logger)
    try:
        consumer.subscribe([topic])
        seen: list[bytes] = []
        consume(consumer, 5, seen)
        assert seen == [f"a{i}".encode() for i in range(5)]
        consumer.commit(asynchronous=False)

        # No leader for the topic's partition nor for the group's __consumer_offsets one.
        offsets_partition = partition_for(
            group, len(broker.broker.context.image.topics_by_name[OFFSETS_TOPIC].partitions))
        set_leader(broker, topic, 0, -1)
        set_leader(broker, OFFSETS_TOPIC, offsets_partition, -1)
        coordinator = broker.broker.context.group_coordinator
        assert offsets_partition not in coordinator.shards
        for i in range(5, 10):
            producer.produce(topic, value=f"a{i}".encode(), on_delivery=report)
        producer.poll(2.0)
        assert len(delivered) == 5  # the new records wait: no leader to take them
        assert consumer.poll(1.0) is None
        metadata = admin.list_topics(topic, timeout=TIMEOUT).topics[topic].partitions[0]
        assert (metadata.leader, metadata.error.code()) == (
            -1, KafkaError.LEADER_NOT_AVAILABLE)
        # The consumer's heartbeats now get NOT_COORDINATOR and FindCoordinator
        # COORDINATOR_NOT_AVAILABLE (librdkafka then waits for a coordinator; a commit would
        # wait up to the session timeout, so none is made here).
        time.sleep(1.0)

        # The controller elects this broker again, in a new epoch.
        set_leader(broker, topic, 0, 1)
        set_leader(broker, OFFSETS_TOPIC, offsets_partition, 1)
        assert producer.flush(TIMEOUT) == 0
        assert delivered == [None] * 10
        consume(consumer, 10, seen)
        assert seen == [f"a{i}".encode() for i in range(10)]  # none lost, none twice
        consumer.commit(asynchronous=False)
        [committed] = consumer.committed([TopicPartition(topic, 0)], timeout=TIMEOUT)
        assert committed.offset == 10
        # The consumer validated its position in the new epoch (KIP-320).
        assert any(t.topic == topic for request in validations for t in request.topics)
        # Every answer parsed (an error partition with a null record set once made librdkafka
        # fail on the whole Fetch response and retry at once, in a tight loop).
        assert [line for line in lines.lines if "parse failure" in line] == []
    finally:
        consumer.close()


def test_a_fenced_broker_is_waited_out(broker: InProcessBroker) -> None:
    topic = f"fenced-{uuid.uuid4().hex[:8]}"
    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        future.result(TIMEOUT)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                         "message.timeout.ms": TIMEOUT * 1000})
    producer.produce(topic, value=b"before", partition=0)
    assert producer.flush(TIMEOUT) == 0
    replicas = broker.broker.context.replica_manager
    broker.call(replicas.set_fenced, True)
    producer.produce(topic, value=b"during", partition=1)
    assert producer.flush(2.0) == 1  # refused (NOT_LEADER_OR_FOLLOWER), retried, still queued
    broker.call(replicas.set_fenced, False)
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        seen: list[bytes] = []
        consume(consumer, 2, seen)
        assert sorted(seen) == [b"before", b"during"]
    finally:
        consumer.close()
