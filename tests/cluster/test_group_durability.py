"""Issue 13, acceptance 4: a consumer group of three keeps its committed offsets when the broker
of its coordinator is killed.

Three brokers on real ZooKeeper with the test defaults (``offsets.topic.replication.factor`` 3,
the cluster's size): the group commits, the broker leading its ``__consumer_offsets``
partition is kill -9'd, and once its ZooKeeper session has expired the controller elects
another replica of that partition, whose broker loads the group from the replicated log. The
group finds its new coordinator, OffsetFetch answers the offsets committed before the kill,
and the group resumes from them: every record is read, and none read before the kill comes
again (``auto.offset.reset=earliest``: lost offsets would replay the topic from the start).

The data topic lives on the two surviving brokers only, so what the kill takes away is the
coordination, not the records. One test per client of the compat suite.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from moldau.broker.group.partitioning import partition_for
from moldau.testing.cluster import BrokerCluster
from moldau.testing.processes import terminate
from moldau.testing.tail import complete_lines
from moldau.testing.waiting import wait_for

from .clients import JS_DIR, require
from .conftest import ClusterFactory

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
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        reader = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                           "enable.auto.commit": False})
        try:
            def ask() -> dict[int, int] | None:
                try:
                    parts = reader.committed(
                        [TopicPartition(self.topic, p) for p in range(PARTITIONS)], timeout=10)
                except KafkaException:
                    return None
                if any(tp.error is not None for tp in parts):
                    return None
                return {tp.partition: tp.offset for tp in parts}

            answer = wait_until(ask, 90, f"OffsetFetch of {self.group}")
        finally:
            reader.close()
        return answer

    def coordinator(self) -> int:
        from confluent_kafka.admin import AdminClient

        client = AdminClient({"bootstrap.servers": self.bootstrap})
        described = client.describe_consumer_groups([self.group])[self.group].result(30)
        return int(described.coordinator.id)


def run_scenario(scenario: Scenario,
                 consume: Callable[[set[str], float], list[str]]) -> None:
    """The scenario for one client. ``consume(want, timeout)`` polls the group of three
    (committing every record it reads, a failed commit not fatal: the partition's next owner
    reads its records again) until it has read every value of ``want`` and the last commit of
    every partition succeeded; it returns every value read, repeats
    included."""
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


# -- the coordinator writes with acks=all -------------------------------------------------------


def test_a_commit_is_acknowledged_only_once_every_in_sync_replica_has_it(
        cluster_factory: ClusterFactory) -> None:
    """With a follower of the group's ``__consumer_offsets`` partition frozen (SIGSTOP, for
    less than its ZooKeeper session and ``replica.lag.time.max.ms``, so it stays in the ISR)
    the high watermark cannot pass a new commit: it is not acknowledged, and OffsetFetch
    still answers the offset before it. Once the follower resumes, the commit goes through.
    (With the leader's append alone, acks=1, the commit would be acknowledged at once and
    lost with the leader's broker.)"""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    scenario = Scenario(cluster_factory, "acks-all", settings={
        "zookeeper.session.timeout.ms": "30000", "replica.lag.time.max.ms": "120000",
        "offsets.commit.timeout.ms": "1500"})
    leader = scenario.victim
    isr = scenario.cluster.partition_state("__consumer_offsets", scenario.offsets_partition)
    assert isr is not None
    follower = next(i for i in isr["isr"] if i != leader)
    member = Consumer({"bootstrap.servers": scenario.bootstrap, "group.id": scenario.group,
                       "enable.auto.commit": False})

    def commit(offset: int) -> None:
        member.commit(offsets=[TopicPartition(scenario.topic, p, offset)
                               for p in range(PARTITIONS)], asynchronous=False)

    outcome: list[object] = []

    def commit_in_background() -> None:
        try:
            commit(7)
            outcome.append("acknowledged")
        except KafkaException as exc:
            outcome.append(exc)

    try:
        commit(3)
        assert scenario.committed() == dict.fromkeys(range(PARTITIONS), 3)
        scenario.cluster.sigstop(follower)
        try:
            worker = threading.Thread(target=commit_in_background)
            worker.start()
            time.sleep(5)  # more than offsets.commit.timeout.ms
            assert "acknowledged" not in outcome
            assert scenario.committed() == dict.fromkeys(range(PARTITIONS), 3)
        finally:
            scenario.cluster.sigcont(follower)
        worker.join(120)
        assert not worker.is_alive()
        if outcome != ["acknowledged"]:  # refused while frozen: the client commits again
            wait_until(lambda: (commit_in_background() or True) and outcome[-1] == "acknowledged",
                       90, f"a commit after broker {follower} resumed")
        assert scenario.committed() == dict.fromkeys(range(PARTITIONS), 7)
    finally:
        member.close()


