"""The scenario of issue 13's acceptance 4 (tests/cluster/test_group_durability.py and
test_group_durability_more.py): a consumer group of three keeps its committed offsets when
the broker of its coordinator is killed.

:class:`Scenario` starts three brokers on real ZooKeeper with the test defaults
(``offsets.topic.replication.factor`` 3, the cluster's size), picks a group whose
``__consumer_offsets`` partition is led by a broker that is not the controller (the victim)
and puts the group's topic on the two other brokers, so that what the kill takes away is the
coordination, not the records. :func:`run_scenario` drives one client's group of three through
it: every member owns a partition, the group reads and commits, the victim is kill -9'd, the
new coordinator answers the offsets committed before, and the group resumes from them.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from moldau.broker.group.partitioning import partition_for
from moldau.testing.cluster import BrokerCluster
from moldau.testing.waiting import wait_for

from .conftest import ClusterFactory

__all__ = ["OFFSETS_PARTITIONS", "PARTITIONS", "PER_PARTITION", "Scenario", "run_scenario",
           "three_owners", "wait_until"]

OFFSETS_PARTITIONS = 6  # TEST_DEFAULTS' offsets.topic.num.partitions
PARTITIONS = 3
PER_PARTITION = 10
wait_until = functools.partial(wait_for, interval=0.2)


class Scenario:
    """The cluster, the victim (leader of the group's ``__consumer_offsets`` partition, not
    the controller), the group and its topic on the survivors."""

    def __init__(self, cluster_factory: ClusterFactory, prefix: str,
                 settings: dict[str, str] | None = None) -> None:
        from confluent_kafka import Consumer

        self.cluster: BrokerCluster = cluster_factory(3, settings=settings)
        controller = self.cluster.wait_controller(60)
        bootstrap = self.cluster.bootstrap()
        # __consumer_offsets comes with the first FindCoordinator
        warm = Consumer({"bootstrap.servers": bootstrap, "group.id": f"warm-{prefix}"})
        warm.subscribe(["warm-up"])
        wait_until(lambda: warm.poll(0.2) is None and len(
            self.cluster.leaders("__consumer_offsets")) == OFFSETS_PARTITIONS, 60,
            "__consumer_offsets")
        warm.close()
        offsets = self.cluster.leaders("__consumer_offsets")
        self.group = next(
            name for name in (f"{prefix}-{uuid.uuid4().hex[:6]}-{n}" for n in range(10_000))
            if offsets[partition_for(name, OFFSETS_PARTITIONS)] != controller)
        self.offsets_partition = partition_for(self.group, OFFSETS_PARTITIONS)
        self.victim = offsets[self.offsets_partition]
        self.survivors = [i for i in sorted(self.cluster.brokers) if i != self.victim]
        self.bootstrap = self.cluster.bootstrap(ids=self.survivors)
        # the partition has all three replicas in sync before the kill
        wait_until(lambda: len(self._offsets_state().get("isr", [])) == 3, 60,
                   f"__consumer_offsets-{self.offsets_partition} ISR of 3")
        self.topic = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self._create_topic()

    def _offsets_state(self) -> dict[str, Any]:
        return self.cluster.partition_state("__consumer_offsets", self.offsets_partition) or {}

    def _create_topic(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        a, b = self.survivors
        client = AdminClient({"bootstrap.servers": self.bootstrap})
        new = NewTopic(self.topic, num_partitions=PARTITIONS,
                       replica_assignment=[[a, b], [b, a], [a, b]])
        client.create_topics([new], operation_timeout=30)[self.topic].result(60)
        wait_until(lambda: len(self.cluster.leaders(self.topic)) == PARTITIONS, 30,
                   f"{self.topic} led")
        # Every broker a member may ask knows the topic: a member whose first Metadata does not
        # name it has nothing to join with (librdkafka 2.0.2, kcat's, then waits for its next
        # periodic refresh, topic.metadata.refresh.interval.ms: 5 min), as it would after
        # any CreateTopics (brokers learn new topics a moment apart, Kafka's too).
        for broker in self.survivors:
            address = self.cluster.broker(broker).address()
            wait_until(lambda a=address: self._led_in_metadata(a), 30,
                       f"{self.topic} led in broker {broker}'s Metadata")

    def _led_in_metadata(self, address: str) -> bool:
        from confluent_kafka.admin import AdminClient

        metadata = AdminClient({"bootstrap.servers": address}).list_topics(self.topic,
                                                                         timeout=10)
        topic = metadata.topics.get(self.topic)
        return (topic is not None and topic.error is None
                and len(topic.partitions) == PARTITIONS
                and all(p.leader >= 0 for p in topic.partitions.values()))

    def send(self, tag: str) -> set[str]:
        """``PER_PARTITION`` records to each partition, acks=all; their values."""
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all"})
        values = set()
        for p in range(PARTITIONS):
            for i in range(PER_PARTITION):
                value = f"{tag}-{p}-{i}"
                producer.produce(self.topic, value.encode(), partition=p)
                values.add(value)
        assert producer.flush(60) == 0
        return values

    def kill_coordinator(self) -> int:
        """kill -9 the victim; once its session is gone, wait for a new leader of the group's
        ``__consumer_offsets`` partition; return it."""
        self.cluster.kill9(self.victim)
        self.cluster.wait_unregistered(self.victim, self.cluster.session_timeout_s + 30)
        state = wait_until(lambda: (lambda s: s if s.get("leader", -1) in self.survivors
                                    else None)(self._offsets_state()), 60,
                           f"a new leader of __consumer_offsets-{self.offsets_partition}")
        return int(state["leader"])

    def committed(self) -> dict[int, int]:
        """The group's committed offsets (OffsetFetch through a member-less confluent
        consumer), retried while the coordinator is not ready to answer."""
        return wait_until(self.committed_now, 90, f"OffsetFetch of {self.group}")

    def committed_now(self) -> dict[int, int] | None:
        """The group's committed offsets as one OffsetFetch answers them; None if it fails
        (no coordinator yet, a partition answered with an error)."""
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        reader = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                           "enable.auto.commit": False})
        try:
            parts = reader.committed(
                [TopicPartition(self.topic, p) for p in range(PARTITIONS)], timeout=10)
        except KafkaException:
            return None
        finally:
            reader.close()
        if any(tp.error is not None for tp in parts):
            return None
        return {tp.partition: tp.offset for tp in parts}

    def coordinator(self) -> int:
        from confluent_kafka.admin import AdminClient

        client = AdminClient({"bootstrap.servers": self.bootstrap})
        described = client.describe_consumer_groups([self.group])[self.group].result(30)
        return int(described.coordinator.id)


def three_owners(owned: Sequence[set[int]]) -> bool:
    """Whether each of three members owns at least one partition and together they own each
    partition of the topic once."""
    everything = [p for member in owned for p in member]
    return (len(owned) == 3 and all(owned) and len(everything) == len(set(everything))
            and set(everything) == set(range(PARTITIONS)))


def run_scenario(scenario: Scenario,
                 consume: Callable[[set[str], float], list[str]],
                 owned: Callable[[], Sequence[set[int]]]) -> None:
    """The scenario for one client. ``owned()`` gives the partitions each of the three members
    owns now (polling them first where the client assigns only while polling): before any
    record is sent, every member must own a partition — a group of three, not one member
    reading for all. ``consume(want, timeout)`` polls the group (committing every record it
    reads, a failed commit not fatal: the partition's next owner reads its records again)
    until it has read every value of ``want`` and the last commit of every partition
    succeeded; it returns every value read since its previous call, repeats included."""
    assignments: list[Sequence[set[int]]] = []

    def settled() -> bool:
        assignments.append(owned())
        return three_owners(assignments[-1])

    try:
        wait_until(settled, 90, "each of the three members owning a partition")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last assignments {assignments[-3:]}") from exc
    first = scenario.send("first")
    before = consume(first, 90)
    assert set(before) >= first
    assert scenario.committed() == dict.fromkeys(range(PARTITIONS), PER_PARTITION)

    new_leader = scenario.kill_coordinator()
    # the new coordinator has the offsets committed through the old one
    assert scenario.committed() == dict.fromkeys(range(PARTITIONS), PER_PARTITION)
    second = scenario.send("second")
    after = consume(second, 180)
    # resumed from the committed offsets: nothing skipped, nothing of before the kill again
    assert set(after) >= second
    assert not set(after) & first, sorted(set(after) & first)[:5]
    assert scenario.committed() == dict.fromkeys(range(PARTITIONS), 2 * PER_PARTITION)
    assert scenario.coordinator() == new_leader != scenario.victim
