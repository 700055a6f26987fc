"""Reassignment APIs on the single node of ``make run`` (a ``moldau serve`` subprocess without
``zookeeper.connect``): kafka-python's KafkaAdminClient and ``moldau reassign-partitions``.

A cluster of one can only "move" a partition to its one broker: that changes nothing and is
accepted; any other broker is not alive (INVALID_REPLICA_ASSIGNMENT), an unknown partition is
UNKNOWN_TOPIC_OR_PARTITION, a cancellation with nothing in progress
NO_REASSIGNMENT_IN_PROGRESS; nothing is ever listed in progress. The tool's --generate and
--verify work as on a cluster, and its usage errors name the flag and the value.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import (
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)

from moldau.testing.runner import BrokerProcess


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess() as b:
        yield b


def tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "moldau", "reassign-partitions", *args],
                          capture_output=True, text=True, timeout=60, check=False)


def test_kafka_python_admin_on_a_single_node(broker: BrokerProcess) -> None:
    topic = f"one-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
        p0, p1, p9 = (TopicPartition(topic, p) for p in (0, 1, 9))
        [node] = [b["broker_id"] for b in admin.describe_cluster()["brokers"]]
        assert admin.alter_partition_reassignments({p0: [node], p1: [node, 99], p9: [node]}) \
            == {p0: None, p1: InvalidReplicationAssignmentError, p9: UnknownTopicOrPartitionError}
        assert admin.alter_partition_reassignments({p0: None}) == {
            p0: NoReassignmentInProgressError}
        assert admin.list_partition_reassignments() == {}
        assert admin.list_partition_reassignments([p0, p9]) == {}
    finally:
        admin.close()


def test_the_tool_on_a_single_node(broker: BrokerProcess, tmp_path: Path) -> None:
    topic = f"tool-{uuid.uuid4().hex[:8]}"
    made = subprocess.run([sys.executable, "-m", "moldau", "topics", "-b", broker.bootstrap,
                           "--create", "--topic", topic, "--partitions", "2"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert made.returncode == 0, made.stderr
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topics": [{"topic": topic}], "version": 1}))
    generated = tool("-b", broker.bootstrap, "--generate", "--topics-to-move-json-file",
                     str(topics), "--broker-list", "1")
    assert generated.returncode == 0, generated.stderr
    lines = generated.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert lines[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(lines[4])
    assert proposed == json.loads(lines[1])  # one broker: the same assignment
    plan = tmp_path / "plan.json"
    plan.write_text(lines[4])
    executed = tool("-b", broker.bootstrap, "--execute", "--reassignment-json-file", str(plan))
    assert executed.returncode == 0, executed.stderr
    assert executed.stdout.splitlines()[-1] == (
        f"Successfully started partition reassignments for {topic}-0,{topic}-1")
    verified = tool("-b", broker.bootstrap, "--verify", "--reassignment-json-file", str(plan))
    assert verified.stdout.splitlines() == [
        "Status of partition reassignment:",
        f"Reassignment of partition {topic}-0 is completed.",
        f"Reassignment of partition {topic}-1 is completed."]

    two = tool("-b", broker.bootstrap, "--generate", "--topics-to-move-json-file",
               str(topics), "--broker-list", "1,7")
    assert two.returncode == 1 and "Unknown broker id(s) 7 in --broker-list" in two.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [1, 1]}]}))
    refused = tool("-b", broker.bootstrap, "--execute", "--reassignment-json-file", str(bad))
    assert refused.returncode == 1
    assert "Partition replica lists may not contain duplicate entries" in refused.stderr
    bad.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [1], "log_dirs": ["/elsewhere"]}]}))
    refused = tool("-b", broker.bootstrap, "--execute", "--reassignment-json-file", str(bad))
    assert refused.returncode == 1 and "must be \"any\"" in refused.stderr
    missing = tool("-b", broker.bootstrap, "--verify")
    assert missing.returncode == 2 and "--verify needs --reassignment-json-file" in missing.stderr
