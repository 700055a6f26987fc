"""The idempotent producer's state follows the leader (issue 13), on three real ``moldau
serve`` brokers and a real ZooKeeper.

Followers build each partition's producer state (producer id, epoch, the last 5 batches'
sequences and offsets) from the batches they replicate, keep it in snapshots across restarts
and rebuild it after a truncation, as Kafka's ProducerStateManager does. So after a failover
the new leader answers a retried batch that the old leader appended and replicated with the
ORIGINAL offsets (Kafka's DUPLICATE handling) instead of writing it twice, and still answers a
gap with OUT_OF_ORDER_SEQUENCE_NUMBER.

- at the wire level: the same idempotent batches sent to the old leader and, after its
  kill -9, to the new one get the same offsets; the log holds each record once;
- the same through a follower that was killed and restarted in between (its state comes
  back from its snapshot and log), then leads;
- a real confluent-kafka idempotent producer (acks=all) across two leader kills: the
  read-back holds every acknowledged value exactly once, in order.
"""

from __future__ import annotations

import functools
import threading
import time
import uuid
from typing import Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.testing.cluster import BrokerCluster
from moldau.testing.waiting import wait_for
from tests.integration.broker_wire import Wire, fetch_all, list_offset, make_batch, produce

from .conftest import ClusterFactory

wait_until = functools.partial(wait_for, interval=0.1)
RF3 = {"min.insync.replicas": "2"}


