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
coordination, not the records. Before any record is sent every one of the three members owns
a partition. One test per client of the compat suite: confluent-kafka, kafka-python, aiokafka
and kafkajs here, kcat and the moldau client in test_group_durability_more.py (the scenario:
group_scenario.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from moldau.testing.processes import terminate
from moldau.testing.tail import complete_lines

from .clients import JS_DIR, require
from .conftest import ClusterFactory
from .group_scenario import PARTITIONS, PER_PARTITION, Scenario, run_scenario, wait_until

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

    def owned() -> list[set[int]]:
        for member in members:
            msg = member.poll(0.2)  # joins and rebalances happen in poll()
            assert msg is None or msg.error() is not None, "a record before any was sent"
        return [{tp.partition for tp in member.assignment()} for member in members]

    try:
        run_scenario(scenario, consume, owned)
    finally:
        for member in members:
            member.close()


# -- kafka-python --------------------------------------------------------------------------------


def test_kafka_python_group_keeps_its_offsets_when_the_coordinator_broker_is_killed(
        cluster_factory: ClusterFactory) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.errors import KafkaError

    scenario = Scenario(cluster_factory, "durable-kp")

    def member() -> Any:
        consumer = KafkaConsumer(scenario.topic, bootstrap_servers=scenario.bootstrap,
                                 group_id=scenario.group, auto_offset_reset="earliest",
                                 enable_auto_commit=False, session_timeout_ms=10000,
                                 heartbeat_interval_ms=500)
        # Workaround of kafka-python 3.0.12's lost leader assignment (docs/compatibility.md,
        # "Known client bugs"): a metadata update right after subscribing (the constructor
        # subscribes) fills its snapshot before the first join.
        consumer.topics()
        return consumer

    members = [member() for _ in range(3)]

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

    def owned() -> list[set[int]]:
        for consumer in members:
            try:
                # joins and rebalances happen in poll()
                assert not consumer.poll(timeout_ms=200), "a record before any was sent"
            except KafkaError:
                pass
        return [{tp.partition for tp in consumer.assignment()} for consumer in members]

    try:
        run_scenario(scenario, consume, owned)
    finally:
        for consumer in members:
            consumer.close()


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

    def owned() -> list[set[int]]:
        loop.run_until_complete(asyncio.sleep(0.2))  # the group's tasks run in the loop
        return [{tp.partition for tp in member.assignment()} for member in members]

    try:
        run_scenario(scenario, lambda want, timeout: loop.run_until_complete(
            consume_async(members, want, timeout)), owned)
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

    def owned() -> list[set[int]]:
        """Each worker's partitions as its last ``assign`` event (every group join) says."""
        result = []
        for out in outs:
            events = [json.loads(line) for line in complete_lines(out) if line.strip()] \
                if out.exists() else []
            assigns = [e["p"] for e in events if e["e"] == "assign"]
            result.append(set(assigns[-1]) if assigns else set())
        return result

    try:
        run_scenario(scenario, consume, owned)
    finally:
        for worker in workers:
            terminate(worker, 20)
