"""Partition reassignment (KIP-455) on four real ``moldau serve`` brokers and a real ZooKeeper,
driven as an operator drives it: ``moldau reassign-partitions`` in a child process with
kafka-reassign-partitions.sh's JSON files and flags, real clients for the data.

Acceptance 5, first half: a partition on brokers {1,2,3} holding 100 MiB (written with
confluent-kafka, acks=all, big batches) is reassigned to {2,3,4}; ``--verify`` reports it
completed; every byte reads back from the new replicas (digest of the values in offset order),
broker 1 no longer holds the partition's directory, and the leader is one of {2,3,4}.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.testing.cluster import BrokerCluster
from moldau.wire.connection import BrokerConnection

from .conftest import ClusterFactory

TIMEOUT = 120
VALUE_BYTES = 64 << 10
VALUES = 1600  # 100 MiB


def tool(*args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    """Run ``moldau ARGS`` to completion."""
    return subprocess.run([sys.executable, "-m", "moldau", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


def wait_until(condition: Callable[[], Any], timeout: float, what: str,
               pause: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} after {timeout} s"
        time.sleep(pause)


def write_plan(path: Path, topic: str, replicas: list[int]) -> str:
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": replicas}]}))
    return str(path)


def produce_values(bootstrap: str, topic: str, count: int, size: int) -> str:
    """Write ``count`` random values of ``size`` bytes to partition 0 (acks=all, idempotent,
    big batches); the SHA-256 of the values in order."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 20,
                         "batch.size": 1000000, "message.max.bytes": 1000000,
                         "queue.buffering.max.kbytes": 262144, "compression.type": "none"})
    digest = hashlib.sha256()
    failures: list[Any] = []
    block = os.urandom(size * 4)
    for i in range(count):
        # distinct values without paying os.urandom per value: a random window + the index
        start = (i * 7919) % (size * 3)
        value = i.to_bytes(8, "big") + block[start:start + size - 8]
        digest.update(value)
        while True:
            try:
                producer.produce(topic, value, partition=0, on_delivery=lambda err, _m: (
                    failures.append(err) if err else None))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0
    assert failures == []
    return digest.hexdigest()


