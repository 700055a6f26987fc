"""Consumer groups with every real client (issue 3, acceptance 1).

For confluent-kafka (eager range and cooperative-sticky assignors), kafka-python, aiokafka,
kafkajs and kcat's balanced consumer: three
consumer processes in one group on a 6-partition topic get two partitions each; one is killed
with SIGKILL and the others take its partitions over (after the session timeout, as Kafka
detects a dead member); every produced record is consumed at least once, and no record is
consumed twice except records of the killed member's partitions at or after its last commit.
Workers commit synchronously after processing each record (kcat can only auto-commit, every
5 s). Prints the takeover time per client.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from groups_harness import (
    Worker,
    check_at_least_once,
    check_duplicates_only_after_last_commit,
    node_available,
    start_worker,
    wait_for_hangups,
    wait_until,
)

from moldau.testing.runner import BrokerProcess

SESSION_MS = 6000
STATIC_SESSION_MS = 45000  # restart within it (see the static member test)
HEARTBEAT_MS = 500
PARTITIONS = 6
PER_PARTITION = 80
SETTINGS = {"group.min.session.timeout.ms": 1000, "offsets.topic.num.partitions": 5,
            "group.initial.rebalance.delay.ms": 0, "num.partitions": 1}
CLIENTS = ["confluent", "confluent-cooperative", "kafka-python", "aiokafka", "kafkajs", "kcat"]


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(settings=SETTINGS) as b:
        yield b


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)


def produce(bootstrap: str, topic: str, partitions: int,
            per_partition: int) -> set[tuple[int, int]]:
    """Produce records; returns the (partition, offset) of each."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    delivered: set[tuple[int, int]] = set()

    def report(err: object, msg: object) -> None:
        assert err is None, err
        delivered.add((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    for i in range(per_partition):
        for p in range(partitions):
            producer.produce(topic, f"{p}-{i}".encode(), partition=p, on_delivery=report)
    assert producer.flush(30) == 0
    assert len(delivered) == partitions * per_partition
    return delivered


def committed_offsets(bootstrap: str, group: str, topic: str,
                      partitions: set[int]) -> dict[int, int]:
    """The group's committed offsets (-1001 = none: everything from the start is fair game)."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 2})
    try:
        got = reader.committed([TopicPartition(topic, p) for p in sorted(partitions)],
                               timeout=20)
    finally:
        reader.close()
    return {tp.partition: max(tp.offset, 0) for tp in got}


def require_client(client: str) -> None:
    if client == "kafkajs" and not node_available():
        pytest.fail("kafkajs is not installed: run `python -m moldau.testing.install_clients`")
    if client == "kcat" and shutil.which("kcat") is None:
        pytest.fail("kcat is not installed: run `python -m moldau.testing.install_clients`")


def owners_cover(workers: list[Worker], expected: int) -> bool:
    parts = [p for w in workers for p in w.assignment()]
    return len(parts) == expected and len(set(parts)) == expected


@pytest.mark.parametrize("client", CLIENTS)
def test_group_shares_partitions_and_survives_a_killed_member(
        client: str, broker: BrokerProcess, tmp_path: Path) -> None:
    require_client(client)
    label, assignor = client, ""
    if client == "confluent-cooperative":
        # librdkafka's cooperative-sticky assignor: incremental rebalances (KIP-429).
        client, assignor = "confluent", "cooperative-sticky"
    bootstrap = broker.bootstrap
    topic, group = unique(f"grp-{client}"), unique(f"g-{client}")
    create_topic(bootstrap, topic, PARTITIONS)
    commit = "auto" if client == "kcat" else "sync"
    workers = [start_worker(client, tmp_path, f"w{i}", bootstrap, group, topic, commit=commit,
                            delay_ms=15, session_ms=SESSION_MS, heartbeat_ms=HEARTBEAT_MS,
                            assignor=assignor)
               for i in range(3)]
    try:
        wait_until(lambda: sorted(len(w.assignment()) for w in workers) == [2, 2, 2]
                   and owners_cover(workers, PARTITIONS), 60,
                   "three members with two partitions each", workers)
        expected = produce(bootstrap, topic, PARTITIONS, PER_PARTITION)
        victim, survivors = workers[0], workers[1:]
        wait_until(lambda: len(victim.records()) >= 20, 30, "the victim consuming", workers)
        victim_partitions = victim.assignment()
        victim.kill()
        killed_at = time.monotonic()
        # A commit the victim sent just before dying may still be in the broker's socket
        # buffer: it is the victim's last commit too, so wait until the broker has handled
        # the victim's connections before reading.
        wait_for_hangups(broker.port(), workers)
        last_commits = committed_offsets(bootstrap, group, topic, victim_partitions)
        # After the session timeout (the printed figure); the bound only has to tell that
        # from a dead member that is never expired, or a rebalance that waits it out.
        wait_until(lambda: owners_cover(survivors, PARTITIONS), SESSION_MS / 1000 + 20,
                   "the survivors to take over the victim's partitions", workers)
        takeover = time.monotonic() - killed_at
        print(f"\n[{label}] partitions of the killed member reassigned after {takeover:.2f} s "
              f"(session timeout {SESSION_MS / 1000:.0f} s)")
        wait_until(lambda: {r for w in workers for r in w.records()} >= expected, 90,
                   "every record consumed", workers)
        # The group commits everything (kcat: with its 5 s auto-commit); once it has, the
        # survivors are done and stop cleanly, so their reports are complete.
        everything = {p: PER_PARTITION for p in range(PARTITIONS)}
        wait_until(lambda: committed_offsets(bootstrap, group, topic,
                                             set(range(PARTITIONS))) == everything,
                   20, "the group to commit every consumed record", workers)
        for w in survivors:
            w.stop()
        check_at_least_once(workers, expected)
        dups = check_duplicates_only_after_last_commit(workers, last_commits)
        print(f"[{label}] {len(expected)} records, {len(dups)} consumed twice (all after the "
              f"killed member's last commit {last_commits})")
        if commit == "sync":
            # Synchronous commits after each record: at most the one in flight per partition.
            assert len(dups) <= len(victim_partitions)
    finally:
        for w in workers:
            w.stop()


def test_static_member_restart_keeps_partitions_without_rebalance(
        broker: BrokerProcess, tmp_path: Path) -> None:
    """KIP-345 with librdkafka: a member with ``group.instance.id`` killed and restarted
    within the session timeout gets its partitions back and the others never rebalance.

    The session timeout is long (45 s, librdkafka's default) so that starting the new
    process, which takes seconds on a busy machine, stays well inside it: with 6 s the
    restart raced the timeout and a slow start looked like a rebalancing broker."""
    bootstrap = broker.bootstrap
    topic, group = unique("static"), unique("g-static")
    create_topic(bootstrap, topic, 4)

    def start(name: str, instance: str) -> Worker:
        return start_worker("confluent", tmp_path, name, bootstrap, group, topic,
                            session_ms=STATIC_SESSION_MS, heartbeat_ms=HEARTBEAT_MS,
                            instance=instance)

    first, other = start("first", "instance-a"), start("other", "instance-b")
    workers = [first, other]
    try:
        wait_until(lambda: sorted(len(w.assignment()) for w in workers) == [2, 2]
                   and owners_cover(workers, 4), 30, "two static members", workers)
        before = first.assignment()
        seen = len(other.events())
        first.kill()
        killed_at = time.monotonic()
        again = start("again", "instance-a")
        workers.append(again)
        wait_until(lambda: len(again.assignment()) == 2, STATIC_SESSION_MS / 1000 - 5,
                   "the restarted instance to get its partitions back", workers)
        assert again.assignment() == before
        assert time.monotonic() - killed_at < STATIC_SESSION_MS / 1000, "restarted too late"
        # A rebalance would reach the other member on its next heartbeats.
        time.sleep(HEARTBEAT_MS * 3 / 1000)
        assert [e for e in other.events()[seen:] if e["e"] in ("assign", "revoke")] == []
    finally:
        for w in workers:
            w.stop()
