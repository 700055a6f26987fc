"""Controlled shutdown under load (issue 13, acceptance 3, second half), on three real
``moldau serve`` brokers and a real ZooKeeper, with a real confluent-kafka producer.

An idempotent acks=all producer sends continuously to a topic with replication factor 3 and
``min.insync.replicas=2``. The broker leading its partitions (the active controller itself, or
another broker) gets SIGTERM: before it exits it
asks the controller (ControlledShutdown) to move leadership of its partitions to another
in-sync replica. The test measures the time from SIGTERM to the Metadata of a surviving broker
naming a new leader (printed; docs/operations.md records it), which must be under 2 s as the
issue says; and no delivery error reaches the application: every delivery callback succeeds
and every value is read back exactly once.
"""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from moldau.testing.runner import BrokerProcess
from moldau.testing.waiting import wait_for

from .conftest import ClusterFactory

PARTITIONS = 3
#: Issue 13, acceptance 3: leadership moves in under 2 s (measured: see the output and
#: docs/operations.md, "Controlled shutdown with replication").
MOVE_BOUND_S = 2.0


class ContinuousProducer(threading.Thread):
    """An idempotent acks=all confluent-kafka producer sending unique values round-robin
    over the partitions until stopped; keeps every delivery result."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Producer

        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 2,
                                  "delivery.timeout.ms": 120000})
        self.sent: list[str] = []
        self.delivered: list[str] = []
        self.errors: list[Any] = []
        self.halt = threading.Event()

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.delivered.append(msg.value().decode())

    def run(self) -> None:
        i = 0
        while not self.halt.is_set():
            value = f"v-{i}"
            self.producer.produce(self.topic, value.encode(), partition=i % PARTITIONS,
                                  on_delivery=self._on_delivery)
            self.sent.append(value)
            i += 1
            self.producer.poll(0.002)
        self.remaining = self.producer.flush(120)


def exit_status(cluster: Any, broker: int, timeout: float = 60.0) -> int | None:
    """Wait for a broker that was sent SIGTERM to exit, without signalling it again (a
    second SIGTERM that lands after its event loop closed would end it with -15)."""
    node = cluster.broker(broker)
    node.proc.wait(timeout)
    return node.wait_stopped(1)  # reaps it; sends nothing to a process that has exited


def written_before_unregistration(cluster: Any, topic: str) -> bool:
    """Whether every partition state of ``topic`` was last written before the last change of
    ``/brokers/ids``'s children (the stopped broker's registration going away): ZooKeeper's
    zxids order the two writes whatever the timing of the test's polls."""
    zk = cluster.kazoo()
    unregistered = zk.exists("/brokers/ids").pzxid
    return all(zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")[1].mzxid < unregistered
               for p in range(PARTITIONS))


def metadata_leader(bootstrap: str, topic: str, partition: int) -> int:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return metadata.topics[topic].partitions[partition].leader


