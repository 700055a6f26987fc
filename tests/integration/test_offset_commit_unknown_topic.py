"""OffsetCommit for a topic or partition the cluster does not have answers
UNKNOWN_TOPIC_OR_PARTITION for those partitions (issue 11, defect 12), as Kafka's
``KafkaApis.handleOffsetCommitRequest`` does, and stores nothing for them; the request's other
partitions are committed as usual. Raw requests at every version served, then confluent-kafka
and kafka-python.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import kafka
import pytest
from broker_wire import Wire, create_topic
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka.structs import OffsetAndMetadata

from moldau.protocol.api_keys import ApiKey as K
from moldau.protocol.errors import ErrorCode as E
from moldau.testing.runner import InProcessBroker

TOPIC = "commit-known"  # two partitions


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker(settings={"offsets.topic.num.partitions": 3}) as b:
        with Wire(b.broker.bound_port()) as wire:
            create_topic(wire, TOPIC, partitions=2)
            wait_for_coordinators(wire)
        yield b


def wait_for_coordinators(wire: Wire) -> None:
    """FindCoordinator creates ``__consumer_offsets``; wait until its shards are loaded."""
    deadline = time.monotonic() + 60
    while True:
        wire.call(K.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["warm-up"]})
        answer = commit(wire, 8, "warm-up", {TOPIC: [0]})
        groups = {f"warm-{i}": {TOPIC: [0]} for i in range(30)}  # spread over every shard
        answers = [commit(wire, 8, g, t) for g, t in groups.items()]
        if all(a == {TOPIC: [(0, E.none)]} for a in [answer, *answers]):
            return
        assert time.monotonic() < deadline, answers
        time.sleep(0.1)


@pytest.fixture
def wire(broker: InProcessBroker) -> Iterator[Wire]:
    with Wire(broker.broker.bound_port()) as w:
        yield w


def commit(wire: Wire, version: int, group: str, topics: dict[str, list[int]],
           generation: int = -1, member: str = "") -> dict[str, list[tuple[int, int]]]:
    body: dict[str, Any] = {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
        "group_instance_id": None,
        "topics": [{"name": name, "partitions": [
            {"partition_index": p, "committed_offset": 100 + p, "committed_leader_epoch": -1,
             "committed_metadata": ""} for p in partitions]}
            for name, partitions in topics.items()]}
    if version <= 4:
        body["retention_time"] = -1
    got = wire.call(K.OFFSET_COMMIT, version, body)
    return {t["name"]: [(p["partition_index"], p["error_code"]) for p in t["partitions"]]
            for t in got["topics"]}


def committed(wire: Wire, group: str, topics: dict[str, list[int]]) -> dict[tuple[str, int], int]:
    got = wire.call(K.OFFSET_FETCH, 8, {
        "groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                    "topics": [{"name": n, "partition_indexes": ps} for n, ps in topics.items()]}],
        "require_stable": False})
    return {(t["name"], p["partition_index"]): p["committed_offset"]
            for t in got["groups"][0]["topics"] for p in t["partitions"]}


def group_state(wire: Wire, group: str) -> str:
    got = wire.call(K.DESCRIBE_GROUPS, 5, {"groups": [group],
                                           "include_authorized_operations": False})
    return str(got["groups"][0]["group_state"])


@pytest.mark.parametrize("version", range(2, 10))
def test_unknown_topics_and_partitions_are_refused_at_every_version(wire: Wire,
                                                                     version: int) -> None:
    group = f"unknown-topic-v{version}"
    request = {TOPIC: [0, 2, 1], "no-such-topic": [0, 3]}
    assert commit(wire, version, group, request) == {
        TOPIC: [(0, E.none), (2, E.unknown_topic_or_partition), (1, E.none)],
        "no-such-topic": [(0, E.unknown_topic_or_partition), (3, E.unknown_topic_or_partition)],
    }
    assert committed(wire, group, request) == {
        (TOPIC, 0): 100, (TOPIC, 2): -1, (TOPIC, 1): 101,
        ("no-such-topic", 0): -1, ("no-such-topic", 3): -1}


def test_a_commit_of_unknown_topics_only_leaves_the_group_alone(wire: Wire) -> None:
    answer = commit(wire, 8, "only-unknown", {"gone": [0], TOPIC: [9]})
    assert answer == {"gone": [(0, E.unknown_topic_or_partition)],
                      TOPIC: [(9, E.unknown_topic_or_partition)]}
    assert group_state(wire, "only-unknown") == "Dead"  # no simple group was created


def test_group_errors_apply_to_known_partitions_only(wire: Wire) -> None:
    answer = commit(wire, 9, "never-joined", {TOPIC: [0], "gone": [0]}, generation=3,
                    member="m-1")
    assert answer == {TOPIC: [(0, E.group_id_not_found)],
                      "gone": [(0, E.unknown_topic_or_partition)]}


def test_confluent_kafka_sees_unknown_topic_or_partition(broker: InProcessBroker) -> None:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ck-commit",
                         "enable.auto.commit": False})
    try:
        with pytest.raises(KafkaException) as raised:
            consumer.commit(offsets=[TopicPartition("no-such-topic", 0, 5)], asynchronous=False)
        assert raised.value.args[0].code() == E.unknown_topic_or_partition
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    future = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "ck-alter", [TopicPartition("no-such-topic", 0, 3), TopicPartition(TOPIC, 1, 4)])])
    result = future["ck-alter"].result(30)
    errors = {(tp.topic, tp.partition): tp.error.code() if tp.error else E.none
              for tp in result.topic_partitions}
    assert errors == {("no-such-topic", 0): E.unknown_topic_or_partition,
                      (TOPIC, 1): E.none}


def test_kafka_python_sees_unknown_topic_or_partition(broker: InProcessBroker) -> None:
    consumer = kafka.KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="kp-commit",
                                   enable_auto_commit=False)
    try:
        results: list[Any] = []
        offsets = {kafka.TopicPartition("no-such-topic", 0): OffsetAndMetadata(5, "", -1),
                   kafka.TopicPartition(TOPIC, 0): OffsetAndMetadata(7, "", -1)}
        consumer.commit_async(offsets, callback=lambda _offsets, result: results.append(result))
        deadline = time.monotonic() + 30
        while not results and time.monotonic() < deadline:
            consumer.poll(100)
        assert results and isinstance(results[0], kafka.errors.UnknownTopicOrPartitionError), \
            results
        # The known partition of the same request was committed.
        assert consumer.committed(kafka.TopicPartition(TOPIC, 0)) == 7
    finally:
        consumer.close()
