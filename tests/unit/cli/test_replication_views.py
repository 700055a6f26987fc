"""The operator's view of replication without a broker: ``moldau topics --describe``'s
partition lines and filters (kafka-topics.sh's TopicCommand rules) and ``moldau log-dirs``'s
JSON document and broker checks (kafka-log-dirs.sh)."""

from __future__ import annotations

import argparse
import json

import pytest

from moldau.cli.common import CliError
from moldau.cli.log_dirs import brokers_to_query, log_dirs_json, parse_brokers
from moldau.cli.topics import describe_lines
from moldau.client import BrokerError, LogDirDescription, ReplicaLogInfo, TopicInfo
from moldau.client.admin_types import ConfigEntry
from moldau.client.types import PartitionInfo, TopicPartition

FILTERS = ("under_replicated_partitions", "unavailable_partitions",
           "under_min_isr_partitions", "at_min_isr_partitions")


def args(*on: str) -> argparse.Namespace:
    flags = {f: f in on for f in FILTERS}
    return argparse.Namespace(topics_with_overrides=False, **flags)


def topic() -> TopicInfo:
    parts = {
        0: PartitionInfo("t", 0, 1, replicas=(1, 2, 3), isr=(1, 2, 3)),
        1: PartitionInfo("t", 1, 3, replicas=(2, 3, 1), isr=(3, 1), offline_replicas=(2,)),
        2: PartitionInfo("t", 2, 3, replicas=(3, 1, 2), isr=(3,)),
        3: PartitionInfo("t", 3, -1, replicas=(2, 1, 3), isr=(2,)),
        4: PartitionInfo("t", 4, 2, replicas=(2, 1, 3), isr=(2, 1, 3)),
    }
    return TopicInfo("t", None, parts)


def min_isr(value: str) -> dict[str, ConfigEntry]:
    return {"min.insync.replicas": ConfigEntry("min.insync.replicas", value, 1, False, False,
                                               False)}


def shown(*on: str, configs: dict[str, ConfigEntry] | None = None,
          live: frozenset[int] = frozenset({1, 3})) -> list[int]:
    lines = describe_lines(topic(), configs if configs is not None else min_isr("2"),
                           args(*on), set(live))
    return [int(line.split("\tPartition: ")[1].split("\t")[0]) for line in lines
            if line.startswith("\t")]


def test_describe_shows_the_header_and_every_partition_with_replicas_and_isr() -> None:
    lines = describe_lines(topic(), min_isr("2"), args(), {1, 3})
    assert lines[0] == ("Topic: t\tPartitionCount: 5\tReplicationFactor: 3\t"
                        "Configs: min.insync.replicas=2")
    assert lines[1] == "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3"
    assert lines[2] == ("\tTopic: t\tPartition: 1\tLeader: 3\tReplicas: 2,3,1\tIsr: 3,1"
                        "\tOffline: 2")
    assert lines[4] == "\tTopic: t\tPartition: 3\tLeader: none\tReplicas: 2,1,3\tIsr: 2"


def test_filters_follow_topic_command() -> None:
    # isr smaller than the replica set
    assert shown("under_replicated_partitions") == [1, 2, 3]
    # no leader, or a leader that is not alive (broker 2 is down here)
    assert shown("unavailable_partitions") == [3, 4]
    # no leader, or isr < min.insync.replicas
    assert shown("under_min_isr_partitions") == [2, 3]
    assert shown("at_min_isr_partitions") == [1]
    # several filters: a partition matching any of them (and no topic line)
    assert shown("at_min_isr_partitions", "unavailable_partitions") == [1, 3, 4]
    lines = describe_lines(topic(), min_isr("2"), args("unavailable_partitions"), {1, 3})
    assert all(line.startswith("\t") for line in lines)


def test_min_isr_default_is_one_when_the_topic_has_no_value() -> None:
    assert shown("under_min_isr_partitions", configs={}) == [3]
    assert shown("at_min_isr_partitions", configs={}) == [2, 3]


def test_log_dirs_json_is_kafka_log_dirs_format() -> None:
    described = {
        2: {"/data/b": LogDirDescription("/data/b", None, {
            TopicPartition("orders", 1): ReplicaLogInfo(10),
            TopicPartition("other", 0): ReplicaLogInfo(5)})},
        1: {"/data/a": LogDirDescription("/data/a", BrokerError(56, "", "x"), {
            TopicPartition("orders", 0): ReplicaLogInfo(42, 0, False)})},
    }
    text = log_dirs_json(described, set())
    assert text == (
        '{"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/data/a","error":'
        '"org.apache.kafka.common.errors.KafkaStorageException","partitions":[{"partition":'
        '"orders-0","size":42,"offsetLag":0,"isFuture":false}]}]},{"broker":2,"logDirs":[{'
        '"logDir":"/data/b","error":null,"partitions":[{"partition":"orders-1","size":10,'
        '"offsetLag":0,"isFuture":false},{"partition":"other-0","size":5,"offsetLag":0,'
        '"isFuture":false}]}]}]}')
    only = json.loads(log_dirs_json(described, {"other"}))
    assert [[p["partition"] for d in b["logDirs"] for p in d["partitions"]]
            for b in only["brokers"]] == [[], ["other-0"]]


def test_broker_list_checks() -> None:
    assert parse_brokers("") == set()
    assert parse_brokers("1,,3") == {1, 3}
    with pytest.raises(CliError, match="broker ids are integers"):
        parse_brokers("1,x")
    assert brokers_to_query(set(), {3, 1, 2}) == [1, 2, 3]
    assert brokers_to_query({2}, {1, 2, 3}) == [2]
    with pytest.raises(CliError) as caught:
        brokers_to_query({2, 5}, {1, 2, 3})
    assert str(caught.value) == ("ERROR: The given brokers do not exist from --broker-list: 5. "
                                 "Current existent brokers: 1,2,3")


def usage(**given: object) -> str | None:
    from moldau.cli.topics import check_args

    values: dict[str, object] = {
        "create": False, "list": False, "describe": True, "alter": False, "delete": False,
        "topic": None, "partitions": None, "replication_factor": None,
        "replica_assignment": None, "config": [], "if_not_exists": False, "if_exists": False,
        "exclude_internal": False, "topics_with_overrides": False,
        **{f: False for f in FILTERS}}
    values.update(given)
    return check_args(argparse.Namespace(**values))


def test_report_flags_combine_like_topic_command() -> None:
    assert usage(under_replicated_partitions=True, unavailable_partitions=True,
                 exclude_internal=True) is None
    assert usage(under_min_isr_partitions=True, topics_with_overrides=True) == (
        "Option \"[under-min-isr-partitions]\" can't be used with option "
        "\"[topics-with-overrides]\"")
    assert usage(describe=False, list=True, unavailable_partitions=True) == (
        "The partition report options can only be used with --describe")
    assert usage(describe=False, delete=True, topic="t", exclude_internal=True) == (
        "Option \"[exclude-internal]\" can't be used with option \"[delete]\"")