def read_digest(bootstrap: str, topic: str, count: int) -> str:
    """The SHA-256 of the first ``count`` values of partition 0, read by offset."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "fetch.max.bytes": 16 << 20,
                         "max.partition.fetch.bytes": 8 << 20})
    consumer.assign([TopicPartition(topic, 0, 0)])
    digest = hashlib.sha256()
    expected = 0
    deadline = time.monotonic() + TIMEOUT
    try:
        while expected < count:
            assert time.monotonic() < deadline, f"read {expected} of {count} values"
            for message in consumer.consume(200, timeout=1.0):
                assert message.error() is None, message.error()
                assert message.offset() == expected
                digest.update(message.value())
                expected += 1
    finally:
        consumer.close()
    return digest.hexdigest()


def assignment_znode(cluster: BrokerCluster, topic: str) -> dict[str, Any]:
    data = cluster.read_json(f"/brokers/topics/{topic}")
    assert isinstance(data, dict)
    return data


async def forwarded(address: str, topic: str) -> tuple[Any, Any]:
    """ListPartitionReassignments and a cancellation of ``topic``-0, sent to ``address``."""
    host, port = address.rsplit(":", 1)
    conn = BrokerConnection(host, int(port))
    await conn.connect()
    try:
        listed = await conn.request(ApiKey.LIST_PARTITION_REASSIGNMENTS,
                                    {"timeout": 30000, "topics": None})
        cancelled = await conn.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, {
            "timeout": 30000, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "replicas": None}]}]})
    finally:
        conn.close()
    return listed, cancelled


def log_bytes(cluster: BrokerCluster, broker: int, topic: str) -> int:
    """Bytes of the ``.log`` segments of partition 0 on ``broker``."""
    folder = cluster.broker(broker).data_dir / f"{topic}-0"
    return sum(f.stat().st_size for f in folder.glob("*.log"))


def create_topic(bootstrap: str, topic: str, replicas: str) -> None:
    made = tool("topics", "-b", bootstrap, "--create", "--topic", topic,
                "--replica-assignment", replicas)
    assert made.returncode == 0, made.stderr


@pytest.mark.slow
def test_reassign_100_mib_from_1_2_3_to_2_3_4(cluster_factory: ClusterFactory,
                                              tmp_path: Path) -> None:
    cluster = cluster_factory(4)
    bootstrap = cluster.bootstrap()
    topic = f"move-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, "1:2:3")
    wait_until(lambda: cluster.leaders(topic).get(0, -1) in (1, 2, 3), TIMEOUT, "no leader")

    started = time.monotonic()
    written = produce_values(bootstrap, topic, VALUES, VALUE_BYTES)
    print(f"wrote {VALUES * VALUE_BYTES >> 20} MiB in {time.monotonic() - started:.1f} s")

    # --generate proposes an assignment over 2,3,4 and changes nothing
    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps({"topics": [{"topic": topic}], "version": 1}))
    generated = tool("reassign-partitions", "--bootstrap-server", bootstrap, "--generate",
                     "--topics-to-move-json-file", str(topics_file), "--broker-list", "2,3,4")
    assert generated.returncode == 0, generated.stderr
    lines = generated.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert json.loads(lines[1]) == {"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [1, 2, 3],
         "log_dirs": ["any", "any", "any"]}]}
    assert lines[3] == "Proposed partition reassignment configuration"
    [proposed] = json.loads(lines[4])["partitions"]
    assert sorted(proposed["replicas"]) == [2, 3, 4]

    plan = write_plan(tmp_path / "plan.json", topic, [2, 3, 4])
    started = time.monotonic()
    executed = tool("reassign-partitions", "--bootstrap-server", bootstrap, "--execute",
                    "--reassignment-json-file", plan)
    assert executed.returncode == 0, executed.stderr
    out = executed.stdout.splitlines()
    assert out[0] == "Current partition replica assignment"
    assert json.loads(out[2])["partitions"][0]["replicas"] == [1, 2, 3]
    assert out[4] == "Save this to use as the --reassignment-json-file option during rollback"
    assert out[5] == f"Successfully started partition reassignment for {topic}-0"

    def verified() -> bool:
        result = tool("reassign-partitions", "--bootstrap-server", bootstrap, "--verify",
                      "--reassignment-json-file", plan)
        assert result.returncode == 0, result.stderr
        status = result.stdout.splitlines()
        assert status[0] == "Status of partition reassignment:"
        assert status[1] in (f"Reassignment of partition {topic}-0 is completed.",
                             f"Reassignment of partition {topic}-0 is still in progress."), status
        return status[1].endswith("is completed.")

    wait_until(verified, TIMEOUT, "the reassignment did not complete", pause=1.0)
    print(f"moved in {time.monotonic() - started:.1f} s")

    znode = assignment_znode(cluster, topic)
    assert znode["partitions"] == {"0": [2, 3, 4]}
    assert znode.get("adding_replicas", {}) == {} and znode.get("removing_replicas", {}) == {}
    state = cluster.partition_state(topic, 0)
    assert state is not None and state["leader"] in (2, 3, 4)
    assert sorted(state["isr"]) == [2, 3, 4]
    gone = cluster.broker(1).data_dir / f"{topic}-0"
    wait_until(lambda: not gone.exists(), TIMEOUT, f"{gone} still exists")
    # the new replica holds the same log bytes as the old ones
    sizes = {b: log_bytes(cluster, b, topic) for b in (2, 3, 4)}
    assert len(set(sizes.values())) == 1 and sizes[4] > VALUES * VALUE_BYTES, sizes

    # every byte back, from the new replicas only (broker 1 is not a bootstrap server)
    assert read_digest(cluster.bootstrap(ids=[2, 3, 4]), topic, VALUES) == written

    listed = tool("reassign-partitions", "--bootstrap-server", bootstrap, "--list")
    assert listed.stdout == "No partition reassignments found.\n", listed.stderr

    # a broker that is not the controller forwards both APIs, Kafka's codes coming back
    controller = cluster.wait_controller()
    other = next(b for b in (1, 2, 3, 4) if b != controller)
    listed, cancelled = asyncio.run(forwarded(cluster.bootstrap(ids=[other]), topic))
    assert (listed.error_code, listed.topics) == (0, ())
    assert cancelled.error_code == 0
    [[answer]] = [t.partitions for t in cancelled.responses]
    assert answer.error_code == ErrorCode.no_reassignment_in_progress


def metadata_replicas(bootstrap: str, topic: str) -> list[int]:
    """Partition 0's replicas as Metadata (confluent-kafka) shows them."""
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    return list(metadata.topics[topic].partitions[0].replicas)


