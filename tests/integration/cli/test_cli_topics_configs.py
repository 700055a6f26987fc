"""``moldau topics`` and ``moldau configs`` against a broker subprocess, checked against
kafka-topics.sh / kafka-configs.sh output formats and against confluent-kafka's view."""

from __future__ import annotations

import base64
import re

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, ConfigResource

from .conftest import moldau, moldau_many, unique

TOPIC_ID = r"[A-Za-z0-9_-]{22}"


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def test_topic_lifecycle(bootstrap: str) -> None:
    b = ["-b", bootstrap]
    topic, other = unique("cli.topic"), unique("cliother")
    created = moldau("topics", *b, "--create", "--topic", topic, "--partitions", "3",
                     "--replication-factor", "1", "--config", "retention.ms=60000",
                     "--config", "cleanup.policy=compact").ok()
    assert created.stdout.splitlines() == [
        "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore "
        "('_') could collide. To avoid issues it is best to use either, but not both.",
        f"Created topic {topic}.",
    ]
    moldau("topics", *b, "--create", "--topic", other).ok()

    listing, internal_free, described = moldau_many(
        ["topics", *b, "--list"],
        ["topics", *b, "--list", "--exclude-internal"],
        ["topics", *b, "--describe", "--topic", topic],
    )
    names = listing.ok().stdout.splitlines()
    assert names == sorted(names) and {topic, other, "__consumer_offsets"} <= set(names)
    assert "__consumer_offsets" not in internal_free.ok().stdout.splitlines()
    assert {topic, other} <= set(internal_free.stdout.splitlines())

    # kafka-topics.sh --describe, byte for byte (the topic id checked against confluent-kafka)
    lines = described.ok().stdout.splitlines()
    head = re.fullmatch(
        rf"Topic: {re.escape(topic)}\tTopicId: ({TOPIC_ID})\tPartitionCount: 3\t"
        r"ReplicationFactor: 1\tConfigs: cleanup.policy=compact,retention.ms=60000", lines[0])
    assert head, lines[0]
    assert lines[1:] == [
        f"\tTopic: {topic}\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1" for p in range(3)]
    admin = _admin(bootstrap)  # keep the handle alive until the future resolves
    desc = admin.describe_topics(TopicCollection([topic]))[topic].result(20)
    # Kafka prints ids URL-safe (Java's Uuid.toString); librdkafka's str() uses plain base64.
    assert base64.urlsafe_b64decode(head.group(1) + "==") == base64.b64decode(
        str(desc.topic_id) + "==")
    assert len(desc.partitions) == 3

    # --describe with a regex over several topics; --topics-with-overrides
    both, overrides = moldau_many(
        ["topics", *b, "--describe", "--topic", f"{re.escape(topic)}|{other}"],
        ["topics", *b, "--describe", "--topic", f"{re.escape(topic)}|{other}",
         "--topics-with-overrides"],
    )
    heads = [line for line in both.ok().stdout.splitlines() if line.startswith("Topic:")]
    assert [h.split("\t")[0] for h in heads] == sorted([f"Topic: {topic}", f"Topic: {other}"])
    assert [h.split("\t")[0] for h in overrides.ok().stdout.splitlines()] == [f"Topic: {topic}"]

    # alter: grow; shrinking is refused with the broker's reason
    moldau("topics", *b, "--alter", "--topic", topic, "--partitions", "5").ok()
    shrink, after = moldau_many(
        ["topics", *b, "--alter", "--topic", topic, "--partitions", "2"],
        ["topics", *b, "--describe", "--topic", topic],
    )
    assert shrink.failed().stderr.startswith("Error while executing topic command : ")
    assert "5" in shrink.stderr and "2" in shrink.stderr
    assert "\tPartitionCount: 5\t" in after.ok().stdout
    assert len(after.stdout.splitlines()) == 6

    # delete; again fails as kafka-topics does unless --if-exists
    moldau("topics", *b, "--delete", "--topic", topic).ok()
    again, quiet, gone = moldau_many(
        ["topics", *b, "--delete", "--topic", topic],
        ["topics", *b, "--delete", "--topic", topic, "--if-exists"],
        ["topics", *b, "--list"],
    )
    assert again.failed().stderr.strip() == (
        f"Error while executing topic command : Topic '{topic}' does not exist as expected")
    assert quiet.ok().stdout == ""
    assert topic not in gone.ok().stdout.splitlines()
    assert topic not in _admin(bootstrap).list_topics(timeout=10).topics