def read_all(bootstrap: str, topic: str, count: int) -> list[str]:
    """Every value of ``topic`` (by assignment, from the start) until ``count`` are read."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values: list[str] = []
    deadline = time.monotonic() + 120
    try:
        while len(values) < count and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 1.0):
                if msg.error() is None:
                    values.append(msg.value().decode())
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize("victim_role", ["follower-of-the-controller", "controller"])
def test_controlled_shutdown_moves_leadership_fast_with_no_error_reaching_the_producer(
        cluster_factory: ClusterFactory, victim_role: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = cluster_factory(3, settings={"auto.leader.rebalance.enable": "false"})
    bootstrap = cluster.bootstrap()
    topic = f"cs-{uuid.uuid4().hex[:6]}"
    controller = cluster.wait_controller(60)
    # The leader of every partition is the broker to stop: the controller itself (it moves
    # leadership off itself, then hands the controller over), or another broker (it asks
    # the controller with ControlledShutdown).
    first = controller if victim_role == "controller" else next(
        b for b in sorted(cluster.brokers) if b != controller)
    replicas = [first, *(b for b in sorted(cluster.brokers) if b != first)]
    client = AdminClient({"bootstrap.servers": bootstrap})
    client.create_topics([NewTopic(topic, num_partitions=PARTITIONS,
                                   replica_assignment=[replicas] * PARTITIONS,
                                   config={"min.insync.replicas": "2"})],
                         operation_timeout=30)[topic].result(60)

    def in_sync() -> bool:
        states = [cluster.partition_state(topic, p) for p in range(PARTITIONS)]
        return all(s is not None and len(s["isr"]) == 3 for s in states)

    wait_for(in_sync, 120, f"{topic} fully in sync", interval=0.2)
    victim = cluster.leaders(topic)[0]
    assert victim == first
    survivors = cluster.bootstrap(ids=[b for b in sorted(cluster.brokers) if b != victim])
    watch = cluster.broker(next(b for b in sorted(cluster.brokers) if b != victim)).address()

    producer = ContinuousProducer(bootstrap, topic)
    producer.start()
    try:
        wait_for(lambda: len(producer.delivered) >= 500, 60, "500 records delivered")
        sigterm_at = time.monotonic()
        cluster.broker(victim).terminate()
        # Controlled: the controller moves leadership while the broker is still registered
        # (without it, leaders change only once its registration is gone).
        new_leader = wait_for(
            lambda: (lambda leader: leader if leader not in (victim, -1) else None)(
                metadata_leader(watch, topic, 0)), 60, "a new leader in Metadata",
            interval=0.01)
        moved_s = time.monotonic() - sigterm_at
        assert exit_status(cluster, victim) == 0
        exited_s = time.monotonic() - sigterm_at
        # Controlled: the controller moved leadership while the broker was still registered
        # (without it, leaders change only once its registration is gone).
        wait_for(lambda: victim not in cluster.registered_ids(), 30, "unregistered")
        assert written_before_unregistration(cluster, topic), \
            "leadership moved only after the broker had gone"
        delivered_at_exit = len(producer.delivered)
        wait_for(lambda: len(producer.delivered) >= delivered_at_exit + 500, 60,
                 "500 more records delivered after the shutdown")
    finally:
        producer.halt.set()
        producer.join(180)
    print(f"controlled shutdown of broker {victim} ({victim_role}): Metadata named leader "
          f"{new_leader} {moved_s * 1000:.0f} ms after SIGTERM; the broker exited after "
          f"{exited_s * 1000:.0f} ms; {len(producer.sent)} records sent")
    assert moved_s < MOVE_BOUND_S, f"leadership moved {moved_s:.2f} s after SIGTERM"
    assert producer.remaining == 0
    assert producer.errors == [], producer.errors[:5]
    assert sorted(producer.delivered) == sorted(producer.sent)
    assert all(leader != victim for leader in cluster.leaders(topic).values())

    values = read_all(survivors, topic, len(producer.sent))
    duplicates = [v for v, n in Counter(values).items() if n > 1]
    assert duplicates == []
    assert set(values) == set(producer.sent)


def test_a_follower_in_controlled_shutdown_leaves_the_isr_at_once(
        cluster_factory: ClusterFactory) -> None:
    """Stopping a broker that only follows: the controller takes it out of the ISRs while it is
    still registered (before it exits), and acks=all produces go on without it."""
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = cluster_factory(3, settings={"auto.leader.rebalance.enable": "false"})
    bootstrap = cluster.bootstrap()
    topic = f"csf-{uuid.uuid4().hex[:6]}"
    leader, victim, other = sorted(cluster.brokers)
    client = AdminClient({"bootstrap.servers": bootstrap})
    client.create_topics([NewTopic(topic, num_partitions=PARTITIONS,
                                   replica_assignment=[[leader, victim, other]] * PARTITIONS,
                                   config={"min.insync.replicas": "2"})],
                         operation_timeout=30)[topic].result(60)
    wait_for(lambda: all((s := cluster.partition_state(topic, p)) is not None
                         and len(s["isr"]) == 3 for p in range(PARTITIONS)),
             120, f"{topic} fully in sync", interval=0.2)
    producer = ContinuousProducer(bootstrap, topic)
    producer.start()
    try:
        wait_for(lambda: len(producer.delivered) >= 500, 60, "500 records delivered")
        cluster.broker(victim).terminate()
        assert exit_status(cluster, victim) == 0
        wait_for(lambda: victim not in cluster.registered_ids(), 30, "unregistered")
        assert all(victim not in cluster.partition_state(topic, p)["isr"]
                   for p in range(PARTITIONS))
        assert written_before_unregistration(cluster, topic), \
            "it left the ISRs only after it had gone"
        assert set(cluster.leaders(topic).values()) == {leader}
        after_exit = len(producer.delivered)
        # well under replica.lag.time.max.ms (30 s): nothing waits for the stopped follower
        wait_for(lambda: len(producer.delivered) >= after_exit + 500, 15,
                 "500 more acks=all records delivered after the follower stopped")
    finally:
        producer.halt.set()
        producer.join(180)
    assert producer.remaining == 0
    assert producer.errors == [], producer.errors[:5]
    assert sorted(producer.delivered) == sorted(producer.sent)


def test_a_second_sigterm_during_shutdown_changes_nothing(tmp_path: Path) -> None:
    """Supervisors and scripts repeat SIGTERM: one that lands while the broker shuts down,
    even after its event loop closed, still ends in a clean exit (status 0), not death by
    signal (-15)."""
    for i, delay in enumerate((0.0, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15)):
        with BrokerProcess(tmp_path / f"b{i}") as broker:
            proc = broker.proc
            assert proc is not None
            proc.send_signal(signal.SIGTERM)
            time.sleep(delay)
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0, f"exit status after a second SIGTERM {delay} s later"
