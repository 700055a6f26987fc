"""Acceptance 2 of issue 12: three brokers started with seed 003's environment variables
(KAFKA_BROKER_ID, KAFKA_ZOOKEEPER_CONNECT, KAFKA_LISTENERS, KAFKA_ADVERTISED_LISTENERS,
KAFKA_LISTENER_SECURITY_PROTOCOL_MAP; no properties file) form one cluster.

confluent-kafka, kafka-python, aiokafka, kafkajs and ``kcat -L`` see all three brokers
through any one of them, on the listener they connected to (seed 003's PLAINTEXT for the
inside and CONNECTIONS_FROM_HOST for the host); a 12-partition topic has 4 partitions led by
each broker; records produced through one broker are consumed through another.
"""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from moldau.testing.cluster import BrokerCluster

from .clients import CLIENTS, require

LISTENERS = ["PLAINTEXT", "CONNECTIONS_FROM_HOST"]


@pytest.fixture(scope="module", autouse=True)
def _clients_installed() -> None:
    require("kcat", "node")


def test_the_brokers_were_configured_by_seed003_variables_only(
        seed003_cluster: BrokerCluster) -> None:
    for broker_id, node in seed003_cluster.brokers.items():
        assert not node.config_path.exists()
        env = node.environment()
        assert env["KAFKA_BROKER_ID"] == str(broker_id)
        assert env["KAFKA_ZOOKEEPER_CONNECT"] == seed003_cluster.zookeeper_connect
        assert env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"] == (
            "PLAINTEXT:PLAINTEXT,CONNECTIONS_FROM_HOST:PLAINTEXT")
        assert env["KAFKA_ADVERTISED_LISTENERS"] == env["KAFKA_LISTENERS"]
    assert seed003_cluster.registered_ids() == [1, 2, 3]
    assert len({node.cluster_id for node in seed003_cluster.brokers.values()}) == 1


def test_brokers_configured_by_environment_claim_no_kraft_roles(
        seed003_cluster: BrokerCluster) -> None:
    # Kafka's ZooKeeper-mode brokers have no process.roles; the embedded defaults' single
    # node roles (broker,controller) must not leak into a broker the environment configured
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": seed003_cluster.bootstrap(
        "CONNECTIONS_FROM_HOST", [1])})
    for broker_id in sorted(seed003_cluster.brokers):
        resource = ConfigResource(ConfigResource.Type.BROKER, str(broker_id))
        configs = admin.describe_configs([resource])[resource].result(60)
        assert configs["process.roles"].value in ("", None), (broker_id, configs["process.roles"])
        assert configs["zookeeper.connect"].value == seed003_cluster.zookeeper_connect
        assert configs["broker.id"].value == str(broker_id)


@pytest.mark.parametrize("listener", LISTENERS)
@pytest.mark.parametrize("client", list(CLIENTS))
def test_every_client_sees_three_brokers_through_any_one(
        seed003_cluster: BrokerCluster, client: str, listener: str) -> None:
    expected = {i: node.address(listener) for i, node in seed003_cluster.brokers.items()}
    for broker_id in sorted(seed003_cluster.brokers):
        seen = CLIENTS[client](seed003_cluster.broker(broker_id).address(listener))
        assert seen == expected, f"{client} through broker {broker_id} on {listener}"


def test_twelve_partitions_are_spread_four_per_broker(seed003_cluster: BrokerCluster) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"spread-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": seed003_cluster.bootstrap(
        "CONNECTIONS_FROM_HOST", [2])})
    admin.create_topics([NewTopic(topic, 12, 1)])[topic].result(60)
    # every broker answers with the same leaders, and ZooKeeper holds them
    for broker_id in (1, 2, 3):
        metadata = AdminClient({"bootstrap.servers": seed003_cluster.bootstrap(
            "CONNECTIONS_FROM_HOST", [broker_id])}).list_topics(topic, timeout=60)
        partitions = metadata.topics[topic].partitions
        assert sorted(partitions) == list(range(12))
        leaders = {p: partitions[p].leader for p in partitions}
        assert Counter(leaders.values()) == {1: 4, 2: 4, 3: 4}
        assert all(partitions[p].error is None for p in partitions)
    assert seed003_cluster.leaders(topic) == leaders


def test_produced_through_one_broker_consumed_through_another(
        seed003_cluster: BrokerCluster) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"across-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": seed003_cluster.bootstrap(
        "CONNECTIONS_FROM_HOST", [1])})  # kept: a dropped client ends its pending futures
    admin.create_topics([NewTopic(topic, 12, 1)])[topic].result(60)
    producer = Producer({"bootstrap.servers": seed003_cluster.bootstrap(
        "CONNECTIONS_FROM_HOST", [1]), "linger.ms": 5})
    sent = {f"key-{i}".encode(): f"value-{i}".encode() for i in range(600)}
    for key, value in sent.items():
        producer.produce(topic, value, key)
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": seed003_cluster.bootstrap(
        "CONNECTIONS_FROM_HOST", [3]), "group.id": f"g-{topic}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    received: dict[bytes, bytes] = {}
    partitions_seen: set[int] = set()
    try:
        import time

        deadline = time.monotonic() + 90
        while len(received) < len(sent) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            received[msg.key()] = msg.value()
            partitions_seen.add(msg.partition())
    finally:
        consumer.close()
    assert received == sent
    assert partitions_seen == set(range(12))  # so all three brokers served some