def test_topic_errors(bootstrap: str) -> None:
    b = ["-b", bootstrap]
    topic = unique("dup")
    moldau("topics", *b, "--create", "--topic", topic).ok()
    exists, if_not, bad_config, bad_rf, no_action, bad_partitions, missing = moldau_many(
        ["topics", *b, "--create", "--topic", topic],
        ["topics", *b, "--create", "--topic", topic, "--if-not-exists"],
        ["topics", *b, "--create", "--topic", unique("badcfg"), "--config", "retention.ms=abc"],
        ["topics", *b, "--create", "--topic", unique("badrf"), "--replication-factor", "3"],
        ["topics", *b, "--topic", topic],
        ["topics", *b, "--create", "--topic", unique("zero"), "--partitions", "0"],
        ["topics", *b, "--describe", "--topic", "no-such-topic"],
    )
    assert exists.failed().stderr.strip() == (
        f"Error while executing topic command : Topic '{topic}' already exists.")
    assert if_not.ok().stdout == ""
    assert "retention.ms" in bad_config.failed().stderr and "abc" in bad_config.stderr
    assert "Replication factor" in bad_rf.failed().stderr or "replication" in bad_rf.stderr
    assert "exactly one action" in no_action.failed(2).stderr
    assert "The partitions must be greater than 0" in bad_partitions.failed().stderr
    assert "Topic 'no-such-topic' does not exist as expected" in missing.failed().stderr


def test_configs_describe_and_alter(bootstrap: str) -> None:
    b = ["-b", bootstrap]
    topic = unique("cfg")
    moldau("topics", *b, "--create", "--topic", topic, "--config", "retention.ms=5000").ok()
    described = moldau("configs", *b, "--entity-type", "topics", "--entity-name", topic,
                       "--describe").ok()
    assert described.stdout.splitlines() == [
        f"Dynamic configs for topic {topic} are:",
        "  retention.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000, "
        "DEFAULT_CONFIG:log.retention.hours=168}",
    ]
    altered = moldau("configs", *b, "--topic", topic, "--alter", "--add-config",
                     "cleanup.policy=[compact,delete],max.message.bytes=2048",
                     "--delete-config", "retention.ms").ok()
    assert altered.stdout.strip() == f"Completed updating config for topic {topic}."
    after, everything, bad_delete, bad_value, bad_syntax = moldau_many(
        ["configs", *b, "--topic", topic, "--describe"],
        ["configs", *b, "--topic", topic, "--describe", "--all"],
        ["configs", *b, "--topic", topic, "--alter", "--delete-config", "segment.ms"],
        ["configs", *b, "--topic", topic, "--alter", "--add-config", "retention.ms=soon"],
        ["configs", *b, "--topic", topic, "--alter", "--add-config", "retention.ms"],
    )
    assert [line.split(" ")[2] for line in after.ok().stdout.splitlines()[1:]] == [
        "cleanup.policy=compact,delete", "max.message.bytes=2048"]
    every = everything.ok().stdout.splitlines()
    assert every[0] == f"All configs for topic {topic} are:"
    assert any(line.startswith("  segment.bytes=") for line in every)
    assert bad_delete.failed().stderr.strip().endswith("Invalid config(s): segment.ms")
    assert "retention.ms" in bad_value.failed().stderr
    assert 'must be in the format "key=val"' in bad_syntax.failed(2).stderr

    # A real client sees what the tool set.
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = _admin(bootstrap)
    configs = admin.describe_configs([resource])[resource].result(20)
    assert configs["cleanup.policy"].value == "compact,delete"
    assert configs["max.message.bytes"].value == "2048"
    assert configs["retention.ms"].is_default


def test_configs_brokers(bootstrap: str) -> None:
    b = ["-b", bootstrap]
    one, defaults, every = moldau_many(
        ["configs", *b, "--entity-type", "brokers", "--entity-name", "1", "--describe", "--all"],
        ["configs", *b, "--entity-type", "brokers", "--entity-default", "--describe"],
        ["configs", *b, "--entity-type", "brokers", "--describe"],
    )
    lines = one.ok().stdout.splitlines()
    assert lines[0] == "All configs for broker 1 are:"
    assert any(line.startswith("  node.id=1 sensitive=false synonyms={STATIC_BROKER_CONFIG:"
                               "node.id=1") for line in lines)
    assert defaults.ok().stdout.splitlines()[0] == (
        "Default configs for brokers in the cluster are:")
    assert every.ok().stdout.splitlines() == [
        "Dynamic configs for broker 1 are:", "Default configs for brokers in the cluster are:"]
    bad = moldau("configs", *b, "--entity-type", "brokers", "--entity-name", "x", "--describe")
    assert "must be a valid integer broker id" in bad.failed(2).stderr
