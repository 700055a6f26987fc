"""Preferred-leader election after a rolling restart (issue 13, acceptance 5, second half), on
three real ``moldau serve`` brokers and a real ZooKeeper, with real clients.

A rolling restart (each broker in turn stopped with SIGTERM — a controlled shutdown — and
started again once the previous one is back in every ISR) leaves the leaders bunched on the
brokers that stayed up: the last broker restarted leads nothing. Then, with
``auto.leader.rebalance.enable=false``, confluent-kafka's ``AdminClient.elect_leaders``
(ElectLeaders, PREFERRED) gives one topic's partitions back to their preferred replica (the
first of each assignment), and ``moldau leader-election --election-type PREFERRED
--all-topic-partitions`` (run as a user runs it) the rest; the tool prints Kafka's lines, and
a partition whose preferred replica is down, or one that does not exist, fails with Kafka's
error. With the automatic rebalance on and a short ``leader.imbalance.check.interval.seconds``
the controller restores the leaders by itself. A single node (no ZooKeeper) has nothing to
elect: ELECTION_NOT_NEEDED. ``--election-type UNCLEAN`` brings back a partition whose only
in-sync replica died, electing the out-of-sync one (unclean election being off otherwise).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from moldau.client import BrokerConnection
from moldau.protocol.api_keys import ApiKey
from moldau.testing.cluster import BrokerCluster
from moldau.testing.runner import BrokerProcess
from moldau.testing.waiting import wait_for

from .conftest import ClusterFactory

TIMEOUT = 120
PARTITIONS = 6


def tool(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``moldau ARGS`` to completion, as a user does."""
    return subprocess.run([sys.executable, "-m", "moldau", *args], capture_output=True,
                          text=True, timeout=TIMEOUT, check=False)


def admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def create_rf3_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    from confluent_kafka.admin import NewTopic

    client = admin(bootstrap)
    client.create_topics([NewTopic(topic, partitions, 3)], operation_timeout=30)[topic].result(60)


def produce(bootstrap: str, topic: str, count: int, tag: str) -> None:
    """``count`` acks=all records to every partition; each must be acknowledged."""
    from confluent_kafka import Producer

    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    for partition in range(PARTITIONS):
        for i in range(count):
            producer.produce(topic, f"{tag}-{partition}-{i}".encode(), partition=partition,
                             on_delivery=lambda err, _msg: err and errors.append(err))
    assert producer.flush(60) == 0
    assert errors == []


def preferred(cluster: BrokerCluster, topic: str) -> dict[int, int]:
    """Partition -> preferred replica (first of the assignment in ``/brokers/topics/<t>``)."""
    assignment = cluster.read_json(f"/brokers/topics/{topic}")
    return {int(p): replicas[0] for p, replicas in assignment["partitions"].items()}


def in_sync(cluster: BrokerCluster, topics: list[str]) -> bool:
    """Whether every partition of ``topics`` has all three replicas in its ISR."""
    for topic in topics:
        for p in range(PARTITIONS):
            state = cluster.partition_state(topic, p)
            if state is None or len(state["isr"]) != 3:
                return False
    return True


def rolling_restart(cluster: BrokerCluster, topics: list[str]) -> None:
    """Stop (SIGTERM) and start each broker in turn, each time waiting until it is back in
    every ISR, as an operator does."""
    for broker in sorted(cluster.brokers):
        assert cluster.stop_broker(broker) == 0
        assert all(leader != broker for t in topics for leader in cluster.leaders(t).values()), (
            f"broker {broker} still leads after its controlled shutdown")
        cluster.restart(broker)
        wait_for(lambda: in_sync(cluster, topics), TIMEOUT, f"broker {broker} back in the ISRs",
                 interval=0.2)


def elect_through(address: str, topic: str, partition: int) -> tuple[int, int]:
    """ElectLeaders (v2, PREFERRED) of one partition sent to the broker at ``address``;
    (top-level error, the partition's error)."""
    host, port = address.rsplit(":", 1)

    async def go() -> tuple[int, int]:
        conn = BrokerConnection(host, int(port), client_id="elect-test")
        await conn.connect()
        try:
            answer = await conn.request(ApiKey.ELECT_LEADERS, {
                "election_type": 0, "timeout": 30000,
                "topic_partitions": [{"topic": topic, "partitions": [partition]}]}, version=2)
        finally:
            conn.close()
            await conn.wait_closed()
        (result,) = answer.replica_election_results
        (partition_result,) = result.partition_result
        return int(answer.error_code), int(partition_result.error_code)

    return asyncio.run(go())


def metadata_leaders(bootstrap: str, topic: str) -> dict[int, int]:
    metadata = admin(bootstrap).list_topics(topic, timeout=30)
    return {p.id: p.leader for p in metadata.topics[topic].partitions.values()}


