"""Seed 003's ISR rule on three real ``moldau serve`` brokers and a real ZooKeeper, seen with
a real client (confluent-kafka) and in ZooKeeper's state znode:

- a follower frozen with SIGSTOP leaves the ISR once it has not caught up for
  ``replica.lag.time.max.ms`` (the leader's shrink, sent as AlterPartition to the controller),
  while acks=all produces with ``min.insync.replicas=2`` keep succeeding; after SIGCONT it
  catches up and rejoins;
- with both followers frozen (and records written with acks=1: a silent follower that has the
  leader's whole log stays in sync, as in Kafka), the ISR shrinks to the leader and acks=all
  produces get NOT_ENOUGH_REPLICAS while acks=1 ones still work; once they resume they rejoin
  and acks=all works again.

``replica.lag.time.max.ms`` is 3 s here and the ZooKeeper session 45 s, so a frozen broker stays
registered: only the leader's lag check can take it out of the ISR within 30 s (the controller
drops a broker whose session ended on its own, later). A frozen broker is never the
controller: the leader's AlterPartition must be answered.
"""

from __future__ import annotations

import functools
import time
import uuid
from typing import Any

from moldau.testing.cluster import BrokerCluster
from moldau.testing.waiting import wait_for

from .conftest import ClusterFactory

wait_until = functools.partial(wait_for, interval=0.2)
LAG_MS = 3000
SESSION_MS = 45000
SETTINGS = {"replica.lag.time.max.ms": str(LAG_MS),
            "zookeeper.session.timeout.ms": str(SESSION_MS)}
#: The shrink is due after LAG_MS and checked every LAG_MS / 2; this bound only has to tell
#: it from the controller dropping a broker whose session ended (SESSION_MS).
SHRINK_BOUND_S = 30


def create_topic(bootstrap: str, topic: str, assignment: list[int]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    client = AdminClient({"bootstrap.servers": bootstrap})
    client.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[assignment],
                                   config={"min.insync.replicas": "2"})],
                         operation_timeout=30)[topic].result(60)


def metadata_isr(bootstrap: str, topic: str) -> list[int]:
    """The ISR of partition 0 as the broker(s) of ``bootstrap`` answer Metadata."""
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    return sorted(metadata.topics[topic].partitions[0].isrs)


def znode_isr(cluster: BrokerCluster, topic: str) -> list[int]:
    state = cluster.partition_state(topic, 0)
    return sorted(state["isr"]) if state else []


def produce(bootstrap: str, topic: str, count: int, *, acks: str) -> list[Any]:
    """Produce ``count`` records to partition 0 without retries; each delivery's error (None:
    acknowledged)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "retries": 0,
                         "enable.idempotence": False, "linger.ms": 0,
                         "message.timeout.ms": 60000, "request.timeout.ms": 30000})
    errors: list[Any] = []
    for i in range(count):
        producer.produce(topic, f"{acks}-{i}-{time.time()}".encode(), partition=0,
                         on_delivery=lambda err, _msg: errors.append(err))
        producer.poll(0)
    assert producer.flush(90) == 0, "records still in flight after 90 s"
    return errors


def wait_isr(cluster: BrokerCluster, bootstrap: str, topic: str, isr: list[int],
             timeout: float = 60) -> None:
    """Wait until ZooKeeper's state znode and the Metadata of ``bootstrap`` show ``isr``."""
    wait_until(lambda: znode_isr(cluster, topic) == isr, timeout, f"state znode ISR {isr}")
    wait_until(lambda: metadata_isr(bootstrap, topic) == isr, timeout, f"Metadata ISR {isr}")


def test_a_stopped_follower_leaves_the_isr_and_rejoins_after_catching_up(
        cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(3, settings=SETTINGS)
    controller = cluster.wait_controller(60)
    leader, frozen = [b for b in sorted(cluster.brokers) if b != controller]
    topic = f"lag-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap(), topic, [leader, frozen, controller])
    everyone = sorted(cluster.brokers)
    wait_isr(cluster, cluster.bootstrap(), topic, everyone)
    assert produce(cluster.bootstrap(), topic, 20, acks="all") == [None] * 20

    cluster.sigstop(frozen)
    stopped = time.monotonic()
    live = cluster.bootstrap(ids=[leader, controller])
    try:
        # Produced while the follower is frozen: answered once the ISR shrank (the leader
        # waits for the frozen follower until then), with min.insync.replicas=2 still met.
        assert produce(live, topic, 50, acks="all") == [None] * 50
        wait_isr(cluster, live, topic, sorted([leader, controller]))
        elapsed = time.monotonic() - stopped
        # not before replica.lag.time.max.ms, and long before the session could end
        assert LAG_MS / 1000 <= elapsed < SHRINK_BOUND_S, elapsed
        assert produce(live, topic, 50, acks="all") == [None] * 50
    finally:
        cluster.sigcont(frozen)
    # It catches up (120 records behind) and the leader asks for it to rejoin.
    wait_isr(cluster, live, topic, everyone)
    assert produce(cluster.bootstrap(), topic, 20, acks="all") == [None] * 20


def test_with_both_followers_stopped_acks_all_fails_and_acks_1_works(
        cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(3, settings=SETTINGS)
    controller = cluster.wait_controller(60)
    followers = [b for b in sorted(cluster.brokers) if b != controller]
    topic = f"lag2-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap(), topic, [controller, *followers])
    everyone = sorted(cluster.brokers)
    wait_isr(cluster, cluster.bootstrap(), topic, everyone)
    assert produce(cluster.bootstrap(), topic, 10, acks="all") == [None] * 10

    for broker in followers:
        cluster.sigstop(broker)
    stopped = time.monotonic()
    live = cluster.bootstrap(ids=[controller])
    try:
        # A follower at the leader's log end is in sync however long it is silent (Kafka's
        # rule): records only the leader has make the frozen ones fall behind.
        assert produce(live, topic, 10, acks="1") == [None] * 10
        wait_isr(cluster, live, topic, [controller])
        elapsed = time.monotonic() - stopped
        assert LAG_MS / 1000 <= elapsed < SHRINK_BOUND_S, elapsed
        errors = produce(live, topic, 5, acks="all")
        assert [e.code() if e is not None else None for e in errors] == \
            [19] * 5, errors  # NOT_ENOUGH_REPLICAS, nothing appended
        assert produce(live, topic, 10, acks="1") == [None] * 10
    finally:
        for broker in followers:
            cluster.sigcont(broker)
    wait_isr(cluster, live, topic, everyone)
    assert produce(cluster.bootstrap(), topic, 10, acks="all") == [None] * 10
