"""Acceptance 4 and 5 of issue 12, with real broker processes, real ZooKeeper, real clients.

4. kill -9 of the controller's broker: another broker becomes controller within
   ``zookeeper.session.timeout.ms`` + 2 s (6 s here, so the test does not wait Kafka's 18 s),
   and topics can be created again through every surviving broker. A controller frozen
   (SIGSTOP) until it has been replaced changes nothing when it resumes.
5. Replication factor 1, a broker killed: only the partitions it led are unavailable
   (LEADER_NOT_AVAILABLE, leader -1), the others keep serving; after a restart its partitions
   come back with their records. ``__consumer_offsets`` has 3 replicas (Kafka's
   ``offsets.topic.replication.factor``): groups whose coordinator was on it move to the new
   leader of their partition and go on from their committed offsets; other groups never
   notice (tests/cluster/test_group_durability.py checks the offsets with every client).
"""

from __future__ import annotations

import functools
import time
import uuid
from typing import Any

import pytest

from moldau.broker.group.partitioning import partition_for
from moldau.testing.cluster import BrokerCluster
from moldau.testing.waiting import wait_for

from .clients import kcat_metadata, require
from .conftest import ClusterFactory

OFFSETS_PARTITIONS = 6  # TEST_DEFAULTS' offsets.topic.num.partitions
LEADER_NOT_AVAILABLE = 5
# The conditions here are client round trips (a new admin client each): poll less often.
wait_until = functools.partial(wait_for, interval=0.2)


@pytest.fixture(scope="module", autouse=True)
def _kcat_installed() -> None:
    require("kcat")


def admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, topic: str, partitions: int = 6,
                 assignment: list[list[int]] | None = None) -> None:
    from confluent_kafka.admin import NewTopic

    new = (NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment)
           if assignment is not None else NewTopic(topic, partitions, 1))
    client = admin(bootstrap)  # kept: a dropped client ends its pending futures
    client.create_topics([new], operation_timeout=30)[topic].result(60)


