"""Replication's data plane with real processes: three ``moldau serve`` brokers on real
ZooKeeper, topics with replication factor 3, confluent-kafka clients.

- acks=all is acknowledged once every ISR member has the records; consumers read them; the
  three replicas' logs hold the same batches, byte for byte (read from the segment files after
  the cluster stopped).
- kill -9 of a partition's leader: the controller elects another ISR member, every record
  acknowledged with acks=all before is read back from it, and the old leader, restarted,
  truncates the records only it had (written with acks=1 while the followers were frozen) and
  catches up: its log equals the others' again.
"""

from __future__ import annotations

import concurrent.futures
import functools
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from moldau.protocol.records.batch import iter_batches
from moldau.storage.checkpoints import read_offset_checkpoint
from moldau.storage.fs import DEFAULT_FS
from moldau.testing.cluster import BrokerCluster
from moldau.testing.waiting import wait_for

from .conftest import ClusterFactory

wait_until = functools.partial(wait_for, interval=0.2)


def create_topic(bootstrap: str, topic: str, partitions: int, replication: int = 3) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    client = AdminClient({"bootstrap.servers": bootstrap})
    client.create_topics([NewTopic(topic, partitions, replication)],
                         operation_timeout=30)[topic].result(60)


def produce(bootstrap: str, topic: str, values: list[bytes], *, acks: str = "all",
            partition: int | None = None) -> dict[bytes, tuple[int, int]]:
    """value -> (partition, offset) of each acknowledged record; fails on any error."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks,
                         "enable.idempotence": acks == "all", "linger.ms": 5,
                         "message.timeout.ms": 60000})
    acked: dict[bytes, tuple[int, int]] = {}
    errors: list[Any] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked[msg.value()] = (msg.partition(), msg.offset())

    for value in values:
        if partition is None:
            producer.produce(topic, value, key=value, on_delivery=report)
        else:
            producer.produce(topic, value, partition=partition, on_delivery=report)
        producer.poll(0)
    assert producer.flush(90) == 0, "records still in flight after 90 s"
    assert not errors, errors[:5]
    return acked


def delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    client = AdminClient({"bootstrap.servers": bootstrap})
    [future] = client.delete_records([TopicPartition(topic, partition, before)]).values()
    future.result(60)


def consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 90.0
                ) -> dict[bytes, tuple[int, int]]:
    """Read every partition of ``topic`` from the start until ``expected`` records came.
    Partitions are assigned, not subscribed: a group would need ``__consumer_offsets``,
    which a cluster with a broker down may not be able to create (its replication factor is
    min(3, brokers))."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                         "enable.auto.commit": False})
    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(partitions)])
    seen: dict[bytes, tuple[int, int]] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(seen) < expected and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error() is not None:
                continue
            assert msg.value() not in seen, f"{msg.value()!r} read twice"
            seen[msg.value()] = (msg.partition(), msg.offset())
    finally:
        consumer.close()
    return seen


def log_batches(data_dir: Path, topic: str, partition: int) -> list[bytes]:
    """The batches of one partition's log on one broker, from its segment files (the broker
    is stopped: no partial last batch is being written)."""
    directory = data_dir / f"{topic}-{partition}"
    out: list[bytes] = []
    for segment in sorted(directory.glob("*.log")):
        buf = segment.read_bytes()
        out += [buf[pos:pos + header.size] for pos, header in iter_batches(buf)]
    return out


def assert_replicas_identical(cluster: BrokerCluster, topic: str, partitions: int
                              ) -> dict[int, list[bytes]]:
    """Stop the cluster, then check every partition's three logs hold the same bytes."""
    cluster.stop()
    result = {}
    for p in range(partitions):
        logs = {i: log_batches(cluster.broker(i).data_dir, topic, p)
                for i in sorted(cluster.brokers)}
        first = logs[min(logs)]
        assert first, f"{topic}-{p} is empty"
        for broker_id, batches in logs.items():
            differ = [i for i, (a, b) in enumerate(zip(batches, first, strict=False)) if a != b]
            assert batches == first, (
                f"{topic}-{p}: broker {broker_id} holds {len(batches)} batches, broker "
                f"{min(logs)} {len(first)}; first difference at batch {differ[:1]}")
        result[p] = first
    return result


