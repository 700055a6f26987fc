"""The operator's view of replication on three real ``moldau serve`` brokers and a real
ZooKeeper: ``moldau topics --describe`` and its filters, ``moldau doctor``, ``moldau log-dirs``
(and DescribeLogDirs through kafka-python, a real client), run as the ``moldau`` command in a
child process as a user runs them.

A topic with replication factor 3 shows all three brokers as replicas and in the ISR, and
every broker's log dir holds each partition with the size of what was produced (the same on
every replica once the followers caught up). After kill -9 of broker 2 and the end of its
ZooKeeper session the controller drops it from the ISR: ``--under-replicated-partitions``
lists exactly the partitions it was a replica of, ``--unavailable-partitions`` nothing (the
other two replicas keep leaders), ``--under-min-isr-partitions`` nothing at
``min.insync.replicas=2`` until broker 3 goes too, and doctor names broker 2 to start.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from .conftest import ClusterFactory

TIMEOUT = 90
RECORDS = 200


def tool(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``moldau ARGS`` to completion."""
    return subprocess.run([sys.executable, "-m", "moldau", *args], capture_output=True,
                          text=True, timeout=TIMEOUT, check=False)


def wait_until(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} after {timeout} s"
        time.sleep(0.5)


def describe(bootstrap: str, pattern: str, *filters: str) -> list[dict[str, str]]:
    """The partition lines of ``moldau topics --describe`` as dicts (Topic, Partition, ...)."""
    result = tool("topics", "-b", bootstrap, "--describe", "--topic", pattern, *filters)
    assert result.returncode == 0, result.stderr
    rows = []
    for line in result.stdout.splitlines():
        if line.startswith("\t"):
            rows.append(dict(field.split(": ", 1) if ": " in field else (field.rstrip(":"), "")
                             for field in line.strip("\t").split("\t")))
    return rows


def log_dirs(bootstrap: str, *more: str) -> dict[int, dict[str, int]]:
    """Broker -> partition -> size, from ``moldau log-dirs --describe``."""
    result = tool("log-dirs", "--describe", "--bootstrap-server", bootstrap, *more)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "Querying brokers for log directories information"
    assert re.fullmatch(r"Received log directory information from brokers [0-9,]+", lines[1])
    document = json.loads(lines[2])
    assert document["version"] == 1
    out: dict[int, dict[str, int]] = {}
    for broker in document["brokers"]:
        [log_dir] = broker["logDirs"]  # one log dir per broker in these tests
        assert log_dir["error"] is None and log_dir["logDir"].startswith("/")
        out[broker["broker"]] = {}
        for p in log_dir["partitions"]:
            assert (p["offsetLag"], p["isFuture"]) == (0, False)
            out[broker["broker"]][p["partition"]] = p["size"]
    return out


def produce(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True})
    failures: list[Any] = []
    for i in range(RECORDS):
        producer.produce(topic, f"value-{i:05d}".encode() * 10, partition=i % partitions,
                         on_delivery=lambda err, _msg: failures.append(err) if err else None)
    assert producer.flush(60) == 0
    assert failures == []


