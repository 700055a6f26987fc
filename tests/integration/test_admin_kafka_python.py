"""Admin APIs through kafka-python's KafkaAdminClient against a ``moldau serve`` subprocess.

kafka-python 3 picks the newest versions: CreateTopics v7, DeleteTopics v6 (names and topic
ids), CreatePartitions v3, DescribeConfigs v4, IncrementalAlterConfigs v1, DescribeCluster v2.
Topics are created with explicit partition counts and replication factors: kafka-python
refuses -1 (broker defaults) when it guesses a broker older than 2.4 from the advertised
API versions (test_admin_protocol.py covers -1 on the wire).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kafka.admin import ConfigResource, KafkaAdminClient
from kafka.errors import (
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)

from moldau.testing.runner import BrokerProcess


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess() as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
    yield client
    client.close()


ONE = {"num_partitions": 1, "replication_factor": 1}


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def partitions_of(admin: KafkaAdminClient, topic: str) -> int:
    [description] = admin.describe_topics([topic])
    return len(description["partitions"])


def test_create_returns_id_counts_and_configs(admin: KafkaAdminClient) -> None:
    topic = name("kp")
    result = admin.create_topics({topic: {"num_partitions": 2, "replication_factor": 1,
                                          "configs": {"segment.ms": "3600000"}}})
    [created] = result["topics"]
    assert created["error_code"] == 0
    assert (created["num_partitions"], created["replication_factor"]) == (2, 1)
    assert uuid.UUID(str(created["topic_id"])).int != 0
    configs = created["configs"]
    assert configs["segment.ms"]["value"] == "3600000"
    assert configs["segment.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"
    assert partitions_of(admin, topic) == 2


def test_create_errors_raise(admin: KafkaAdminClient) -> None:
    topic = name("twice")
    admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}})
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}})
    with pytest.raises(InvalidTopicError):
        admin.create_topics({"a" * 250: ONE})
    with pytest.raises(InvalidReplicationFactorError):
        admin.create_topics({name("rf"): {"num_partitions": 1, "replication_factor": 2}})
    with pytest.raises(InvalidPartitionsError):
        admin.create_topics({name("zero"): {"num_partitions": 0, "replication_factor": 1}})
    with pytest.raises(InvalidConfigurationError):
        admin.create_topics({name("cfg"): {**ONE, "configs": {"min.insync.replicas": "0"}}})
    result = admin.create_topics({name("msg"): {**ONE, "configs": {"segment.bytes": "big"}}},
                                 raise_errors=False)
    [failed] = result["topics"]
    assert failed["error_code"] == InvalidConfigurationError.errno
    assert "segment.bytes" in failed["error_message"] and "big" in failed["error_message"]


def test_validate_only(admin: KafkaAdminClient) -> None:
    topic = name("dry")
    [result] = admin.create_topics({topic: {"num_partitions": 3, "replication_factor": 1}},
                                  validate_only=True)["topics"]
    assert result["error_code"] == 0 and result["num_partitions"] == 3
    assert topic not in admin.list_topics()


def test_create_partitions(admin: KafkaAdminClient) -> None:
    topic = name("grow")
    admin.create_topics({topic: ONE})
    admin.create_partitions({topic: 4})
    assert partitions_of(admin, topic) == 4
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({topic: 3})
    admin.create_partitions({topic: {"count": 5, "assignments": [[1]]}})
    assert partitions_of(admin, topic) == 5
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.create_partitions({name("missing"): 2})


def test_delete_by_name_and_by_id(admin: KafkaAdminClient) -> None:
    by_name, by_id = name("del"), name("delid")
    admin.create_topics({by_name: ONE, by_id: ONE})
    [described] = admin.describe_topics([by_id])
    topic_id = uuid.UUID(str(described["topic_id"]))
    result = admin.delete_topics([by_name, topic_id])
    assert sorted((t["name"], t["error_code"]) for t in result["topics"]) == sorted(
        [(by_name, 0), (by_id, 0)])
    listed = admin.list_topics()
    assert by_name not in listed and by_id not in listed
    with pytest.raises(UnknownTopicIdError):
        admin.delete_topics([uuid.uuid4()])
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics([name("never")])
    with pytest.raises(InvalidRequestError):
        admin.delete_topics([by_name, by_name])


def test_describe_and_alter_configs(admin: KafkaAdminClient) -> None:
    topic = name("cfgs")
    admin.create_topics({topic: {**ONE, "configs": {"retention.ms": "1000"}}})
    described = admin.describe_configs([ConfigResource("topic", topic)], include_synonyms=True,
                                       config_filter="all")
    configs = described["topic"][topic]
    assert configs["retention.ms"]["value"] == "1000"
    assert configs["retention.ms"]["config_type"] == "LONG"
    assert [s["name"] for s in configs["retention.ms"]["synonyms"]] == [
        "retention.ms", "log.retention.hours"]
    assert configs["cleanup.policy"]["config_type"] == "LIST"
    assert configs["preallocate"]["value"] == "false"
    admin.alter_configs([ConfigResource("topic", topic, {"retention.ms": "2000",
                                                          "cleanup.policy": "compact"})])
    modified = admin.describe_configs([ConfigResource("topic", topic)])["topic"][topic]
    assert {k: v["value"] for k, v in modified.items()} == {"retention.ms": "2000",
                                                            "cleanup.policy": "compact"}
    admin.reset_configs([ConfigResource("topic", topic, ["retention.ms"])])
    modified = admin.describe_configs([ConfigResource("topic", topic)])["topic"][topic]
    assert set(modified) == {"cleanup.policy"}


def test_broker_configs(admin: KafkaAdminClient) -> None:
    described = admin.describe_configs([ConfigResource("broker", "1")], config_filter="all")
    configs = described["broker"]["1"]
    assert configs["num.partitions"]["config_source"] == "STATIC_BROKER_CONFIG"
    assert configs["num.partitions"]["read_only"] is True
    assert configs["message.max.bytes"]["read_only"] is False
    admin.alter_configs([ConfigResource("broker", "1", {"message.max.bytes": "2000000"})])
    modified = admin.describe_configs([ConfigResource("broker", "1")])["broker"]["1"]
    assert modified["message.max.bytes"]["value"] == "2000000"
    assert modified["message.max.bytes"]["config_source"] == "DYNAMIC_BROKER_CONFIG"
    admin.reset_configs([ConfigResource("broker", "1", ["message.max.bytes"])])
    described = admin.describe_configs([ConfigResource("broker", "1")], config_filter="all")
    assert described["broker"]["1"]["message.max.bytes"]["value"] == "1048588"


def test_describe_cluster(admin: KafkaAdminClient, broker: BrokerProcess) -> None:
    cluster = admin.describe_cluster()
    assert cluster["cluster_id"] == broker.cluster_id
    assert cluster["controller_id"] == 1
    assert [(b["broker_id"], b["port"], b["is_fenced"]) for b in cluster["brokers"]] == [
        (1, broker.port(), False)]
