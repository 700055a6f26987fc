"""Admin APIs on the wire, at every version served, against an in-process broker.

Real clients (test_admin_confluent.py, test_admin_kafka_python.py) each use one version per
API; this module sends kio-encoded requests over a socket for each version we advertise and
covers what those clients cannot ask for: the cluster-default broker resource (""), topic
deletion by id with bad combinations, internal topics, fenced brokers, endpoint types,
loggers, another listener.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from broker_wire import Wire

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.testing.runner import InProcessBroker

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND = 0, 1, 2


@pytest.fixture(scope="module")
def node() -> Iterator[InProcessBroker]:
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "num.partitions": 2,
    }
    with InProcessBroker(settings=settings) as broker:
        yield broker


@pytest.fixture
def wire(node: InProcessBroker) -> Iterator[Wire]:
    with Wire(node.broker.bound_port("PLAINTEXT"), client_id="admin-test") as connection:
        yield connection


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(wire: Wire, version: int, *topics: dict[str, Any],
           validate_only: bool = False) -> list[dict[str, Any]]:
    full = [{"num_partitions": -1, "replication_factor": -1, "assignments": [],
             "configs": [], **t} for t in topics]
    return wire.call(ApiKey.CREATE_TOPICS, version,
                     {"topics": full, "timeout": 10000, "validate_only": validate_only}
                     )["topics"]


def describe(wire: Wire, version: int, resource_type: int, resource: str,
             keys: list[str] | None = None, **flags: bool) -> dict[str, Any]:
    [result] = wire.call(ApiKey.DESCRIBE_CONFIGS, version, {
        "resources": [{"resource_type": resource_type, "resource_name": resource,
                       "configuration_keys": keys}], **flags})["results"]
    return result


def incremental(wire: Wire, resource_type: int, resource: str,
                *ops: tuple[str, int, str | None], version: int = 1,
                validate_only: bool = False) -> dict[str, Any]:
    [result] = wire.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, {
        "resources": [{"resource_type": resource_type, "resource_name": resource,
                       "configs": [{"name": k, "config_operation": op, "value": v}
                                   for k, op, v in ops]}],
        "validate_only": validate_only})["responses"]
    return result


# --- CreateTopics -------------------------------------------------------------------------------
@pytest.mark.parametrize("version", range(2, 8))
def test_create_topics_every_version(wire: Wire, node: InProcessBroker, version: int) -> None:
    topic = name(f"v{version}")
    [created] = create(wire, version, {"name": topic, "num_partitions": 3,
                                       "replication_factor": 1,
                                       "configs": [{"name": "retention.ms", "value": "99"}]})
    assert created["error_code"] == ErrorCode.none
    assert len(node.broker.image.topics_by_name[topic].partitions) == 3
    if version >= 7:
        assert created["topic_id"] == node.broker.image.topics_by_name[topic].topic_id
    if version >= 5:
        assert (created["num_partitions"], created["replication_factor"]) == (3, 1)
        configs = {c["name"]: c for c in created["configs"]}
        assert configs["retention.ms"]["value"] == "99"
        assert configs["retention.ms"]["config_source"] == 1
        assert configs["segment.bytes"]["config_source"] == 5
        assert [c["name"] for c in created["configs"]] == sorted(configs)
    [again] = create(wire, version, {"name": topic, "num_partitions": 1,
                                     "replication_factor": 1})
    assert again["error_code"] == ErrorCode.topic_already_exists
    assert again["error_message"] == f"Topic '{topic}' already exists."


def test_create_defaults_duplicates_and_internal(wire: Wire, node: InProcessBroker) -> None:
    topic, twice = name("dflt"), name("twice")
    results = create(wire, 7, {"name": topic}, {"name": twice}, {"name": twice},
                     {"name": "__transaction_state"})
    by_name = {r["name"]: r for r in results}
    assert len(results) == 3  # the duplicate is answered once
    assert (by_name[topic]["num_partitions"], by_name[topic]["replication_factor"]) == (2, 1)
    assert by_name[twice]["error_code"] == ErrorCode.invalid_request
    assert by_name[twice]["error_message"] == "Duplicate topic name."
    assert by_name["__transaction_state"]["error_code"] == ErrorCode.invalid_request
    assert twice not in node.broker.image.topics_by_name


def test_create_validate_only_returns_configs_without_creating(wire: Wire,
                                                              node: InProcessBroker) -> None:
    topic = name("dry")
    [result] = create(wire, 7, {"name": topic, "configs": [
        {"name": "cleanup.policy", "value": "compact"}]}, validate_only=True)
    assert result["error_code"] == ErrorCode.none
    assert result["topic_id"] in (None, uuid.UUID(int=0))  # kio reads all zeros as None
    assert {c["name"]: c["value"] for c in result["configs"]}["cleanup.policy"] == "compact"
    assert topic not in node.broker.image.topics_by_name


def test_create_bad_values(wire: Wire) -> None:
    results = create(
        wire, 7,
        {"name": name("zero"), "num_partitions": 0, "replication_factor": 1},
        {"name": name("neg"), "num_partitions": 1, "replication_factor": -3},
        {"name": name("null"), "configs": [{"name": "retention.ms", "value": None}]},
        {"name": name("both"), "num_partitions": 1,
         "assignments": [{"partition_index": 0, "broker_ids": [1]}]},
        {"name": name("gap"), "assignments": [{"partition_index": 1, "broker_ids": [1]}]},
        {"name": name("huge"), "num_partitions": 2_000_000_000, "replication_factor": 1},
        {"name": name("twice"), "assignments": [{"partition_index": 0, "broker_ids": [1]},
                                                 {"partition_index": 0, "broker_ids": [1]}]},
    )
    assert sorted(r["error_code"] for r in results) == sorted([
        ErrorCode.invalid_partitions, ErrorCode.invalid_replication_factor,
        ErrorCode.invalid_config, ErrorCode.invalid_request,
        ErrorCode.invalid_replica_assignment, ErrorCode.policy_violation,
        ErrorCode.invalid_replica_assignment])
    assert all(r["error_message"] for r in results)


# --- DeleteTopics -------------------------------------------------------------------------------
@pytest.mark.parametrize("version", range(1, 7))
def test_delete_topics_every_version(wire: Wire, node: InProcessBroker, version: int) -> None:
    topic = name(f"del{version}")
    create(wire, 7, {"name": topic, "num_partitions": 1, "replication_factor": 1})
    missing = name("missing")
    if version >= 6:
        body = {"topics": [{"name": topic, "topic_id": uuid.UUID(int=0)},
                           {"name": missing, "topic_id": uuid.UUID(int=0)}]}
    else:
        body = {"topic_names": [topic, missing]}
    responses = wire.call(ApiKey.DELETE_TOPICS, version, {**body, "timeout": 5000})["responses"]
    codes = {r["name"]: r["error_code"] for r in responses}
    assert codes == {topic: ErrorCode.none, missing: ErrorCode.unknown_topic_or_partition}
    assert topic not in node.broker.image.topics_by_name


def test_delete_by_id_and_bad_combinations(wire: Wire, node: InProcessBroker) -> None:
    topic = name("byid")
    [created] = create(wire, 7, {"name": topic, "num_partitions": 1, "replication_factor": 1})
    topic_id = created["topic_id"]
    unknown = uuid.uuid4()
    zero = uuid.UUID(int=0)
    responses = wire.call(ApiKey.DELETE_TOPICS, 6, {"topics": [
        {"name": None, "topic_id": topic_id},
        {"name": None, "topic_id": unknown},
        {"name": "x", "topic_id": unknown},
        {"name": None, "topic_id": zero},
        {"name": "dup", "topic_id": zero},
        {"name": "dup", "topic_id": zero},
    ], "timeout": 5000})["responses"]
    summary = sorted(((r["name"] or "", r["error_code"], r["error_message"] or "")
                      for r in responses), key=lambda item: (item[0], item[1]))
    assert summary == sorted([
        ("", ErrorCode.invalid_request, "Neither topic name nor id were specified."),
        ("", ErrorCode.unknown_topic_id, f"Topic id {unknown} does not exist."),
        ("dup", ErrorCode.invalid_request, "Duplicate topic name."),
        (topic, ErrorCode.none, ""),
        ("x", ErrorCode.invalid_request, "You may not specify both topic name and topic id."),
    ], key=lambda item: (item[0], item[1]))
    deleted = next(r for r in responses if r["name"] == topic)
    assert deleted["topic_id"] == topic_id
    assert topic not in node.broker.image.topics_by_name


def test_internal_topics_cannot_be_deleted(wire: Wire, node: InProcessBroker) -> None:
    from moldau.broker.metadata.controller import TopicSpec

    if "__consumer_offsets" not in node.broker.image.topics_by_name:
        node.call(node.broker.controller.create_topics, [TopicSpec("__consumer_offsets", 1, 1)])
    [result] = wire.call(ApiKey.DELETE_TOPICS, 6, {"topics": [
        {"name": "__consumer_offsets", "topic_id": uuid.UUID(int=0)}], "timeout": 5000}
    )["responses"]
    assert result["error_code"] == ErrorCode.invalid_request
    assert "internal" in result["error_message"]
    assert "__consumer_offsets" in node.broker.image.topics_by_name


# --- CreatePartitions --------------------------------------------------------------------------
@pytest.mark.parametrize("version", range(0, 4))
def test_create_partitions_every_version(wire: Wire, node: InProcessBroker,
                                         version: int) -> None:
    topic = name(f"cp{version}")
    create(wire, 7, {"name": topic, "num_partitions": 1, "replication_factor": 1})
    results = wire.call(ApiKey.CREATE_PARTITIONS, version, {"topics": [
        {"name": topic, "count": 3, "assignments": None},
        {"name": "dupe", "count": 3, "assignments": None},
        {"name": "dupe", "count": 3, "assignments": None},
    ], "timeout": 5000, "validate_only": False})["results"]
    codes = {r["name"]: (r["error_code"], r["error_message"]) for r in results}
    assert codes == {topic: (ErrorCode.none, None),
                     "dupe": (ErrorCode.invalid_request, "Duplicate topic name.")}
    assert len(node.broker.image.topics_by_name[topic].partitions) == 3
    [shrink] = wire.call(ApiKey.CREATE_PARTITIONS, version, {"topics": [
        {"name": topic, "count": 2, "assignments": None}], "timeout": 5000,
        "validate_only": False})["results"]
    assert shrink["error_code"] == ErrorCode.invalid_partitions


# --- DescribeConfigs ---------------------------------------------------------------------------
@pytest.mark.parametrize("version", range(1, 5))
def test_describe_configs_every_version(wire: Wire, version: int) -> None:
    topic = name(f"dc{version}")
    create(wire, 7, {"name": topic, "num_partitions": 1, "replication_factor": 1,
                     "configs": [{"name": "min.cleanable.dirty.ratio", "value": "0.25"}]})
    flags: dict[str, bool] = {"include_synonyms": True}
    if version >= 3:
        flags["include_documentation"] = True
    result = describe(wire, version, TOPIC, topic, **flags)
    assert result["error_code"] == ErrorCode.none
    configs = {c["name"]: c for c in result["configs"]}
    ratio = configs["min.cleanable.dirty.ratio"]
    assert (ratio["value"], ratio["config_source"]) == ("0.25", 1)
    assert [(s["name"], s["source"]) for s in ratio["synonyms"]] == [
        ("min.cleanable.dirty.ratio", 1), ("log.cleaner.min.cleanable.ratio", 5)]
    if version >= 3:
        assert ratio["config_type"] == 6  # DOUBLE
        assert configs["cleanup.policy"]["config_type"] == 7  # LIST
        assert ratio["documentation"]
    only = describe(wire, version, TOPIC, topic, ["segment.ms", "no.such.key"])
    assert [c["name"] for c in only["configs"]] == ["segment.ms"]
    assert only["configs"][0]["synonyms"] == []


def test_describe_config_errors(wire: Wire) -> None:
    assert describe(wire, 4, TOPIC, name("nope"))["error_code"] == (
        ErrorCode.unknown_topic_or_partition)
    assert describe(wire, 4, TOPIC, "bad/name")["error_code"] == (
        ErrorCode.invalid_topic_exception)
    other = describe(wire, 4, BROKER, "7")
    assert other["error_code"] == ErrorCode.invalid_request
    assert "expected 1" in other["error_message"]
    assert describe(wire, 4, BROKER, "one")["error_code"] == ErrorCode.invalid_request
    assert describe(wire, 4, 32, "group")["error_code"] == ErrorCode.invalid_request


def test_cluster_default_broker_resource(wire: Wire) -> None:
    topic = name("clusterdefault")
    create(wire, 7, {"name": topic, "num_partitions": 1, "replication_factor": 1})
    assert describe(wire, 4, BROKER, "")["configs"] == []
    result = incremental(wire, BROKER, "", ("log.segment.bytes", SET, "2097152"),
                         ("log.cleanup.policy", APPEND, "compact"))
    assert result["error_code"] == ErrorCode.none
    try:
        described = {c["name"]: c for c in describe(wire, 4, BROKER, "",
                                                     include_synonyms=True)["configs"]}
        assert set(described) == {"log.segment.bytes", "log.cleanup.policy"}
        assert described["log.cleanup.policy"]["value"] == "delete,compact"
        assert described["log.segment.bytes"]["config_source"] == 3
        assert [s["source"] for s in described["log.segment.bytes"]["synonyms"]] == [3]
        segment = {c["name"]: c for c in describe(wire, 4, TOPIC, topic, ["segment.bytes"],
                                                  include_synonyms=True)["configs"]}
        assert segment["segment.bytes"]["value"] == "2097152"
        assert [(s["name"], s["source"]) for s in segment["segment.bytes"]["synonyms"]] == [
            ("log.segment.bytes", 3), ("log.segment.bytes", 5)]
    finally:
        # legacy AlterConfigs with no configs replaces the set with nothing
        [cleared] = wire.call(ApiKey.ALTER_CONFIGS, 2, {"resources": [
            {"resource_type": BROKER, "resource_name": "", "configs": []}],
            "validate_only": False})["responses"]
        assert cleared["error_code"] == ErrorCode.none
    assert describe(wire, 4, BROKER, "")["configs"] == []


def test_broker_logger_resource(wire: Wire) -> None:
    logging.getLogger("moldau.broker.admin-test").setLevel(logging.INFO)
    loggers = {c["name"]: c["value"] for c in describe(wire, 4, BROKER_LOGGER, "1")["configs"]}
    assert "root" in loggers and loggers["moldau.broker.admin-test"] == "INFO"
    result = incremental(wire, BROKER_LOGGER, "1", ("moldau.broker.admin-test", SET, "WARN"))
    assert result["error_code"] == ErrorCode.none
    assert logging.getLogger("moldau.broker.admin-test").level == logging.WARNING
    bad = incremental(wire, BROKER_LOGGER, "1", ("moldau.broker.admin-test", SET, "LOUD"))
    assert bad["error_code"] == ErrorCode.invalid_config
    root = incremental(wire, BROKER_LOGGER, "1", ("root", DELETE, None))
    assert root["error_code"] == ErrorCode.invalid_config
    assert incremental(wire, BROKER_LOGGER, "1", ("moldau.broker.admin-test", DELETE, None)
                       )["error_code"] == ErrorCode.none
    assert logging.getLogger("moldau.broker.admin-test").level == logging.NOTSET


# --- AlterConfigs and IncrementalAlterConfigs --------------------------------------------------
@pytest.mark.parametrize("version", range(0, 3))
def test_alter_configs_every_version(wire: Wire, node: InProcessBroker, version: int) -> None:
    topic = name(f"ac{version}")
    create(wire, 7, {"name": topic, "num_partitions": 1, "replication_factor": 1,
                     "configs": [{"name": "segment.ms", "value": "100000"}]})
    responses = wire.call(ApiKey.ALTER_CONFIGS, version, {"resources": [
        {"resource_type": TOPIC, "resource_name": topic,
         "configs": [{"name": "retention.ms", "value": "5000"}]},
        {"resource_type": 0, "resource_name": "x", "configs": []},
        {"resource_type": BROKER_LOGGER, "resource_name": "1", "configs": []},
        {"resource_type": BROKER, "resource_name": "1",
         "configs": [{"name": "log.retention.hours", "value": "1"}]},
    ], "validate_only": False})["responses"]
    assert [r["error_code"] for r in responses] == [
        ErrorCode.none, ErrorCode.unsupported_version, ErrorCode.invalid_request,
        ErrorCode.invalid_request]
    assert "log.retention.hours" in responses[3]["error_message"]
    assert node.broker.image.topic_configs[topic] == {"retention.ms": "5000"}


@pytest.mark.parametrize("version", range(0, 2))
def test_incremental_alter_configs_every_version(wire: Wire, node: InProcessBroker,
                                                 version: int) -> None:
    topic = name(f"iac{version}")
    create(wire, 7, {"name": topic, "num_partitions": 1, "replication_factor": 1})
    assert incremental(wire, TOPIC, topic, ("cleanup.policy", SET, "compact"),
                       version=version)["error_code"] == ErrorCode.none
    assert node.broker.image.topic_configs[topic] == {"cleanup.policy": "compact"}
    dry = incremental(wire, TOPIC, topic, ("cleanup.policy", DELETE, None), version=version,
                      validate_only=True)
    assert dry["error_code"] == ErrorCode.none
    assert node.broker.image.topic_configs[topic] == {"cleanup.policy": "compact"}
    bad = incremental(wire, TOPIC, topic, ("cleanup.policy", SET, "shred"), version=version)
    assert bad["error_code"] == ErrorCode.invalid_config
    assert "cleanup.policy" in bad["error_message"] and "shred" in bad["error_message"]
    unknown = incremental(wire, TOPIC, name("absent"), ("retention.ms", SET, "1"),
                          version=version)
    assert unknown["error_code"] == ErrorCode.unknown_topic_or_partition


def test_duplicate_resources(wire: Wire) -> None:
    topic = name("dupres")
    create(wire, 7, {"name": topic, "num_partitions": 1, "replication_factor": 1})
    resource = {"resource_type": TOPIC, "resource_name": topic,
                "configs": [{"name": "retention.ms", "config_operation": SET, "value": "1"}]}
    responses = wire.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
        "resources": [resource, resource], "validate_only": False})["responses"]
    assert [(r["error_code"], r["error_message"]) for r in responses] == [
        (ErrorCode.invalid_request, "Duplicate resource.")]


# --- DescribeCluster ---------------------------------------------------------------------------
@pytest.mark.parametrize("version", range(0, 3))
def test_describe_cluster_every_version(wire: Wire, node: InProcessBroker,
                                        version: int) -> None:
    body: dict[str, Any] = {"include_cluster_authorized_operations": False}
    result = wire.call(ApiKey.DESCRIBE_CLUSTER, version, body)
    assert result["error_code"] == ErrorCode.none
    assert result["cluster_id"] == node.broker.cluster_id
    assert result["controller_id"] == 1
    assert result["cluster_authorized_operations"] == -(2**31)
    assert [(b["broker_id"], b["port"]) for b in result["brokers"]] == [
        (1, node.broker.bound_port("PLAINTEXT"))]
    with_ops = wire.call(ApiKey.DESCRIBE_CLUSTER, version,
                         {"include_cluster_authorized_operations": True})
    assert with_ops["cluster_authorized_operations"] > 0


def test_describe_cluster_on_another_listener(node: InProcessBroker) -> None:
    with Wire(node.broker.bound_port("OTHER"), client_id="admin-test") as other:
        result = other.call(ApiKey.DESCRIBE_CLUSTER, 2, {
            "include_cluster_authorized_operations": False, "endpoint_type": 1,
            "include_fenced_brokers": False})
    assert [b["port"] for b in result["brokers"]] == [node.broker.bound_port("OTHER")]


def test_describe_cluster_endpoint_types_and_fenced(wire: Wire, node: InProcessBroker) -> None:
    from moldau.broker.metadata.records import BrokerEndpoint, RegisterBrokerRecord

    controllers = wire.call(ApiKey.DESCRIBE_CLUSTER, 1, {
        "include_cluster_authorized_operations": False, "endpoint_type": 2})
    assert (controllers["endpoint_type"], [b["broker_id"] for b in controllers["brokers"]]) == (
        2, [1])
    bad = wire.call(ApiKey.DESCRIBE_CLUSTER, 1, {
        "include_cluster_authorized_operations": False, "endpoint_type": 3})
    assert bad["error_code"] == ErrorCode.unsupported_endpoint_type

    fenced = RegisterBrokerRecord(5, uuid.uuid4(),
                                  [BrokerEndpoint("PLAINTEXT", "10.0.0.5", 9092)], None, True)
    node.call(node.broker.controller.commit, [fenced])
    try:
        def brokers(include_fenced: bool) -> list[tuple[int, bool]]:
            result = wire.call(ApiKey.DESCRIBE_CLUSTER, 2, {
                "include_cluster_authorized_operations": False, "endpoint_type": 1,
                "include_fenced_brokers": include_fenced})
            return [(b["broker_id"], b["is_fenced"]) for b in result["brokers"]]

        assert brokers(False) == [(1, False)]
        assert brokers(True) == [(1, False), (5, True)]
    finally:
        from moldau.broker.metadata.records import UnregisterBrokerRecord

        node.call(node.broker.controller.commit, [UnregisterBrokerRecord(5)])