@pytest.mark.slow  # ~33 s
def test_replicas_isr_log_dirs_and_a_killed_broker(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(3)
    bootstrap = cluster.bootstrap()
    topic, other = f"rt-{uuid.uuid4().hex[:6]}", f"rf2-{uuid.uuid4().hex[:6]}"
    made = tool("topics", "-b", bootstrap, "--create", "--topic", topic, "--partitions", "3",
                "--replication-factor", "3", "--config", "min.insync.replicas=2")
    assert made.returncode == 0, made.stderr
    # replication factor 2 on brokers 1 and 3: never under-replicated by broker 2's loss
    made = tool("topics", "-b", bootstrap, "--create", "--topic", other,
                "--replica-assignment", "1:3")
    assert made.returncode == 0, made.stderr
    pattern = f"{topic}|{other}"

    rows = wait_until(lambda: [r for r in describe(bootstrap, pattern)
                               if r["Leader"] != "none"], TIMEOUT, "no leaders")
    mine = [r for r in rows if r["Topic"] == topic]
    assert len(mine) == 3
    for row in mine:
        assert sorted(row["Replicas"].split(",")) == ["1", "2", "3"]
        assert sorted(row["Isr"].split(",")) == ["1", "2", "3"]
        assert row["Leader"] in row["Replicas"].split(",")
        assert "Offline" not in row
    header = tool("topics", "-b", bootstrap, "--describe", "--topic", topic).stdout
    assert re.match(rf"Topic: {topic}\tTopicId: \S+\tPartitionCount: 3\tReplicationFactor: 3"
                    r"\tConfigs: min.insync.replicas=2\n", header), header
    for flag in ("--under-replicated-partitions", "--unavailable-partitions",
                 "--under-min-isr-partitions", "--at-min-isr-partitions"):
        assert describe(bootstrap, pattern, flag) == [], flag

    produce(bootstrap, topic, 3)
    produce(bootstrap, other, 1)

    def replicated() -> dict[int, dict[str, int]] | None:
        sizes = log_dirs(bootstrap, "--topic-list", topic)
        per_partition = [{sizes[b].get(f"{topic}-{p}") for b in (1, 2, 3)} for p in range(3)]
        return sizes if all(len(s) == 1 and None not in s for s in per_partition) else None

    sizes = wait_until(replicated, TIMEOUT, "replica sizes still differ")
    # every record is >= 100 bytes of value; ~67 of them per partition
    assert all(sizes[1][f"{topic}-{p}"] > RECORDS // 3 * 100 for p in range(3)), sizes
    assert all(set(sizes[b]) == {f"{topic}-{p}" for p in range(3)} for b in (1, 2, 3))
    only_2 = log_dirs(bootstrap, "--broker-list", "2")
    assert list(only_2) == [2] and f"{other}-0" not in only_2[2]
    missing = tool("log-dirs", "--describe", "-b", bootstrap, "--broker-list", "1,7")
    assert missing.returncode == 1
    assert ("ERROR: The given brokers do not exist from --broker-list: 7. Current existent "
            "brokers: 1,2,3") in missing.stderr

    # kafka-python's DescribeLogDirs decodes what the broker sends (a real client's parser)
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        answers = admin.describe_log_dirs(topic_partitions={topic: [0, 1, 2]}, brokers=[1])
    finally:
        admin.close()
    text = json.dumps(answers, default=str)
    assert f'"{topic}"' in text and str(sizes[1][f"{topic}-0"]) in text, text

    # kill -9 broker 2: once its session ends the controller drops it from every ISR
    cluster.kill9(2)
    cluster.wait_unregistered(2, cluster.session_timeout_s + 60)
    under = wait_until(lambda: (lambda rows: rows if len(rows) == 3 else None)(
        describe(bootstrap, pattern, "--under-replicated-partitions")), TIMEOUT,
        "not all of broker 2's partitions are under-replicated")
    assert sorted((r["Topic"], r["Partition"]) for r in under) == [
        (topic, str(p)) for p in range(3)]
    for row in under:
        assert sorted(row["Isr"].split(",")) == ["1", "3"]
        assert row["Offline"] == "2"
    assert describe(bootstrap, pattern, "--unavailable-partitions") == []
    assert describe(bootstrap, pattern, "--under-min-isr-partitions") == []
    at_min = describe(bootstrap, pattern, "--at-min-isr-partitions")
    assert sorted(r["Partition"] for r in at_min if r["Topic"] == topic) == ["0", "1", "2"]

    result = tool("doctor", "-b", bootstrap, "--json", "--timeout", "5")
    report = json.loads(result.stdout)
    findings = {f["code"]: f for f in report["findings"]}
    finding = findings["under-replicated-partitions"]
    assert finding["severity"] == "warning"
    assert "missing from the ISR: broker 2 (" in finding["message"]
    for p in range(3):
        assert f"{topic}/{p}" in finding["message"]
    assert f"{other}/0" not in finding["message"]
    assert [f["action"] for f in finding["fixes"]] == ["start broker 2"]
    assert "under-min-isr-partitions" not in findings
    text = tool("doctor", "-b", bootstrap, "--timeout", "5").stdout
    assert "start broker 2" in text, text

    after = log_dirs(bootstrap, "--topic-list", topic)
    assert sorted(after) == [1, 3]
    assert after[1] == sizes[1] and after[3] == sizes[3]

    # broker 3 too: the ISR of every partition is {1} < min.insync.replicas=2
    cluster.kill9(3)
    cluster.wait_unregistered(3, cluster.session_timeout_s + 60)
    below = wait_until(lambda: (lambda rows: rows if len(rows) == 3 else None)(
        describe(bootstrap, topic, "--under-min-isr-partitions")), TIMEOUT,
        "ISRs not below min.insync.replicas")
    assert all(r["Isr"] == "1" and r["Leader"] == "1" for r in below)
    result = tool("doctor", "-b", bootstrap, "--json", "--timeout", "5")
    assert result.returncode == 1, result.stdout
    findings = {f["code"]: f for f in json.loads(result.stdout)["findings"]}
    below_finding = findings["under-min-isr-partitions"]
    assert below_finding["severity"] == "error"
    assert f"{topic}/0 (ISR 1, min.insync.replicas=2)" in below_finding["message"]
    assert [f["action"] for f in below_finding["fixes"]] == [
        "start broker 2 or check its log", "start broker 3 or check its log"]
