"""Admin APIs through confluent-kafka's AdminClient (librdkafka) against a ``moldau serve``
subprocess: topics, partitions, configs (describe, alter, incremental), cluster."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from moldau.testing.runner import BrokerProcess

TIMEOUT = 20


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(settings={"log.retention.hours": 2, "num.partitions": 2}) as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 2})


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(admin: AdminClient, *topics: NewTopic, **kwargs: object) -> dict[str, object]:
    """Create topics; {name: None or the KafkaError}."""
    futures = admin.create_topics(list(topics), operation_timeout=TIMEOUT, **kwargs)
    return {topic: _outcome(future) for topic, future in futures.items()}


def _outcome(future) -> KafkaError | None:  # type: ignore[no-untyped-def]
    try:
        future.result(TIMEOUT)
    except KafkaException as exc:
        return exc.args[0]
    return None


def topic_configs(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    [future] = admin.describe_configs([ConfigResource("topic", topic)],
                                      request_timeout=TIMEOUT).values()
    return future.result(TIMEOUT)


def describe_topic(admin: AdminClient, topic: str):  # type: ignore[no-untyped-def]
    return admin.describe_topics(TopicCollection([topic]))[topic].result(TIMEOUT)


# --- CreateTopics -------------------------------------------------------------------------------
def test_create_topic_with_configs_and_describe(admin: AdminClient) -> None:
    topic = name("cfg")
    assert create(admin, NewTopic(topic, 3, 1, config={"retention.ms": "60000",
                                                       "cleanup.policy": "compact"})) == {
        topic: None}
    description = describe_topic(admin, topic)
    assert len(description.partitions) == 3
    assert all(p.leader.id == 1 and [r.id for r in p.replicas] == [1]
               for p in description.partitions)
    configs = topic_configs(admin, topic)
    assert configs["retention.ms"].value == "60000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["cleanup.policy"].value == "compact"
    assert configs["segment.bytes"].value == "1073741824"
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["segment.bytes"].is_default
    # the synonym chain: the topic's own value, then log.retention.hours (static, then
    # default; confluent-kafka keys synonyms by name, so only one of those two shows)
    synonyms = configs["retention.ms"].synonyms
    assert list(synonyms) == ["retention.ms", "log.retention.hours"]
    assert synonyms["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value


def test_static_broker_setting_is_the_topic_default(admin: AdminClient) -> None:
    topic = name("static")
    assert create(admin, NewTopic(topic)) == {topic: None}  # -1/-1: broker defaults
    assert len(describe_topic(admin, topic).partitions) == 2  # num.partitions=2
    retention = topic_configs(admin, topic)["retention.ms"]
    assert retention.value == str(2 * 3_600_000)
    assert retention.source == ConfigSource.STATIC_BROKER_CONFIG.value


def test_create_errors(admin: AdminClient) -> None:
    existing = name("dup")
    assert create(admin, NewTopic(existing, 1, 1)) == {existing: None}
    results = create(
        admin,
        NewTopic(existing, 1, 1),
        NewTopic("bad name!", 1, 1),
        NewTopic(name("badcfg"), 1, 1, config={"retention.ms": "soon"}),
        NewTopic(name("unknowncfg"), 1, 1, config={"no.such.config": "1"}),
        NewTopic(name("rf"), 1, 3),
        NewTopic("__consumer_offsets", 1, 1),
    )
    codes = {topic: error.code() for topic, error in results.items()}  # type: ignore[union-attr]
    assert codes[existing] == KafkaError.TOPIC_ALREADY_EXISTS
    assert codes["bad name!"] == KafkaError.TOPIC_EXCEPTION
    assert codes["__consumer_offsets"] == KafkaError.INVALID_REQUEST
    by_prefix = {t.split("-")[0]: e for t, e in results.items()}
    assert by_prefix["badcfg"].code() == KafkaError.INVALID_CONFIG  # type: ignore[union-attr]
    message = by_prefix["badcfg"].str()  # type: ignore[union-attr]
    assert "retention.ms" in message and "soon" in message
    assert by_prefix["unknowncfg"].code() == KafkaError.INVALID_CONFIG  # type: ignore[union-attr]
    assert "no.such.config" in by_prefix["unknowncfg"].str()  # type: ignore[union-attr]
    assert by_prefix["rf"].code() == KafkaError.INVALID_REPLICATION_FACTOR  # type: ignore[union-attr]
    listed = admin.list_topics(timeout=TIMEOUT).topics
    assert not any(t.startswith(("badcfg", "unknowncfg", "rf-")) for t in listed)
    assert "__consumer_offsets" not in listed


def test_create_validate_only_and_manual_assignment(admin: AdminClient) -> None:
    dry = name("dry")
    assert create(admin, NewTopic(dry, 4, 1), validate_only=True) == {dry: None}
    assert dry not in admin.list_topics(timeout=TIMEOUT).topics
    manual = name("manual")
    assert create(admin, NewTopic(manual, 2, replica_assignment=[[1], [1]])) == {manual: None}
    assert len(describe_topic(admin, manual).partitions) == 2
    wrong = name("wrong")
    [error] = create(admin, NewTopic(wrong, 2, replica_assignment=[[1], [7]])).values()
    assert error.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT  # type: ignore[union-attr]


# --- CreatePartitions ---------------------------------------------------------------------------
def test_create_partitions(admin: AdminClient) -> None:
    topic = name("grow")
    create(admin, NewTopic(topic, 1, 1))
    [future] = admin.create_partitions([NewPartitions(topic, 3)], validate_only=True).values()
    assert future.result(TIMEOUT) is None
    assert len(describe_topic(admin, topic).partitions) == 1
    [future] = admin.create_partitions([NewPartitions(topic, 3)]).values()
    assert future.result(TIMEOUT) is None
    assert len(describe_topic(admin, topic).partitions) == 3
    [future] = admin.create_partitions([NewPartitions(topic, 2)]).values()
    error = _outcome(future)
    assert error is not None and error.code() == KafkaError.INVALID_PARTITIONS
    assert "3" in error.str()
    [future] = admin.create_partitions([NewPartitions(topic, 4, [[1]])]).values()
    assert future.result(TIMEOUT) is None
    [future] = admin.create_partitions([NewPartitions(name("none"), 4)]).values()
    error = _outcome(future)
    assert error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


# --- DeleteTopics -------------------------------------------------------------------------------
def test_delete_topics(admin: AdminClient) -> None:
    topic = name("gone")
    create(admin, NewTopic(topic, 1, 1, config={"retention.ms": "1000"}))
    futures = admin.delete_topics([topic, name("never")], operation_timeout=TIMEOUT)
    outcomes = {t: _outcome(f) for t, f in futures.items()}
    assert outcomes[topic] is None
    [missing] = [e for t, e in outcomes.items() if t != topic]
    assert missing is not None and missing.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert topic not in admin.list_topics(timeout=TIMEOUT).topics
    # recreating gets fresh configs: the old override went with the topic
    assert create(admin, NewTopic(topic, 1, 1)) == {topic: None}
    assert topic_configs(admin, topic)["retention.ms"].source != (
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value)


# --- configs ------------------------------------------------------------------------------------
def test_describe_broker_configs(admin: AdminClient) -> None:
    [future] = admin.describe_configs([ConfigResource("broker", "1")]).values()
    configs = future.result(TIMEOUT)
    hours = configs["log.retention.hours"]
    assert (hours.value, hours.source, hours.is_read_only) == (
        "2", ConfigSource.STATIC_BROKER_CONFIG.value, True)
    assert configs["log.retention.ms"].value is None
    assert not configs["log.segment.bytes"].is_read_only
    assert configs["auto.create.topics.enable"].value == "true"
    assert configs["node.id"].value == "1"


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_alter_configs_replaces_the_whole_set(admin: AdminClient) -> None:
    topic = name("replace")
    create(admin, NewTopic(topic, 1, 1, config={"retention.ms": "1000",
                                                "segment.ms": "2000"}))
    [future] = admin.alter_configs([ConfigResource("topic", topic,
                                                   set_config={"retention.ms": "5000"})]).values()
    assert future.result(TIMEOUT) is None
    configs = topic_configs(admin, topic)
    assert configs["retention.ms"].value == "5000"
    assert configs["segment.ms"].source == ConfigSource.DEFAULT_CONFIG.value  # dropped
    [future] = admin.alter_configs([ConfigResource("topic", topic, set_config={
        "max.message.bytes": "-5"})]).values()
    error = _outcome(future)
    assert error is not None and error.code() == KafkaError.INVALID_CONFIG
    assert "max.message.bytes" in error.str() and "-5" in error.str()
    assert topic_configs(admin, topic)["retention.ms"].value == "5000"  # all or nothing


def test_incremental_alter_configs(admin: AdminClient) -> None:
    topic = name("incr")
    create(admin, NewTopic(topic, 1, 1, config={"retention.ms": "1000"}))

    def alter(*entries: ConfigEntry, validate_only: bool = False) -> KafkaError | None:
        [future] = admin.incremental_alter_configs(
            [ConfigResource("topic", topic, incremental_configs=list(entries))],
            validate_only=validate_only).values()
        return _outcome(future)

    assert alter(ConfigEntry("segment.bytes", "1048576",
                             incremental_operation=AlterConfigOpType.SET),
                 ConfigEntry("cleanup.policy", "compact",
                             incremental_operation=AlterConfigOpType.APPEND),
                 ConfigEntry("retention.ms", None,
                             incremental_operation=AlterConfigOpType.DELETE)) is None
    configs = topic_configs(admin, topic)
    assert configs["segment.bytes"].value == "1048576"
    assert configs["cleanup.policy"].value == "delete,compact"
    assert configs["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert alter(ConfigEntry("cleanup.policy", "delete",
                             incremental_operation=AlterConfigOpType.SUBTRACT)) is None
    assert topic_configs(admin, topic)["cleanup.policy"].value == "compact"
    assert alter(ConfigEntry("segment.bytes", "2097152",
                             incremental_operation=AlterConfigOpType.SET),
                 validate_only=True) is None
    assert topic_configs(admin, topic)["segment.bytes"].value == "1048576"
    error = alter(ConfigEntry("retention.ms", "5",
                              incremental_operation=AlterConfigOpType.APPEND))
    assert error is not None and error.code() == KafkaError.INVALID_CONFIG


def test_dynamic_broker_config_reaches_topics(admin: AdminClient) -> None:
    # librdkafka cannot name the cluster-default resource (""); test_admin_protocol.py does
    topic = name("dyn")
    create(admin, NewTopic(topic, 1, 1))

    def alter_broker(value: str | None, op: AlterConfigOpType) -> None:
        resource = ConfigResource("broker", "1", incremental_configs=[
            ConfigEntry("log.retention.ms", value, incremental_operation=op)])
        [future] = admin.incremental_alter_configs([resource]).values()
        assert future.result(TIMEOUT) is None

    alter_broker("123456", AlterConfigOpType.SET)
    try:
        retention = topic_configs(admin, topic)["retention.ms"]
        assert retention.value == "123456"
        assert retention.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        [future] = admin.describe_configs([ConfigResource("broker", "1")]).values()
        described = future.result(TIMEOUT)["log.retention.ms"]
        assert (described.value, described.source) == (
            "123456", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    finally:
        alter_broker(None, AlterConfigOpType.DELETE)
    assert topic_configs(admin, topic)["retention.ms"].value == str(2 * 3_600_000)


def test_static_only_broker_config_is_refused(admin: AdminClient) -> None:
    resource = ConfigResource("broker", "1", incremental_configs=[
        ConfigEntry("log.dirs", "/elsewhere", incremental_operation=AlterConfigOpType.SET)])
    [future] = admin.incremental_alter_configs([resource]).values()
    error = _outcome(future)
    assert error is not None and error.code() == KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically: log.dirs" in error.str()


# --- DescribeCluster ---------------------------------------------------------------------------
def test_describe_cluster(admin: AdminClient, broker: BrokerProcess) -> None:
    result = admin.describe_cluster(include_authorized_operations=True).result(TIMEOUT)
    assert result.cluster_id == broker.cluster_id
    assert result.controller.id == 1
    assert [(n.id, n.host, n.port) for n in result.nodes] == [
        (1, "127.0.0.1", broker.port())]
    assert result.authorized_operations


def test_topic_deletion_can_be_disabled() -> None:
    with BrokerProcess(settings={"delete.topic.enable": "false"}) as locked:
        admin = AdminClient({"bootstrap.servers": locked.bootstrap, "log_level": 2})
        topic = name("kept")
        assert create(admin, NewTopic(topic, 1, 1)) == {topic: None}
        [future] = admin.delete_topics([topic], operation_timeout=TIMEOUT).values()
        error = _outcome(future)
        assert error is not None and error.code() == KafkaError.TOPIC_DELETION_DISABLED
        assert topic in admin.list_topics(timeout=TIMEOUT).topics