def create_topic(bootstrap: str, topic: str, assignment: list[list[int]],
                 configs: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    client = AdminClient({"bootstrap.servers": bootstrap})
    client.create_topics([NewTopic(topic, num_partitions=len(assignment),
                                   replica_assignment=assignment,
                                   config={**RF3, **(configs or {})})],
                         operation_timeout=30)[topic].result(60)


def port_of(cluster: BrokerCluster, broker_id: int) -> int:
    return int(cluster.broker(broker_id).address().rsplit(":", 1)[1])


def full_isr(cluster: BrokerCluster, topic: str, partition: int = 0) -> dict[str, Any]:
    """Wait until every replica is in the ISR; the partition's state znode."""
    found: list[dict[str, Any]] = []

    def complete() -> bool:
        state = cluster.partition_state(topic, partition)
        if state is None or len(state["isr"]) < 3 or state["leader"] < 0:
            return False
        found.append(state)
        return True

    wait_until(complete, 60, f"{topic}-{partition} with a full ISR")
    return found[-1]


def new_leader(cluster: BrokerCluster, topic: str, old: int, partition: int = 0) -> int:
    """Wait until the controller elected a leader other than ``old``; its id."""
    found: list[int] = []

    def elected() -> bool:
        state = cluster.partition_state(topic, partition)
        if state is None or state["leader"] in (old, -1):
            return False
        found.append(int(state["leader"]))
        return True

    wait_until(elected, cluster.session_timeout_s + 30, f"a new leader of {topic}")
    return found[-1]


def init_producer_id(port: int) -> tuple[int, int]:
    """A producer id and epoch (InitProducerId v4), retried while the broker answers the
    retriable COORDINATOR_LOAD_IN_PROGRESS."""
    deadline = time.monotonic() + 60
    while True:
        with Wire(port) as wire:
            reply = wire.call(ApiKey.INIT_PRODUCER_ID, 4, {
                "transactional_id": None, "transaction_timeout": 60000,
                "producer_id": -1, "producer_epoch": -1})
        if reply["error_code"] == ErrorCode.none:
            return reply["producer_id"], reply["producer_epoch"]
        assert reply["error_code"] == ErrorCode.coordinator_load_in_progress, reply
        assert time.monotonic() < deadline, reply
        time.sleep(0.2)


class IdempotentWire:
    """Batches of one idempotent producer, kept so that they can be sent again byte for
    byte (a retry), to whichever broker a test names."""

    def __init__(self, topic: str, producer: tuple[int, int]) -> None:
        self.topic = topic
        self.pid, self.epoch = producer
        self.batches: list[tuple[int, list[bytes], bytes]] = []  # (first seq, values, batch)
        self.next_seq = 0

    def batch(self, values: list[bytes]) -> bytes:
        data = make_batch(values, producer_id=self.pid, producer_epoch=self.epoch,
                          base_sequence=self.next_seq)
        self.batches.append((self.next_seq, values, data))
        self.next_seq += len(values)
        return data

    def send(self, port: int, data: bytes) -> dict[str, Any]:
        """Produce (acks=all) until the answer is not a retriable leadership error."""
        deadline = time.monotonic() + 60
        while True:
            with Wire(port) as wire:
                answer = produce(wire, self.topic, 0, data, acks=-1)
            if answer["error_code"] not in (ErrorCode.not_leader_or_follower,
                                            ErrorCode.not_enough_replicas,
                                            ErrorCode.leader_not_available):
                return answer
            assert time.monotonic() < deadline, answer
            time.sleep(0.2)


def log_end(port: int, topic: str) -> int:
    with Wire(port) as wire:
        return list_offset(wire, topic, 0, -1)


def values_at(port: int, topic: str) -> list[tuple[int, bytes | None]]:
    return [(offset, value) for offset, _key, value in fetch_all(port, topic, 0).records]


def _failover_answers_retries_with_original_offsets(cluster: BrokerCluster, topic: str,
                                                     restart_follower: int | None,
                                                     batches: int = 3,
                                                     value_size: int = 8) -> None:
    state = full_isr(cluster, topic)
    old = int(state["leader"])
    producer = IdempotentWire(topic, init_producer_id(port_of(cluster, old)))
    first_answers = []
    for i in range(batches):
        data = producer.batch([f"v{i}-{j}-".encode().ljust(value_size, b"x")
                               for j in range(i % 3 + 1)])
        answer = producer.send(port_of(cluster, old), data)
        assert answer["error_code"] == ErrorCode.none, answer
        first_answers.append(answer["base_offset"])
    end = log_end(port_of(cluster, old), topic)
    assert end == first_answers[-1] + (batches - 1) % 3 + 1
    if restart_follower is not None:
        # The follower's producer state must come back from its snapshot and its log.
        cluster.kill9(restart_follower)
        cluster.restart(restart_follower)
        full_isr(cluster, topic)

    cluster.kill9(old)
    leader = new_leader(cluster, topic, old)
    if restart_follower is not None:
        assert leader == restart_follower, f"broker {leader} leads, not {restart_follower}"
    port = port_of(cluster, leader)
    # Every retry of a batch the old leader appended and replicated: its original offsets
    # (a producer has at most 5 requests in flight: the last 5 batches are remembered).
    for (_seq, _values, data), original in list(zip(producer.batches, first_answers,
                                                    strict=True))[-5:]:
        answer = producer.send(port, data)
        assert answer["error_code"] == ErrorCode.none, answer
        assert answer["base_offset"] == original, (answer, original)
    assert log_end(port, topic) == end, "a retried batch was written again"
    # A gap is still a gap under the new leader; the next batch in sequence goes on.
    skipped = producer.batch([b"skipped"])
    gap = producer.batch([b"after-the-gap"])
    answer = producer.send(port, gap)
    assert answer["error_code"] == ErrorCode.out_of_order_sequence_number, answer
    answer = producer.send(port, skipped)
    assert answer["error_code"] == ErrorCode.none and answer["base_offset"] == end, answer
    answer = producer.send(port, gap)
    assert answer["error_code"] == ErrorCode.none and answer["base_offset"] == end + 1, answer
    expected = [v for _seq, values, _data in producer.batches for v in values]
    got = values_at(port, topic)
    assert [v for _o, v in got] == expected
    assert [o for o, _v in got] == list(range(first_answers[0], first_answers[0] + len(expected)))


def test_a_retry_after_leader_kill9_gets_its_original_offsets(
        cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(3)
    topic = f"dup-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap(), topic, [[1, 2, 3]])
    _failover_answers_retries_with_original_offsets(cluster, topic, restart_follower=None)


def test_a_restarted_follower_that_becomes_leader_still_knows_the_producer(
        cluster_factory: ClusterFactory) -> None:
    """Broker 2 is killed and restarted (state from its producer snapshot and log), then the
    leader (broker 1) is killed: broker 2, first in the assignment, leads and recognises the
    retries."""
    cluster = cluster_factory(3)
    topic = f"dup-restart-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap(), topic, [[1, 2, 3]], {"segment.bytes": "1024"})
    wait_until(lambda: (cluster.partition_state(topic, 0) or {}).get("leader") == 1, 60,
               "broker 1 leading")
    # Small segments: the follower rolls (and snapshots its producer state) several times.
    _failover_answers_retries_with_original_offsets(cluster, topic, restart_follower=2,
                                                     batches=9, value_size=200)


def test_confluent_idempotent_producer_across_leader_kills_has_no_duplicates(
        cluster_factory: ClusterFactory) -> None:
    """A real idempotent producer keeps sending while the leader is killed twice (the first
    victim restarted in between): every acknowledged value reads back exactly once, and the
    values of the one partition are in the order they were produced."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    cluster = cluster_factory(3)
    topic = f"dup-client-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap(), topic, [[1, 2, 3]])
    full_isr(cluster, topic)
    producer = Producer({"bootstrap.servers": cluster.bootstrap(), "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5, "message.timeout.ms": 120000})
    acked: list[str] = []
    errors: list[Any] = []
    stop = threading.Event()
    sent = [0]

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked.append(msg.value().decode())

    def keep_producing() -> None:
        while not stop.is_set():
            producer.produce(topic, f"r{sent[0]}".encode(), partition=0, on_delivery=report)
            sent[0] += 1
            producer.poll(0.01)

    worker = threading.Thread(target=keep_producing)
    worker.start()
    try:
        victims = []
        for _round in range(2):
            time.sleep(1)
            old = int(full_isr(cluster, topic)["leader"])
            count = len(acked)
            cluster.kill9(old)
            victims.append(old)
            new_leader(cluster, topic, old)
            wait_until(lambda c=count: len(acked) > c + 50, 60, "deliveries after the kill")
            cluster.restart(old)
    finally:
        stop.set()
        worker.join(30)
    assert producer.flush(150) == 0
    assert errors == []
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap(), "group.id": "unused",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        read: list[str] = []
        deadline = time.monotonic() + 60
        while len(read) < sent[0] and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 1.0):
                if msg.error() is None:
                    read.append(msg.value().decode())
    finally:
        consumer.close()
    assert len(set(read)) == len(read), "duplicated records in the read-back"
    assert read == [f"r{i}" for i in range(sent[0])]
    assert sorted(acked, key=lambda v: int(v[1:])) == read