@pytest.mark.slow  # ~33 s
def test_cancel_and_a_controller_failover_mid_move(cluster_factory: ClusterFactory,
                                                   tmp_path: Path) -> None:
    """The state of a move is in ZooKeeper and Metadata while it lasts; ``--cancel`` puts the
    old replicas back; a controller killed mid-move leaves it to the next one, which
    completes it once the new replica caught up. kafka-python's admin client (a real client)
    gets Kafka's errors and lists the reassignments (none once done); the old controller,
    restarted, deletes its copy of the partition it no longer holds."""
    from kafka import TopicPartition as KafkaTopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import NoReassignmentInProgressError, UnknownTopicOrPartitionError

    # x is frozen for a few runs of the tool: long enough a session that it stays registered
    # (a target broker that is not registered is refused, INVALID_REPLICA_ASSIGNMENT)
    cluster = cluster_factory(4, settings={"zookeeper.session.timeout.ms": "20000"})
    controller = cluster.wait_controller()
    # x: the broker to add, not the controller; the controller leads and is moved off
    x = max(b for b in (1, 2, 3, 4) if b != controller)
    original = [controller, *sorted(b for b in (1, 2, 3, 4) if b not in (x, controller))]
    target = [*original[1:], x]
    topic = f"mid-{uuid.uuid4().hex[:6]}"
    bootstrap = cluster.bootstrap()
    create_topic(bootstrap, topic, ":".join(map(str, original)))
    wait_until(lambda: cluster.leaders(topic).get(0) == controller, TIMEOUT, "no leader")
    written = produce_values(bootstrap, topic, 80, VALUE_BYTES)  # 5 MiB
    tp = KafkaTopicPartition(topic, 0)
    plan = write_plan(tmp_path / "plan.json", topic, target)

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        assert admin.alter_partition_reassignments({tp: None}) == {
            tp: NoReassignmentInProgressError}
        assert admin.alter_partition_reassignments({KafkaTopicPartition(topic, 5): [1]}) == {
            KafkaTopicPartition(topic, 5): UnknownTopicOrPartitionError}
        assert admin.list_partition_reassignments() == {}
    finally:
        admin.close()

    # x frozen: it cannot fetch, so the move stays in progress. Only the moldau tool runs
    # meanwhile, bootstrapped away from x (a client that picked x would wait on it).
    others = cluster.bootstrap(ids=[b for b in (1, 2, 3, 4) if b != x])

    def run(action: str) -> list[str]:
        result = tool("reassign-partitions", "-b", others, f"--{action}",
                      "--reassignment-json-file", plan)
        assert result.returncode == 0, result.stderr
        return result.stdout.splitlines()

    assert run("cancel") == ["None of the specified partition reassignments are active."]
    cluster.sigstop(x)
    try:
        assert run("execute")[-1] == f"Successfully started partition reassignment for {topic}-0"
        assert run("verify")[1] == f"Reassignment of partition {topic}-0 is still in progress."
        znode = assignment_znode(cluster, topic)
        assert znode["partitions"] == {"0": [*target, controller]}
        assert znode["adding_replicas"] == {"0": [x]}
        assert znode["removing_replicas"] == {"0": [controller]}

        def described() -> bool:
            result = tool("topics", "-b", others, "--describe", "--topic", topic)
            return (f"\tReplicas: {','.join(map(str, [*target, controller]))}\t" in result.stdout
                    and f"\tAdding Replicas: {x}\tRemoving Replicas: {controller}"
                    in result.stdout)

        wait_until(described, 10, "moldau topics --describe does not show the move")
        assert run("cancel") == [f"Successfully cancelled partition reassignment for: {topic}-0"]
        # the replicas less those being added, in the order of the union (as Kafka's
        # revert does); the leader did not move
        znode = assignment_znode(cluster, topic)
        assert sorted(znode["partitions"]["0"]) == sorted(original)
        assert znode.get("adding_replicas", {}) == {}
        assert cluster.leaders(topic)[0] == controller

        run("execute")
        cluster.kill9(controller)  # the controller and the partition's leader, mid-move
    finally:
        cluster.sigcont(x)
    survivors = cluster.bootstrap(ids=target)
    new_controller = cluster.wait_controller(timeout=TIMEOUT, not_in=[controller])
    assert new_controller != controller

    def completed() -> bool:
        result = tool("reassign-partitions", "-b", survivors, "--verify",
                      "--reassignment-json-file", plan)
        return f"Reassignment of partition {topic}-0 is completed." in result.stdout

    wait_until(completed, TIMEOUT, "the move did not complete after the failover", pause=1.0)
    znode = assignment_znode(cluster, topic)
    assert znode["partitions"] == {"0": target}
    assert znode.get("adding_replicas", {}) == {} and znode.get("removing_replicas", {}) == {}
    state = cluster.partition_state(topic, 0)
    assert state is not None and state["leader"] in target
    assert sorted(state["isr"]) == sorted(target)
    assert sorted(metadata_replicas(survivors, topic)) == sorted(target)
    assert read_digest(survivors, topic, 80) == written
    admin = KafkaAdminClient(bootstrap_servers=survivors, request_timeout_ms=30000)
    try:
        assert admin.list_partition_reassignments() == {}
    finally:
        admin.close()
    # the old controller comes back as a stranger to the partition and deletes its copy
    cluster.restart(controller)
    stale = cluster.broker(controller).data_dir / f"{topic}-0"
    wait_until(lambda: not stale.exists(), TIMEOUT, f"{stale} still exists")


