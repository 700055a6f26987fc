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
- real idempotent producers (acks=all) across leader kills: confluent-kafka (two kills),
  kafka-python and aiokafka (one each): the read-back holds every acknowledged value exactly
  once, in order.
"""

from __future__ import annotations

import functools
import threading
import time
import uuid
from typing import Any

import pytest

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


class ClientProducer(threading.Thread):
    """One real client's idempotent acks=all producer sending ``r0, r1, ...`` to partition 0
    until stopped; notes what was acknowledged and every error the application saw."""

    def __init__(self, client: str, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.client, self.bootstrap, self.topic = client, bootstrap, topic
        self.stop = threading.Event()
        self.sent = 0
        self.acked: list[str] = []
        self.errors: list[Any] = []
        self.unflushed = -1

    def _value(self) -> str:
        value = f"r{self.sent}"
        self.sent += 1
        return value

    def run(self) -> None:
        getattr(self, f"_run_{self.client.replace('-', '_')}")()

    def _run_confluent(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                             "acks": "all", "linger.ms": 5, "message.timeout.ms": 120000})

        def report(err: Any, msg: Any) -> None:
            if err is not None:
                self.errors.append(err)
            else:
                self.acked.append(msg.value().decode())

        while not self.stop.is_set():
            producer.produce(self.topic, self._value().encode(), partition=0,
                             on_delivery=report)
            producer.poll(0.01)
        self.unflushed = producer.flush(150)

    def _run_kafka_python(self) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all",
                                 enable_idempotence=True, linger_ms=5,
                                 delivery_timeout_ms=120000)
        while not self.stop.is_set():
            value = self._value()
            future = producer.send(self.topic, value.encode(), partition=0)
            future.add_callback(lambda _md, v=value: self.acked.append(v))
            future.add_errback(self.errors.append)
            time.sleep(0.005)
        producer.flush(150)
        producer.close(30)
        self.unflushed = 0

    def _run_aiokafka(self) -> None:
        import asyncio

        from aiokafka import AIOKafkaProducer

        async def produce() -> None:
            producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all",
                                        enable_idempotence=True, linger_ms=5)
            await producer.start()

            def report(future: Any, value: str) -> None:
                if future.exception() is not None:
                    self.errors.append(future.exception())
                else:
                    self.acked.append(value)

            try:
                while not self.stop.is_set():
                    value = self._value()
                    sent = await producer.send(self.topic, value.encode(), partition=0)
                    sent.add_done_callback(lambda f, v=value: report(f, v))
                    await asyncio.sleep(0.005)
                await producer.flush()
                self.unflushed = 0
            finally:
                await producer.stop()

        asyncio.run(produce())


def read_back(bootstrap: str, topic: str, count: int) -> list[str]:
    """Partition 0 from its start until ``count`` records came (or 60 s passed)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    read: list[str] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 60
        while len(read) < count and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 1.0):
                if msg.error() is None:
                    read.append(msg.value().decode())
    finally:
        consumer.close()
    return read


@pytest.mark.parametrize(("client", "kills"), [("confluent", 2), ("kafka-python", 1),
                                               ("aiokafka", 1)])
def test_idempotent_producer_across_leader_kills_has_no_duplicates(
        cluster_factory: ClusterFactory, client: str, kills: int) -> None:
    """A real idempotent producer keeps sending while the leader is killed (confluent-kafka:
    twice, the first victim restarted in between): every acknowledged value reads back
    exactly once, and the values are in the order they were produced."""
    cluster = cluster_factory(3)
    topic = f"dup-client-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap(), topic, [[1, 2, 3]])
    full_isr(cluster, topic)
    producer = ClientProducer(client, cluster.bootstrap(), topic)
    producer.start()
    try:
        for _round in range(kills):
            time.sleep(1)
            old = int(full_isr(cluster, topic)["leader"])
            count = len(producer.acked)
            cluster.kill9(old)
            new_leader(cluster, topic, old)
            wait_until(lambda c=count: len(producer.acked) > c + 50, 90,
                       "deliveries after the kill")
            cluster.restart(old)
    finally:
        producer.stop.set()
        producer.join(180)
    assert producer.unflushed == 0
    assert producer.errors == []
    read = read_back(cluster.bootstrap(), topic, producer.sent)
    assert len(set(read)) == len(read), "duplicated records in the read-back"
    assert read == [f"r{i}" for i in range(producer.sent)]
    assert sorted(producer.acked, key=lambda v: int(v[1:])) == read