def partitions(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (leader, error code) as one broker answers Metadata."""
    metadata = admin(bootstrap).list_topics(topic, timeout=30)
    return {p.id: (p.leader, p.error.code() if p.error is not None else 0)
            for p in metadata.topics[topic].partitions.values()}


def non_controller(cluster: BrokerCluster) -> tuple[int, list[int]]:
    """A broker that is not the controller, and the others."""
    controller = cluster.wait_controller(60)
    victim = next(i for i in sorted(cluster.brokers) if i != controller)
    return victim, [i for i in sorted(cluster.brokers) if i != victim]


# -- 4. controller failover -------------------------------------------------------------------


def test_controller_kill9_another_is_elected_within_the_session_timeout_and_topics_can_be_created(
        cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(3)
    old = cluster.wait_controller(60)
    epoch = cluster.controller_epoch()
    assert epoch is not None
    killed_at = time.monotonic()
    cluster.kill9(old)
    new = cluster.wait_controller(60, not_in={old})
    elapsed = time.monotonic() - killed_at
    assert elapsed <= cluster.session_timeout_s + 2, (
        f"new controller {new} after {elapsed:.1f} s (session timeout "
        f"{cluster.session_timeout_s:.0f} s)")
    assert (cluster.controller_epoch() or 0) > epoch
    survivors = [i for i in sorted(cluster.brokers) if i != old]
    for via in survivors:
        bootstrap = cluster.broker(via).address()
        topic = f"after-failover-{via}-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, topic, 4)
        state = wait_until(lambda b=bootstrap, t=topic: (lambda p: p if len(p) == 4 else None)(
            partitions(b, t)), 30, f"{topic} in metadata")
        assert {leader for leader, _error in state.values()} <= set(survivors)
        assert all(error == 0 for _leader, error in state.values())
        assert admin(bootstrap).list_topics(timeout=30).controller_id == new
    # the old controller comes back as an ordinary broker
    cluster.restart(old)
    assert cluster.controller_id() == new


def test_a_frozen_controller_replaced_meanwhile_changes_nothing_when_it_resumes(
        cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(3)
    old = cluster.wait_controller(60)
    bootstrap = cluster.bootstrap(ids=[i for i in sorted(cluster.brokers) if i != old])
    before = f"before-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, before, 6)
    cluster.sigstop(old)
    try:
        new = cluster.wait_controller(cluster.session_timeout_s + 30, not_in={old})
        epoch = cluster.controller_epoch()
        during = f"during-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, during, 3)
    finally:
        cluster.sigcont(old)
    # it finds out it is deposed, registers again as an ordinary broker, and every
    # partition state written from now on carries the new controller's epoch
    cluster.wait_registered([old], 60)
    time.sleep(cluster.session_timeout_s / 2)  # room for a stale write to show up
    assert cluster.controller_id() == new
    assert cluster.controller_epoch() == epoch
    for topic in (before, during):
        for p in cluster.leaders(topic):
            state = cluster.partition_state(topic, p)
            assert state is not None and state["controller_epoch"] <= (epoch or 0)
    for p in cluster.leaders(during):
        assert cluster.partition_state(during, p)["controller_epoch"] == epoch  # type: ignore[index]
    # the resumed broker serves again, with leadership as the new controller decided
    wait_until(lambda: all(error == 0 for _l, error in partitions(bootstrap, before).values()),
               60, f"every partition of {before} led again")


# -- 5. replication factor 1, a broker killed -------------------------------------------------


def produce(bootstrap: str, topic: str, per_partition: dict[int, int], tag: str, *,
            timeout_ms: int = 30000) -> dict[int, list[Any]]:
    """Produce ``n`` records to each partition; delivery errors per partition."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": timeout_ms,
                         "linger.ms": 5})
    errors: dict[int, list[Any]] = {p: [] for p in per_partition}

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors[msg.partition()].append(err)

    for p, count in per_partition.items():
        for i in range(count):
            producer.produce(topic, f"{tag}-{p}-{i}".encode(), partition=p,
                             on_delivery=report)
    producer.flush(timeout_ms / 1000 + 30)
    return errors


