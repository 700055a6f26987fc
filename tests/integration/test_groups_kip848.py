"""librdkafka with ``group.protocol=consumer`` (KIP-848) against Moldau (issue 3, acceptance 6).

Three confluent-kafka consumer processes using the new consumer protocol share a 6-partition
topic two partitions each (assigned by the broker's ``uniform`` assignor); when one leaves
cleanly the others get its partitions, and when one is killed with SIGKILL the last one gets
everything after ``group.consumer.session.timeout.ms``. Every record is consumed at least once
and duplicates only come from the killed member's uncommitted tail. The admin API sees the
group as a ``consumer``-type group.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupType
from confluent_kafka.admin import AdminClient
from groups_harness import (
    check_at_least_once,
    check_duplicates_only_after_last_commit,
    start_worker,
    wait_for_hangups,
    wait_until,
)
from test_groups_clients import committed_offsets, create_topic, owners_cover, produce, unique

from moldau.testing.runner import BrokerProcess

SESSION_MS = 6000
SETTINGS = {"offsets.topic.num.partitions": 3, "group.initial.rebalance.delay.ms": 0,
            "group.consumer.heartbeat.interval.ms": 500,
            "group.consumer.session.timeout.ms": SESSION_MS}


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(settings=SETTINGS) as b:
        yield b


def test_librdkafka_consumer_protocol_joins_and_rebalances(broker: BrokerProcess,
                                                           tmp_path: Path) -> None:
    bootstrap = broker.bootstrap
    topic, group = unique("kip848"), unique("g848")
    create_topic(bootstrap, topic, 6)
    workers = [start_worker("confluent", tmp_path, f"w{i}", bootstrap, group, topic,
                            protocol="consumer", delay_ms=10) for i in range(3)]
    try:
        took = wait_until(lambda: sorted(len(w.assignment()) for w in workers) == [2, 2, 2]
                          and owners_cover(workers, 6), 30,
                          "three members with two partitions each", workers)
        print(f"\n[kip848] three members assigned 2+2+2 after {took:.2f} s")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        listed = admin.list_consumer_groups(request_timeout=10).result()
        mine = [g for g in listed.valid if g.group_id == group]
        assert mine and mine[0].type == ConsumerGroupType.CONSUMER
        expected = produce(bootstrap, topic, 6, 60)
        # A clean leave: the two others take over its partitions.
        leaver, victim, last = workers
        wait_until(lambda: len(leaver.records()) >= 10, 30, "the leaver consuming", workers)
        leaver.stop()
        took = wait_until(lambda: sorted(len(w.assignment()) for w in (victim, last))
                          == [3, 3] and owners_cover([victim, last], 6), 30,
                          "the leaver's partitions to move", workers)
        print(f"[kip848] partitions of a member that left moved in {took:.2f} s")
        # A crash: the last member gets everything after the session timeout.
        victim_partitions = victim.assignment()
        victim.kill()
        killed_at = time.monotonic()
        wait_for_hangups(broker.port(), workers)  # a commit in flight has landed (or not)
        last_commits = committed_offsets(bootstrap, group, topic, victim_partitions)
        wait_until(lambda: len(last.assignment()) == 6, SESSION_MS / 1000 + 15,
                   "the last member to own every partition", workers)
        print(f"[kip848] partitions of a killed member moved after "
              f"{time.monotonic() - killed_at:.2f} s (session timeout {SESSION_MS / 1000} s)")
        wait_until(lambda: {r for w in workers for r in w.records()} >= expected, 60,
                   "every record consumed", workers)
        everything = {p: 60 for p in range(6)}
        wait_until(lambda: committed_offsets(bootstrap, group, topic, set(range(6)))
                   == everything, 20, "every record committed", workers)
        last.stop()
        check_at_least_once(workers, expected)
        dups = check_duplicates_only_after_last_commit(workers, last_commits)
        assert len(dups) <= len(victim_partitions)
    finally:
        for w in workers:
            w.stop()