@pytest.mark.parametrize("fetchers", [1, 3])
def test_acks_all_records_are_on_every_replica_byte_for_byte(
        cluster_factory: ClusterFactory, fetchers: int) -> None:
    cluster = cluster_factory(3, settings={"num.replica.fetchers": str(fetchers)})
    bootstrap = cluster.bootstrap()
    topic = f"rf3-{uuid.uuid4().hex[:6]}"
    # 6 partitions: each broker leads 2 and follows 4, 2 from each other broker, which
    # num.replica.fetchers=3 may spread over more than one fetcher per leader.
    create_topic(bootstrap, topic, 6)
    values = [f"value-{i}".encode() for i in range(600)]
    acked = produce(bootstrap, topic, values)
    assert len(acked) == 600
    seen = consume_all(bootstrap, topic, 600)
    assert seen == acked
    assert {p for p, _ in acked.values()} == set(range(6))
    # Records deleted on the leader (DeleteRecords) go on the followers too: their log start
    # offsets follow the leader's with the next fetch answers.
    cut = max(o for p, o in acked.values() if p == 0)
    delete_records(bootstrap, topic, 0, cut)
    time.sleep(3)  # several fetch rounds (replica.fetch.wait.max.ms is 500 ms)
    batches = assert_replicas_identical(cluster, topic, 6)
    starts = {i: read_offset_checkpoint(DEFAULT_FS, str(cluster.broker(i).data_dir
                                                       / "log-start-offset-checkpoint"))
              for i in sorted(cluster.brokers)}
    assert {i: s.get((topic, 0)) for i, s in starts.items()} == dict.fromkeys(starts, cut)
    assert sum(h.last_offset_delta + 1 for bs in batches.values() for b in bs
               for _pos, h in iter_batches(b)) == 600