def read_all(bootstrap: str, topic: str, partition_ids: list[int]) -> dict[int, list[str]]:
    """Every record of the partitions, from the beginning to the current end (kafka-python
    without a group: no coordinator is involved, only the partitions' leaders)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False, consumer_timeout_ms=1000)
    assigned = [TopicPartition(topic, p) for p in partition_ids]
    consumer.assign(assigned)
    consumer.seek_to_beginning(*assigned)
    values: dict[int, list[str]] = {p: [] for p in partition_ids}
    deadline = time.monotonic() + 60
    try:
        ends = consumer.end_offsets(assigned)
        while any(consumer.position(tp) < ends[tp] for tp in assigned):
            assert time.monotonic() < deadline, f"reading {topic}: " + ", ".join(
                f"{tp.partition}: {consumer.position(tp)}/{ends[tp]}" for tp in assigned)
            for msg in consumer:
                values[msg.partition].append(msg.value.decode())
    finally:
        consumer.close()
    return values


def test_rf1_broker_kill_makes_only_its_partitions_unavailable_until_it_restarts(
        cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(3)
    victim, survivors = non_controller(cluster)
    bootstrap = cluster.bootstrap(ids=survivors)
    topic = f"rf1-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 6)
    leaders = wait_until(lambda: (lambda p: p if len(p) == 6 else None)(cluster.leaders(topic)),
                         30, "partition states")
    mine = sorted(p for p, leader in leaders.items() if leader == victim)
    others = sorted(p for p in leaders if p not in mine)
    assert len(mine) == 2 and len(others) == 4
    assert produce(bootstrap, topic, dict.fromkeys(leaders, 5), "before") == {
        p: [] for p in leaders}

    cluster.kill9(victim)
    # until its session expires, the cluster cannot know: metadata still names it
    assert victim in cluster.registered_ids()
    assert {p: partitions(bootstrap, topic)[p][0] for p in mine} == dict.fromkeys(mine, victim)
    cluster.wait_unregistered(victim, cluster.session_timeout_s + 30)

    def offline() -> dict[int, tuple[int, int]] | None:
        state = partitions(cluster.broker(survivors[0]).address(), topic)
        return state if all(state[p] == (-1, LEADER_NOT_AVAILABLE) for p in mine) else None

    state = wait_until(offline, 30, f"partitions {mine} of broker {victim} offline")
    assert {p: state[p] for p in others} == {p: (leaders[p], 0) for p in others}
    # kcat -L says it the way operators read it
    text = kcat_metadata(cluster.broker(survivors[1]).address())
    for p in mine:
        assert f"partition {p}, leader -1" in text
    # the others take writes and serve reads; the victim's do not take writes
    assert produce(bootstrap, topic, dict.fromkeys(others, 3), "during") == {
        p: [] for p in others}
    failed = produce(bootstrap, topic, dict.fromkeys(mine, 1), "lost", timeout_ms=3000)
    assert all(len(failed[p]) == 1 for p in mine)
    during = read_all(bootstrap, topic, others)
    assert all(len(during[p]) == 8 for p in others)

    cluster.restart(victim)
    back = wait_until(lambda: (lambda s: s if all(e == 0 for _l, e in s.values()) else None)(
        partitions(bootstrap, topic)), 60, f"partitions {mine} back")
    assert {p: leader for p, (leader, _e) in back.items()} == leaders
    values = read_all(bootstrap, topic, sorted(leaders))
    for p in mine:
        assert values[p] == [f"before-{p}-{i}" for i in range(5)]
    for p in others:
        assert values[p] == [f"before-{p}-{i}" for i in range(5)] + [
            f"during-{p}-{i}" for i in range(3)]


def _group_led_by(cluster: BrokerCluster, broker_id: int, prefix: str) -> str:
    offsets = cluster.leaders("__consumer_offsets")
    for n in range(10_000):
        name = f"{prefix}-{n}"
        if offsets[partition_for(name, OFFSETS_PARTITIONS)] == broker_id:
            return name
    raise AssertionError(f"no group name led by broker {broker_id}")


def test_groups_coordinated_by_a_killed_broker_move_to_a_new_coordinator(
        cluster_factory: ClusterFactory) -> None:
    from confluent_kafka import Consumer, Producer

    cluster = cluster_factory(3)
    victim, survivors = non_controller(cluster)
    bootstrap = cluster.bootstrap(ids=survivors)
    topic = f"groups-{uuid.uuid4().hex[:6]}"
    # the data lives on the survivors only: what stops is the coordination, not the fetching
    create_topic(bootstrap, topic, assignment=[[survivors[0]], [survivors[1]]])
    # __consumer_offsets comes with the first FindCoordinator
    warm = Consumer({"bootstrap.servers": bootstrap, "group.id": "warm-up"})
    warm.subscribe([topic])
    wait_until(lambda: warm.poll(0.2) is None and len(
        cluster.leaders("__consumer_offsets")) == OFFSETS_PARTITIONS, 60, "__consumer_offsets")
    warm.close()
    moved = _group_led_by(cluster, victim, "moved")
    steady = _group_led_by(cluster, survivors[0], "steady")

    def consumer(group: str) -> Any:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
        c.subscribe([topic])
        return c

    def pump(consumers: dict[str, Any], want: dict[str, int], commit: bool,
             timeout: float = 60) -> dict[str, set[str]]:
        """Poll until each group has ``want`` distinct records and, when committing, the
        commit of the last one succeeded. A commit refused while the group has no
        coordinator, or before it has rejoined (UNKNOWN_MEMBER_ID), is not retried: polling
        goes on, the client rejoins, and the records after the last good commit come again
        (at least once, as Kafka's groups deliver)."""
        from confluent_kafka import KafkaException

        got: dict[str, set[str]] = {g: set() for g in consumers}
        committed = dict.fromkeys(consumers, not commit)
        deadline = time.monotonic() + timeout
        while any(len(got[g]) < want[g] or not committed[g] for g in consumers):
            assert time.monotonic() < deadline, (
                f"consumed {({g: len(v) for g, v in got.items()})}, last commit ok "
                f"{committed}")
            for group, c in consumers.items():
                msg = c.poll(0.2)
                if msg is None or msg.error() is not None:
                    continue
                got[group].add(msg.value().decode())
                if commit:
                    try:
                        c.commit(msg, asynchronous=False)
                        committed[group] = True
                    except KafkaException:
                        committed[group] = False
        return got

    producer = Producer({"bootstrap.servers": bootstrap})

    def send(tag: str, n: int) -> None:
        for i in range(n):
            producer.produce(topic, f"{tag}-{i}".encode(), partition=i % 2)
        assert producer.flush(30) == 0

    consumers = {moved: consumer(moved), steady: consumer(steady)}
    try:
        send("first", 10)
        got = pump(consumers, {moved: 10, steady: 10}, commit=True)
        assert got[moved] == {f"first-{i}" for i in range(10)}

        cluster.kill9(victim)
        cluster.wait_unregistered(victim, cluster.session_timeout_s + 30)
        send("second", 10)
        # both go on consuming and committing: the group coordinated by the victim through
        # the new leader of its __consumer_offsets partition, from its committed offsets
        got = pump(consumers, {moved: 10, steady: 10}, commit=True, timeout=120)
        assert got == {group: {f"second-{i}" for i in range(10)} for group in consumers}
        client = admin(bootstrap)
        described = client.describe_consumer_groups([moved])[moved].result(30)
        assert described.coordinator.id in survivors
        assert len(described.members) == 1
        cluster.restart(victim)
    finally:
        for c in consumers.values():
            c.close()
    # a new member of the moved group resumes from what was committed, the victim back
    send("third", 4)
    late = consumer(moved)
    try:
        got = pump({moved: late}, {moved: 4}, commit=False)
        assert got[moved] == {f"third-{i}" for i in range(4)}
    finally:
        late.close()


# -- rolling restart (docs/operations.md) -----------------------------------------------------


def test_a_rolling_restart_loses_no_record_of_a_patient_producer(
        cluster_factory: ClusterFactory) -> None:
    """docs/operations.md's rolling restart: one broker at a time with SIGTERM, the controller
    last, each back in /brokers/ids with every partition led before the next. A producer whose
    delivery timeout outlasts a restart delivers every record, in order per partition."""
    import threading

    from confluent_kafka import Producer

    cluster = cluster_factory(3)
    controller = cluster.wait_controller(60)
    bootstrap = cluster.bootstrap()
    topic = f"rolling-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 6)
    wait_until(lambda: len(partitions(bootstrap, topic)) == 6, 30, "topic in metadata")
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 120000,
                         "linger.ms": 20})
    errors: list[Any] = []
    stop = threading.Event()
    sent = {p: 0 for p in range(6)}

    def keep_producing() -> None:
        while not stop.is_set():
            for p in range(6):
                producer.produce(topic, f"{p}-{sent[p]}".encode(), partition=p,
                                 on_delivery=lambda err, _msg: err and errors.append(err))
                sent[p] += 1
            producer.poll(0.05)

    worker = threading.Thread(target=keep_producing)
    worker.start()
    try:
        order = [i for i in sorted(cluster.brokers) if i != controller] + [controller]
        for broker_id in order:
            time.sleep(1)
            assert cluster.stop_broker(broker_id) == 0
            cluster.restart(broker_id)
            wait_until(lambda: all(leader >= 0 and error == 0 for leader, error in
                                   partitions(bootstrap, topic).values()), 60,
                       f"every partition led after broker {broker_id}'s restart")
        time.sleep(1)
    finally:
        stop.set()
        worker.join(30)
    assert producer.flush(150) == 0
    assert errors == []
    values = read_all(bootstrap, topic, list(range(6)))
    for p in range(6):
        assert values[p] == [f"{p}-{i}" for i in range(sent[p])]