def test_the_pre_2_4_znode_way(cluster_factory: ClusterFactory) -> None:
    """An old tool writes ``/admin/reassign_partitions``: the controller moves the partition
    and deletes the znode when done; a znode not in Kafka's format is deleted too."""
    cluster = cluster_factory(3)
    bootstrap = cluster.bootstrap()
    topic = f"old-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, "1:2")
    wait_until(lambda: cluster.leaders(topic).get(0) == 1, TIMEOUT, "no leader")
    written = produce_values(bootstrap, topic, 40, VALUE_BYTES)
    zk = cluster.kazoo()
    zk.create("/admin/reassign_partitions", json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [3, 2]}]}).encode(), makepath=True)
    wait_until(lambda: zk.exists("/admin/reassign_partitions") is None, TIMEOUT,
               "/admin/reassign_partitions was not deleted")
    assert assignment_znode(cluster, topic)["partitions"] == {"0": [3, 2]}
    state = cluster.partition_state(topic, 0)
    assert state is not None and state["leader"] in (2, 3)
    assert read_digest(cluster.bootstrap(ids=[2, 3]), topic, 40) == written
    zk.create("/admin/reassign_partitions", b"not json")
    wait_until(lambda: zk.exists("/admin/reassign_partitions") is None, TIMEOUT,
               "a malformed /admin/reassign_partitions was not deleted")