def restored(cluster: BrokerCluster, topic: str) -> bool:
    """Every partition of ``topic`` led by its preferred replica, in ZooKeeper and in the
    Metadata every broker answers."""
    want = preferred(cluster, topic)
    if cluster.leaders(topic) != want:
        return False
    return all(metadata_leaders(cluster.broker(b).address(), topic) == want
               for b in sorted(cluster.brokers))


def test_preferred_election_by_admin_client_and_tool_restores_leaders_after_a_rolling_restart(
        cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(3, settings={"auto.leader.rebalance.enable": "false"})
    bootstrap = cluster.bootstrap()
    by_client, by_tool = (f"{name}-{uuid.uuid4().hex[:6]}" for name in ("client", "tool"))
    for topic in (by_client, by_tool):
        create_rf3_topic(bootstrap, topic)
        wait_for(lambda t=topic: in_sync(cluster, [t]), TIMEOUT, f"{topic} in sync")
        assert cluster.leaders(topic) == preferred(cluster, topic)
        assert set(preferred(cluster, topic).values()) == {1, 2, 3}  # spread over brokers
        produce(bootstrap, topic, 20, "before")

    rolling_restart(cluster, [by_client, by_tool])
    last = max(cluster.brokers)
    for topic in (by_client, by_tool):
        leaders = cluster.leaders(topic)
        assert last not in leaders.values(), f"bunched leaders expected, got {leaders}"
        assert leaders != preferred(cluster, topic)

    # a real client's admin API: confluent-kafka's AdminClient.elect_leaders
    from confluent_kafka import ElectionType, TopicPartition

    moved = {p for p, leader in cluster.leaders(by_client).items()
             if leader != preferred(cluster, by_client)[p]}
    # one partition through a broker that is not the controller: forwarded to it
    first = min(moved)
    controller = cluster.wait_controller(30)
    other = next(b for b in sorted(cluster.brokers) if b != controller)
    assert elect_through(cluster.broker(other).address(), by_client, first) == (0, 0)
    wait_for(lambda: cluster.leaders(by_client)[first] == preferred(cluster, by_client)[first],
             30, "the forwarded election")
    moved.discard(first)
    # kafka-python's KafkaAdminClient.elect_leaders: another partition
    from kafka.admin import KafkaAdminClient

    second = min(moved)
    python_admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        response = python_admin.elect_leaders(0, {by_client: [second]})
    finally:
        python_admin.close()
    assert [(r.topic, p.partition_id, p.error_code) for r in response.replica_election_results
            for p in r.partition_result] == [(by_client, second, 0)]
    wait_for(lambda: cluster.leaders(by_client)[second]
             == preferred(cluster, by_client)[second], 30, "kafka-python's election")
    moved.discard(second)
    client = admin(bootstrap)  # kept: a dropped client ends its pending futures
    future = client.elect_leaders(
        ElectionType.PREFERRED, [TopicPartition(by_client, p) for p in range(PARTITIONS)])
    results = future.result(60)
    elected = {tp.partition for tp, err in results.items() if err is None}
    not_needed = {tp.partition for tp, err in results.items()
                  if err is not None and err.name() == "ELECTION_NOT_NEEDED"}
    assert elected == moved
    assert not_needed == set(range(PARTITIONS)) - moved
    wait_for(lambda: restored(cluster, by_client), 60, f"{by_client} leaders restored",
             interval=0.2)
    assert cluster.leaders(by_tool) != preferred(cluster, by_tool)  # untouched so far

    # the tool, as kafka-leader-election.sh
    moved = {p for p, leader in cluster.leaders(by_tool).items()
             if leader != preferred(cluster, by_tool)[p]}
    result = tool("leader-election", "--bootstrap-server", bootstrap, "--election-type",
                  "preferred", "--all-topic-partitions")
    assert result.returncode == 0, result.stderr
    expected = ", ".join(f"{by_tool}-{p}" for p in sorted(moved))
    assert f"Successfully completed leader election (PREFERRED) for partitions {expected}" \
        in result.stdout.splitlines(), result.stdout
    wait_for(lambda: restored(cluster, by_tool), 60, f"{by_tool} leaders restored",
             interval=0.2)
    produce(bootstrap, by_tool, 5, "after")

    # nothing left to do: one partition named answers "Valid replica already elected"
    result = tool("leader-election", "--bootstrap-server", bootstrap, "--election-type",
                  "PREFERRED", "--topic", by_tool, "--partition", "0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"Valid replica already elected for partitions {by_tool}-0"]

    # errors: a partition that does not exist; a preferred replica that is down
    result = tool("leader-election", "--bootstrap-server", bootstrap, "--election-type",
                  "PREFERRED", "--topic", by_tool, "--partition", "99")
    assert result.returncode == 1
    assert result.stdout.startswith(
        f"Error completing leader election (PREFERRED) for partition: {by_tool}-99: "
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"), result.stdout
    assert "1 replica(s) could not be elected" in result.stderr

    partition = next(p for p, b in preferred(cluster, by_tool).items() if b == last)
    assert cluster.stop_broker(last) == 0
    try:
        survivors = cluster.bootstrap(ids=[b for b in sorted(cluster.brokers) if b != last])
        result = tool("leader-election", "--bootstrap-server", survivors, "--election-type",
                      "PREFERRED", "--topic", by_tool, "--partition", str(partition))
        assert result.returncode == 1
        assert result.stdout.startswith(
            f"Error completing leader election (PREFERRED) for partition: {by_tool}-"
            f"{partition}: org.apache.kafka.common.errors.PreferredLeaderNotAvailableException"
        ), result.stdout
    finally:
        cluster.restart(last)


def test_auto_leader_rebalance_restores_leaders_after_a_rolling_restart(
        cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(3, settings={"leader.imbalance.check.interval.seconds": "2"})
    bootstrap = cluster.bootstrap()
    topic = f"auto-{uuid.uuid4().hex[:6]}"
    create_rf3_topic(bootstrap, topic)
    wait_for(lambda: in_sync(cluster, [topic]), TIMEOUT, f"{topic} in sync")
    produce(bootstrap, topic, 20, "before")
    rolling_restart(cluster, [topic])
    wait_for(lambda: restored(cluster, topic), 60, "the controller's automatic rebalance",
             interval=0.2)
    produce(bootstrap, topic, 5, "after")


def test_a_single_node_has_nothing_to_elect(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "single") as broker:
        bootstrap = broker.bootstrap
        topic = f"single-{uuid.uuid4().hex[:6]}"
        from confluent_kafka.admin import NewTopic

        client = admin(bootstrap)
        client.create_topics([NewTopic(topic, 2, 1)], operation_timeout=30)[topic].result(60)
        from confluent_kafka import ElectionType, TopicPartition

        results = client.elect_leaders(ElectionType.PREFERRED,
                                       [TopicPartition(topic, 0)]).result(60)
        assert [err.name() for err in results.values()] == ["ELECTION_NOT_NEEDED"]
        config = tmp_path / "admin.properties"
        config.write_text("client.id=elector\nrequest.timeout.ms=20000\n")
        result = tool("leader-election", "--bootstrap-server", bootstrap, "--election-type",
                      "PREFERRED", "--topic", topic, "--partition", "1",
                      "--admin.config", str(config))
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines() == [
            f"Valid replica already elected for partitions {topic}-1"]
        result = tool("leader-election", "--bootstrap-server", bootstrap, "--election-type",
                      "PREFERRED", "--all-topic-partitions")
        assert (result.returncode, result.stdout) == (0, ""), result.stderr


def test_unclean_election_by_the_tool_brings_an_offline_partition_back(
        cluster_factory: ClusterFactory) -> None:
    """ISR {1} and broker 1 killed: the partition stays offline (unclean election is off) even
    when out-of-sync broker 2 comes back; ``--election-type UNCLEAN`` makes 2 its leader."""
    cluster = cluster_factory(2, settings={"auto.leader.rebalance.enable": "false"})
    bootstrap = cluster.bootstrap()
    topic = f"unclean-{uuid.uuid4().hex[:6]}"
    from confluent_kafka.admin import NewTopic

    client = admin(bootstrap)
    client.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2]])],
                         operation_timeout=30)[topic].result(60)
    wait_for(lambda: (s := cluster.partition_state(topic, 0)) is not None and len(s["isr"]) == 2,
             TIMEOUT, f"{topic} in sync")
    assert cluster.stop_broker(2) == 0
    wait_for(lambda: cluster.partition_state(topic, 0)["isr"] == [1], 30, "ISR [1]")
    cluster.kill9(1)
    cluster.restart(2)
    wait_for(lambda: cluster.controller_id() == 2, 60, "broker 2 the controller")
    # offline: the new controller does not elect out-of-sync 2 by itself
    wait_for(lambda: cluster.partition_state(topic, 0)["leader"] == -1, 60, "leader -1")
    assert cluster.partition_state(topic, 0)["isr"] == [1]
    result = tool("leader-election", "--bootstrap-server", cluster.broker(2).address(),
                  "--election-type", "UNCLEAN", "--topic", topic, "--partition", "0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"Successfully completed leader election (UNCLEAN) for partitions {topic}-0"]
    state = cluster.partition_state(topic, 0)
    assert (state["leader"], state["isr"]) == (2, [2])
    wait_for(lambda: metadata_leaders(cluster.broker(2).address(), topic) == {0: 2}, 30,
             "leader 2 in Metadata")
    assert "Unclean leader election of" in cluster.broker(2).log_text()
