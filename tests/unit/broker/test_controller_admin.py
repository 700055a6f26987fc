"""The controller's admin operations and the pure validators behind them."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest

from moldau.broker.config.definitions import BROKER_BY_NAME, TOPIC_BY_NAME
from moldau.broker.metadata.configs import validate_broker_changes
from moldau.broker.metadata.controller import (
    MAX_PARTITIONS_PER_REQUEST,
    Controller,
    TopicSpec,
)
from moldau.broker.metadata.image import MetadataImage
from moldau.broker.metadata.records import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    BrokerEndpoint,
    ConfigRecord,
    MetadataRecord,
)
from moldau.broker.metadata.validation import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    apply_incremental,
    validate_broker_resource_name,
    validate_manual_assignment,
)
from moldau.protocol.errors import ErrorCode
from moldau.testing.metadata_store import ListStore

from .sync_controller import SyncController


@pytest.fixture
def controller() -> SyncController:
    c = SyncController(Controller(MetadataImage(), ListStore(), default_partitions=lambda: 3,
                                  default_replication_factor=lambda: 1))
    for broker_id in (1, 2):
        c.register_broker(broker_id, [BrokerEndpoint("PLAINTEXT", "h", 9000 + broker_id)], None)
    return c


def replay_all(controller: SyncController) -> MetadataImage:
    store = controller.store
    assert isinstance(store, ListStore)
    return MetadataImage.from_records(store.records)


# --- create -------------------------------------------------------------------------------------
def test_create_with_defaults_and_configs(controller: SyncController) -> None:
    [result] = controller.create_topics([TopicSpec("a", configs={"retention.ms": "10"})])
    assert (result.error, result.num_partitions, result.replication_factor) == (
        ErrorCode.none, 3, 1)
    image = controller.image
    assert sorted(image.topics_by_name["a"].partitions) == [0, 1, 2]
    assert image.topic_configs["a"] == {"retention.ms": "10"}
    assert image.topics_by_name["a"].topic_id == result.topic_id
    # the log replays to the same state
    assert replay_all(controller).topic_configs == image.topic_configs


def test_create_errors(controller: SyncController) -> None:
    controller.create_topics([TopicSpec("a.b")])
    results = controller.create_topics([
        TopicSpec("a.b"), TopicSpec("a_b"), TopicSpec("bad/name"), TopicSpec("z", 0),
        TopicSpec("y", 1, 3), TopicSpec("x", 1, 0), TopicSpec("w", configs={"nope": "1"}),
        TopicSpec("v", configs={"segment.bytes": "ten"}),
        TopicSpec("u", configs={"segment.bytes": None}),  # type: ignore[dict-item]
    ])
    codes = [r.error for r in results]
    assert codes == [ErrorCode.topic_already_exists, ErrorCode.invalid_topic_exception,
                     ErrorCode.invalid_topic_exception, ErrorCode.invalid_partitions,
                     ErrorCode.invalid_replication_factor,
                     ErrorCode.invalid_replication_factor, ErrorCode.invalid_config,
                     ErrorCode.invalid_config, ErrorCode.invalid_config]
    assert "segment.bytes" in (results[7].message or "")
    assert "'ten'" in (results[7].message or "")
    assert "3" in (results[4].message or "") and "2" in (results[4].message or "")
    assert set(controller.image.topics_by_name) == {"a.b"}


def test_create_manual_assignment(controller: SyncController) -> None:
    [ok] = controller.create_topics([TopicSpec("m", assignments={0: [2, 1], 1: [1, 2]})])
    assert (ok.error, ok.num_partitions, ok.replication_factor) == (ErrorCode.none, 2, 2)
    partitions = controller.image.topics_by_name["m"].partitions
    assert partitions[0].replicas == [2, 1] and partitions[0].leader == 2
    [both] = controller.create_topics([TopicSpec("n", 2, -1, assignments={0: [1]})])
    assert both.error == ErrorCode.invalid_request


@pytest.mark.parametrize("assignments", [
    {0: [1], 2: [2]},  # gap
    {0: [1, 1]},  # duplicate broker
    {0: [7]},  # unknown broker
    {0: [1], 1: [1, 2]},  # inconsistent factor
    {0: []},
])
def test_bad_manual_assignments(assignments: dict[int, list[int]]) -> None:
    problem = validate_manual_assignment(assignments, [1, 2])
    assert problem is not None and problem[0] == ErrorCode.invalid_replica_assignment


def test_validate_only_creates_nothing(controller: SyncController) -> None:
    [result] = controller.create_topics([TopicSpec("v", 2)], validate_only=True)
    assert result.error == ErrorCode.none and result.num_partitions == 2
    assert "v" not in controller.image.topics_by_name


def test_partition_limit_per_request(controller: SyncController) -> None:
    [huge, fine] = controller.create_topics(
        [TopicSpec("huge", MAX_PARTITIONS_PER_REQUEST + 1), TopicSpec("fine", 1)])
    assert huge.error == ErrorCode.policy_violation
    assert fine.error == ErrorCode.none


def test_same_name_twice_in_one_request(controller: SyncController) -> None:
    first, second = controller.create_topics([TopicSpec("d"), TopicSpec("d")])
    assert first.error == ErrorCode.none
    assert second.error == ErrorCode.topic_already_exists


# --- delete and partitions ---------------------------------------------------------------------
def test_delete_removes_topic_and_its_configs(controller: SyncController) -> None:
    controller.create_topics([TopicSpec("a", configs={"retention.ms": "10"})])
    result = controller.delete_topics(["a", "b"])
    assert result["a"] == (ErrorCode.none, None)
    assert result["b"][0] == ErrorCode.unknown_topic_or_partition
    assert "a" not in controller.image.topics_by_name
    assert "a" not in controller.image.topic_configs


def test_create_partitions(controller: SyncController) -> None:
    controller.create_topics([TopicSpec("p", 2, 2)])
    assert controller.create_partitions("p", 2, None)[0] == ErrorCode.invalid_partitions
    assert controller.create_partitions("p", 1, None)[0] == ErrorCode.invalid_partitions
    assert controller.create_partitions("q", 5, None)[0] == ErrorCode.unknown_topic_or_partition
    assert controller.create_partitions("p", 4, [[1, 2]])[0] == (
        ErrorCode.invalid_replica_assignment)
    assert controller.create_partitions("p", 3, [[1]])[0] == ErrorCode.invalid_replica_assignment
    assert controller.create_partitions("p", 3, [[1, 3]])[0] == (
        ErrorCode.invalid_replica_assignment)
    assert controller.create_partitions("p", 4, None, validate_only=True) == (
        ErrorCode.none, None)
    assert len(controller.image.topics_by_name["p"].partitions) == 2
    assert controller.create_partitions("p", 4, [[2, 1], [1, 2]]) == (ErrorCode.none, None)
    partitions = controller.image.topics_by_name["p"].partitions
    assert sorted(partitions) == [0, 1, 2, 3]
    assert partitions[2].replicas == [2, 1]


# --- configs -----------------------------------------------------------------------------------
def test_alter_topic_configs_replace_and_incremental(controller: SyncController) -> None:
    controller.create_topics([TopicSpec("c", configs={"retention.ms": "1", "segment.ms": "2"})])
    assert controller.alter_configs(TOPIC_RESOURCE, "c", {"retention.ms": "5"},
                                    replace=True) == (ErrorCode.none, None)
    assert controller.image.topic_configs["c"] == {"retention.ms": "5"}
    assert controller.incremental_alter_configs(
        TOPIC_RESOURCE, "c", [("cleanup.policy", OP_APPEND, "compact"),
                              ("retention.ms", OP_DELETE, None)]) == (ErrorCode.none, None)
    assert controller.image.topic_configs["c"] == {"cleanup.policy": "delete,compact"}
    code, message = controller.incremental_alter_configs(
        TOPIC_RESOURCE, "c", [("retention.ms", OP_APPEND, "1")])
    assert code == ErrorCode.invalid_config and "LIST" in (message or "")
    code, message = controller.alter_configs(TOPIC_RESOURCE, "c", {"retention.ms": "x"})
    assert code == ErrorCode.invalid_config and "retention.ms" in (message or "")
    assert controller.alter_configs(TOPIC_RESOURCE, "nope", {})[0] == (
        ErrorCode.unknown_topic_or_partition)
    assert controller.alter_configs(TOPIC_RESOURCE, "c", {"retention.ms": "7"},
                                    validate_only=True) == (ErrorCode.none, None)
    assert controller.image.topic_configs["c"] == {"cleanup.policy": "delete,compact"}


def test_alter_broker_configs(controller: SyncController) -> None:
    assert controller.alter_configs(BROKER_RESOURCE, "", {"log.retention.ms": "100"}) == (
        ErrorCode.none, None)
    assert controller.image.broker_configs[""] == {"log.retention.ms": "100"}
    code, message = controller.alter_configs(BROKER_RESOURCE, "1", {"log.dirs": "/x"})
    assert code == ErrorCode.invalid_request
    assert "Cannot update these configs dynamically: log.dirs" in (message or "")
    assert controller.alter_configs(BROKER_RESOURCE, "9", {})[0] == (
        ErrorCode.broker_id_not_registered)
    assert controller.alter_configs(BROKER_RESOURCE, "x", {})[0] == ErrorCode.invalid_request
    # unchanged broker values are still written, so listeners re-apply them (KAFKA-14136)
    seen: list[Sequence[MetadataRecord]] = []
    controller.listeners.append(lambda image, records: seen.append(records))
    controller.alter_configs(BROKER_RESOURCE, "", {"log.retention.ms": "100"})
    assert seen == [[ConfigRecord(BROKER_RESOURCE, "", "log.retention.ms", "100")]]


def test_validate_broker_changes() -> None:
    assert validate_broker_changes("1", {"log.segment.bytes": "x"})[0] == (  # type: ignore[index]
        ErrorCode.invalid_request)
    assert validate_broker_changes("1", {"made.up": "1"})[0] == (  # type: ignore[index]
        ErrorCode.invalid_request)
    assert validate_broker_changes("1", {"log.segment.bytes": None}) is None
    assert validate_broker_resource_name("", []) is None
    assert validate_broker_resource_name("1", [1]) is None


def test_apply_incremental() -> None:
    result = apply_incremental({"cleanup.policy": "compact"},
                               [("cleanup.policy", OP_SUBTRACT, "compact"),
                                ("retention.ms", OP_SET, "1")], TOPIC_BY_NAME)
    assert result == {"cleanup.policy": "", "retention.ms": "1"}
    assert apply_incremental({}, [("cleanup.policy", OP_APPEND, "delete")],
                             TOPIC_BY_NAME) == {"cleanup.policy": "delete"}
    bad_op = apply_incremental({}, [("retention.ms", 9, "1")], TOPIC_BY_NAME)
    assert isinstance(bad_op, tuple) and bad_op[0] == ErrorCode.invalid_request
    twice = apply_incremental({}, [("a", OP_SET, "1"), ("a", OP_SET, "2")], TOPIC_BY_NAME)
    assert isinstance(twice, tuple) and twice[0] == ErrorCode.invalid_request
    null_set = apply_incremental({}, [("retention.ms", OP_SET, None)], TOPIC_BY_NAME)
    assert isinstance(null_set, tuple)
    listed = apply_incremental({}, [("process.roles", OP_APPEND, "broker")], BROKER_BY_NAME)
    assert listed == {"process.roles": "broker,controller"}


def test_topic_ids_are_random(controller: SyncController) -> None:
    a, b = controller.create_topics([TopicSpec("i1"), TopicSpec("i2")])
    assert a.topic_id != b.topic_id and uuid.UUID(int=0) not in (a.topic_id, b.topic_id)