# -- confluent-kafka -----------------------------------------------------------------------------


def test_confluent_group_keeps_its_offsets_when_the_coordinator_broker_is_killed(
        cluster_factory: ClusterFactory) -> None:
    from confluent_kafka import Consumer, KafkaException

    scenario = Scenario(cluster_factory, "durable-ck")
    members = []
    for _ in range(3):
        member = Consumer({"bootstrap.servers": scenario.bootstrap, "group.id": scenario.group,
                           "auto.offset.reset": "earliest", "enable.auto.commit": False,
                           "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
        member.subscribe([scenario.topic])
        members.append(member)

    def consume(want: set[str], timeout: float) -> list[str]:
        read: list[str] = []
        committed_ok = dict.fromkeys(range(PARTITIONS), True)
        deadline = time.monotonic() + timeout
        while not (set(read) >= want and all(committed_ok.values())):
            assert time.monotonic() < deadline, (
                f"read {len(set(read) & want)}/{len(want)}, commits ok {committed_ok}")
            for member in members:
                msg = member.poll(0.2)
                if msg is None or msg.error() is not None:
                    continue
                read.append(msg.value().decode())
                try:
                    member.commit(msg, asynchronous=False)
                    committed_ok[msg.partition()] = True
                except KafkaException:
                    committed_ok[msg.partition()] = False
        return read

    try:
        run_scenario(scenario, consume)
    finally:
        for member in members:
            member.close()


# -- kafka-python --------------------------------------------------------------------------------


def test_kafka_python_group_keeps_its_offsets_when_the_coordinator_broker_is_killed(
        cluster_factory: ClusterFactory) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.errors import KafkaError

    scenario = Scenario(cluster_factory, "durable-kp")
    members = [KafkaConsumer(scenario.topic, bootstrap_servers=scenario.bootstrap,
                             group_id=scenario.group, auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=10000,
                             heartbeat_interval_ms=500)
               for _ in range(3)]

    def consume(want: set[str], timeout: float) -> list[str]:
        read: list[str] = []
        committed_ok = dict.fromkeys(range(PARTITIONS), True)
        deadline = time.monotonic() + timeout
        while not (set(read) >= want and all(committed_ok.values())):
            assert time.monotonic() < deadline, (
                f"read {len(set(read) & want)}/{len(want)}, commits ok {committed_ok}")
            for member in members:
                try:
                    batches = member.poll(timeout_ms=200)
                except KafkaError:
                    continue
                if not batches:
                    continue
                for tp, records in batches.items():
                    read.extend(r.value.decode() for r in records)
                    try:
                        member.commit({TopicPartition(tp.topic, tp.partition): OffsetAndMetadata(
                            records[-1].offset + 1, "", -1)})
                        committed_ok[tp.partition] = True
                    except KafkaError:
                        committed_ok[tp.partition] = False
        return read

    try:
        run_scenario(scenario, consume)
    finally:
        for member in members:
            member.close()


# -- aiokafka ------------------------------------------------------------------------------------


def test_aiokafka_group_keeps_its_offsets_when_the_coordinator_broker_is_killed(
        cluster_factory: ClusterFactory) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.errors import KafkaError
    from aiokafka.structs import OffsetAndMetadata

    scenario = Scenario(cluster_factory, "durable-aio")
    loop = asyncio.new_event_loop()

    async def start() -> list[Any]:
        members = [AIOKafkaConsumer(scenario.topic, bootstrap_servers=scenario.bootstrap,
                                    group_id=scenario.group, auto_offset_reset="earliest",
                                    enable_auto_commit=False, session_timeout_ms=10000,
                                    heartbeat_interval_ms=500)
                   for _ in range(3)]
        for member in members:
            await member.start()
        return members

    async def consume_async(members: list[Any], want: set[str], timeout: float) -> list[str]:
        read: list[str] = []
        committed_ok = dict.fromkeys(range(PARTITIONS), True)
        deadline = time.monotonic() + timeout
        while not (set(read) >= want and all(committed_ok.values())):
            assert time.monotonic() < deadline, (
                f"read {len(set(read) & want)}/{len(want)}, commits ok {committed_ok}")
            for member in members:
                try:
                    batches = await member.getmany(timeout_ms=200)
                except KafkaError:
                    continue
                for tp, records in batches.items():
                    if not records:
                        continue
                    read.extend(r.value.decode() for r in records)
                    try:
                        await member.commit({TopicPartition(tp.topic, tp.partition):
                                             OffsetAndMetadata(records[-1].offset + 1, "")})
                        committed_ok[tp.partition] = True
                    except KafkaError:
                        committed_ok[tp.partition] = False
        return read

    members = loop.run_until_complete(start())
    try:
        run_scenario(scenario, lambda want, timeout: loop.run_until_complete(
            consume_async(members, want, timeout)))
    finally:
        for member in members:
            loop.run_until_complete(member.stop())
        loop.close()


# -- kafkajs -------------------------------------------------------------------------------------


@pytest.mark.slow  # ~85 s (kafkajs waits out its session timeouts): the slow suite
def test_kafkajs_group_keeps_its_offsets_when_the_coordinator_broker_is_killed(
        cluster_factory: ClusterFactory, tmp_path: Path) -> None:
    """Three tests/compat/js/group_worker.js processes (kafkajs consumes only through
    ``consumer.run``): each reports every record (partition, offset) and every acknowledged
    commit as a JSON line; a record's value follows from its offset (one producer, acks=all,
    ``PER_PARTITION`` records per partition and phase)."""
    require("node")
    scenario = Scenario(cluster_factory, "durable-kjs")
    outs = [tmp_path / f"kjs-{n}.jsonl" for n in range(3)]
    workers = []
    for n, out in enumerate(outs):
        # group_worker.js takes one seed broker (a survivor); it finds the rest
        config = {"bootstrap": scenario.cluster.broker(scenario.survivors[n % 2]).address(),
                  "group": scenario.group,
                  "topic": scenario.topic, "out": str(out), "name": f"kjs-{n}",
                  "commit": "sync", "delayMs": 0, "sessionMs": 10000, "heartbeatMs": 500,
                  "autoCommitMs": 1000}
        with open(tmp_path / f"kjs-{n}.err", "wb") as err:
            workers.append(subprocess.Popen(
                ["node", str(JS_DIR / "group_worker.js"), json.dumps(config)],
                stdout=subprocess.DEVNULL, stderr=err, cwd=JS_DIR,
                env={**os.environ, "NODE_PATH": str(JS_DIR / "node_modules")}))
    seen = [0] * len(outs)
    committed = dict.fromkeys(range(PARTITIONS), 0)

    def value(partition: int, offset: int) -> str:
        tag = "first" if offset < PER_PARTITION else "second"
        return f"{tag}-{partition}-{offset % PER_PARTITION}"

    def consume(want: set[str], timeout: float) -> list[str]:
        phase = 2 if any(v.startswith("second") for v in want) else 1
        read: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            for n, out in enumerate(outs):
                events = [json.loads(line) for line in complete_lines(out) if line.strip()]
                for event in events[seen[n]:]:
                    if event["e"] == "rec":
                        read.append(value(event["p"], event["o"]))
                    elif event["e"] == "commit":
                        committed[event["p"]] = max(committed[event["p"]], event["o"])
                seen[n] = len(events)
            if set(read) >= want and all(o >= phase * PER_PARTITION
                                         for o in committed.values()):
                return read
            assert all(w.poll() is None for w in workers), "a kafkajs worker exited: " + (
                tmp_path / "kjs-0.err").read_text(errors="replace")[-2000:]
            assert time.monotonic() < deadline, (
                f"read {len(set(read) & want)}/{len(want)}, committed {committed}")
            time.sleep(0.2)

    try:
        run_scenario(scenario, consume)
    finally:
        for worker in workers:
            terminate(worker, 20)
