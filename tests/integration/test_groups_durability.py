"""Committed offsets and group state survive a broker restart and a kill -9 of the broker
(issue 3, acceptance 4).

Offsets are committed through a group member (confluent-kafka, OffsetCommit v9), a simple
commit outside any group (kafka-python ``assign()`` + ``commit()``, generation -1) and a KIP-848
member; then the broker is stopped cleanly, or killed with SIGKILL, and started again on the
same data directory and port. The offsets (with their metadata strings), the classic group's
generation and the KIP-848 group come back from ``__consumer_offsets``, and a consumer of the
group resumes exactly where the commits left off. Durability here is against a process
crash: commits are acknowledged once in the log (page cache), as Kafka does without fsync.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from groups_harness import start_worker, wait_until
from kafka import KafkaConsumer, OffsetAndMetadata
from kafka import TopicPartition as KTopicPartition
from test_groups_clients import create_topic, owners_cover, produce, unique

from moldau.testing.runner import BrokerProcess

SETTINGS = {"offsets.topic.num.partitions": 5, "group.initial.rebalance.delay.ms": 0,
            "group.min.session.timeout.ms": 1000,
            "group.consumer.heartbeat.interval.ms": 500,
            "group.consumer.session.timeout.ms": 10000}


@pytest.fixture
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(settings=SETTINGS) as b:
        yield b


def restart(broker: BrokerProcess, *, kill: bool) -> None:
    """Stop (SIGTERM) or kill -9 the broker and start it again on the same port and data."""
    ports = dict(broker.ports)
    if kill:
        broker.kill()
    else:
        broker.stop()
    broker.settings["listeners"] = ",".join(
        f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    broker.start()


def read_committed(bootstrap: str, group: str, topic: str,
                   partitions: int) -> dict[int, tuple[int, str]]:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 2})
    try:
        got = reader.committed([TopicPartition(topic, p) for p in range(partitions)],
                               timeout=30)
    finally:
        reader.close()
    return {tp.partition: (tp.offset, tp.metadata or "") for tp in got}


def group_commit(bootstrap: str, group: str, topic: str, protocol: str) -> Consumer:
    """A group member that committed offsets 3 and 5 with metadata; left running."""
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "log_level": 2,
            "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    consumer = Consumer(conf)
    consumer.subscribe([topic])
    deadline = time.monotonic() + 20
    while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
        consumer.poll(0.1)
    assert len(consumer.assignment()) == 2, "the member got no assignment"
    consumer.commit(offsets=[TopicPartition(topic, 0, 3, metadata="m-zero"),
                             TopicPartition(topic, 1, 5, metadata="m-one")],
                    asynchronous=False)
    return consumer


def simple_commit(bootstrap: str, group: str, topic: str) -> None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False)
    try:
        consumer.assign([KTopicPartition(topic, 0)])
        consumer.commit({KTopicPartition(topic, 0): OffsetAndMetadata(7, "simple", -1)})
    finally:
        consumer.close(autocommit=False)


@pytest.mark.parametrize("kill", [False, True], ids=["clean-restart", "kill-9"])
def test_committed_offsets_survive_broker_restart(broker: BrokerProcess, kill: bool) -> None:
    bootstrap = broker.bootstrap
    topic = unique("durable")
    create_topic(bootstrap, topic, 2)
    produce(bootstrap, topic, 2, 10)
    classic, kip848, simple = unique("classic"), unique("kip848"), unique("simple")
    member = group_commit(bootstrap, classic, topic, "classic")
    member.close()
    member = group_commit(bootstrap, kip848, topic, "consumer")
    member.close()
    simple_commit(bootstrap, simple, topic)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    before = {g.group_id for g in admin.list_consumer_groups(request_timeout=10)
              .result().valid}
    assert {classic, kip848, simple} <= before

    restart(broker, kill=kill)

    expected = {0: (3, "m-zero"), 1: (5, "m-one")}
    assert read_committed(bootstrap, classic, topic, 2) == expected
    assert read_committed(bootstrap, kip848, topic, 2) == expected
    assert read_committed(bootstrap, simple, topic, 1) == {0: (7, "simple")}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    after = {g.group_id: g for g in admin.list_consumer_groups(request_timeout=10)
             .result().valid}
    assert {classic, kip848, simple} <= set(after)
    # A member of the group resumes exactly at the commits.
    resumed = Consumer({"bootstrap.servers": bootstrap, "group.id": classic, "log_level": 2,
                        "auto.offset.reset": "earliest"})
    try:
        resumed.subscribe([topic])
        seen: dict[int, int] = {}
        deadline = time.monotonic() + 30
        while len(seen) < 2 and time.monotonic() < deadline:
            msg = resumed.poll(0.2)
            if msg is not None and not msg.error():
                seen.setdefault(msg.partition(), msg.offset())
        assert seen == {0: 3, 1: 5}
    finally:
        resumed.close()


def test_kip848_members_keep_partitions_across_a_broker_kill(broker: BrokerProcess,
                                                             tmp_path: Path) -> None:
    """KIP-848 members and their assignments are records too: after a kill -9 of the broker
    the running members carry on with the same partitions, without a revocation."""
    topic, group = unique("keep"), unique("keep-g")
    create_topic(broker.bootstrap, topic, 4)
    workers = [start_worker("confluent", tmp_path, f"w{i}", broker.bootstrap, group, topic,
                            protocol="consumer") for i in range(2)]
    try:
        wait_until(lambda: sorted(len(w.assignment()) for w in workers) == [2, 2]
                   and owners_cover(workers, 4), 30, "two members with two partitions",
                   workers)
        before = [w.assignment() for w in workers]
        seen = [len(w.events()) for w in workers]
        restart(broker, kill=True)
        time.sleep(3)  # several heartbeats (interval 500 ms) against the new incarnation
        produce(broker.bootstrap, topic, 4, 5)
        wait_until(lambda: sum(len(w.records()) for w in workers) >= 20, 30,
                   "the members to consume after the restart", workers)
        assert [w.assignment() for w in workers] == before
        changes = [e for w, n in zip(workers, seen, strict=True) for e in w.events()[n:]
                   if e["e"] in ("assign", "revoke")]
        assert changes == []
    finally:
        for w in workers:
            w.stop()