def test_a_killed_leaders_acknowledged_records_survive_and_it_catches_up_when_back(
        cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(3)
    bootstrap = cluster.bootstrap()
    topic = f"fail-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 1)
    before = produce(bootstrap, topic, [f"before-{i}".encode() for i in range(200)],
                     partition=0)
    old = cluster.leaders(topic)[0]
    followers = [i for i in sorted(cluster.brokers) if i != old]
    # Records only the old leader gets: its followers are frozen (not long enough to lose
    # their ZooKeeper sessions), and acks=1 does not wait for them. The fetches they had
    # parked at the leader are answered (empty) after replica.fetch.wait.max.ms (500 ms)
    # first: a parked fetch woken by the append would carry the records to them.
    for f in followers:
        cluster.sigstop(f)
    try:
        time.sleep(1.5)
        orphans = produce(cluster.broker(old).address(), topic,
                          [f"orphan-{i}".encode() for i in range(20)], acks="1", partition=0)
        assert len(orphans) == 20
        cluster.kill9(old)
    finally:
        for f in followers:
            cluster.sigcont(f)
    new = wait_until(lambda: (lambda leader: leader if leader in followers else None)(
        cluster.leaders(topic).get(0)), cluster.session_timeout_s + 60, "a new leader")
    survivors = cluster.bootstrap(ids=followers)
    seen = consume_all(survivors, topic, len(before))
    assert set(before) <= set(seen), sorted(set(before) - set(seen))[:5]
    assert not set(orphans) & set(seen)
    # The new leader takes writes with acks=all (the ISR is the two survivors now).
    after = produce(survivors, topic, [f"after-{i}".encode() for i in range(100)],
                    partition=0)
    cluster.restart(old)
    # It truncates the orphans (the new leader's epoch 0 ends before them) and fetches what
    # it lacks: wait until its log holds as many records as the leader's, then compare.
    expected = len(before) + len(after)
    try:
        wait_until(lambda: _log_records(cluster.broker(old).data_dir, topic) == expected, 90,
                   f"broker {old} to hold the {expected} committed records")
    except AssertionError as exc:
        held = _log_records(cluster.broker(old).data_dir, topic)
        tail = cluster.broker(old).log_tail(60)
        raise AssertionError(f"{exc}; it holds {held}; its log ends:\n{tail}") from None
    assert f"truncated {topic}-0 from 220 to 200" in cluster.broker(old).log_text()
    batches = assert_replicas_identical(cluster, topic, 1)[0]
    values = {r for b in batches for r in _values(b)}
    assert values == set(before) | set(after), "the replicas hold other records"
    assert new in followers


def _log_records(data_dir: Path, topic: str) -> int:
    """Records in partition 0's log on a running broker (a partial last batch is skipped:
    iter_batches stops at it)."""
    return sum(h.last_offset_delta + 1 for b in log_batches(data_dir, topic, 0)
               for _pos, h in iter_batches(b))


def _values(batch: bytes) -> list[bytes]:
    from moldau.protocol.records.codec import iter_decoded

    return [r.value for b in iter_decoded(batch) for r in b.records]


def test_acks_all_waiting_on_a_killed_follower_completes_once_it_leaves_the_isr(
        cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(3)
    bootstrap = cluster.bootstrap()
    topic = f"dead-follower-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 1)
    produce(bootstrap, topic, [b"warm-up"], partition=0)
    leader = cluster.leaders(topic)[0]
    follower = next(i for i in sorted(cluster.brokers) if i != leader)
    cluster.kill9(follower)
    started = time.monotonic()
    others = cluster.bootstrap(ids=[i for i in sorted(cluster.brokers) if i != follower])
    acked = produce(others, topic, [f"v-{i}".encode() for i in range(50)], partition=0)
    elapsed = time.monotonic() - started
    assert len(acked) == 50
    state = cluster.partition_state(topic, 0)
    assert state is not None and follower not in state["isr"], state
    # Answered when the controller dropped the dead follower (its session ended), not at a
    # request timeout (30 s): generous bound for a busy machine.
    assert elapsed < cluster.session_timeout_s + 20, elapsed


def test_acks_all_waiting_on_a_killed_follower_that_was_the_controller_completes(
        cluster_factory: ClusterFactory) -> None:
    """The killed follower is also the active controller: the other brokers' requests to it
    (the new producer's block of producer ids, the leader's ISR shrink) must go to the
    controller ZooKeeper elects next, not wait out a request timeout on the dead one."""
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = cluster_factory(3)
    bootstrap = cluster.bootstrap()
    controller = cluster.wait_controller()
    leader = next(i for i in sorted(cluster.brokers) if i != controller)
    third = next(i for i in sorted(cluster.brokers) if i not in (leader, controller))
    topic = f"dead-controller-follower-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[leader, controller, third]])],
                        operation_timeout=30)[topic].result(60)
    # acks=1: the brokers' producer-id blocks are not asked for before the kill.
    produce(bootstrap, topic, [b"warm-up"], acks="1", partition=0)
    assert cluster.leaders(topic)[0] == leader
    cluster.kill9(controller)
    started = time.monotonic()
    # One new producer through each survivor: each survivor forwards a request for a block of
    # producer ids to the dead controller, and one of them is elected next, whichever it is.
    elapsed: dict[int, float] = {}

    def produce_through(broker_id: int) -> None:
        acked = produce(cluster.bootstrap(ids=[broker_id]), topic,
                        [f"v{broker_id}-{i}".encode() for i in range(25)], partition=0)
        assert len(acked) == 25
        elapsed[broker_id] = time.monotonic() - started

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for future in [pool.submit(produce_through, b) for b in (leader, third)]:
            future.result()
    state = cluster.partition_state(topic, 0)
    assert state is not None and controller not in state["isr"], state
    # The session of the dead controller ends (6 s), another is elected, the ISR shrinks:
    # far less than the 30 s request timeout; generous bound for a busy machine.
    assert max(elapsed.values()) < cluster.session_timeout_s + 20, elapsed
