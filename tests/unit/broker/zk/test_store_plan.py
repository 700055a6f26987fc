"""The controller's records as one multi-op in Kafka's layout (plan_ops, pure): what each
kind of change writes, conditional versions, and what the store refuses."""

from __future__ import annotations

import uuid

import pytest

from moldau.broker.metadata.image import MetadataImage
from moldau.broker.metadata.records import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    ConfigRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from moldau.broker.zk import layout
from moldau.broker.zk.admin_layout import EntityConfig, ProducerIdBlock
from moldau.broker.zk.layout import PartitionState, TopicAssignment
from moldau.broker.zk.store import Facts, Op, optional_paths, plan_ops
from moldau.protocol.errors import ErrorCode, KafkaError

T = uuid.UUID("11111111-2222-3333-4444-555555555555")


def _created() -> tuple[MetadataImage, list]:
    records = [TopicRecord("t", T), ConfigRecord(TOPIC_RESOURCE, "t", "retention.ms", "5"),
               PartitionRecord(T, 0, [1, 2], [1, 2], 1), PartitionRecord(T, 1, [2, 1], [2, 1], 2)]
    return MetadataImage(), records


def test_a_new_topic_is_its_config_assignment_and_states() -> None:
    image, records = _created()
    assert optional_paths(image, records) == [layout.topic_config_path("t")]
    ops = plan_ops(image, records, 7, Facts())
    assert [(op.kind, op.path) for op in ops] == [
        ("create", "/config/topics/t"),
        ("create", "/brokers/topics/t"),
        ("create", "/brokers/topics/t/partitions"),
        ("create", "/brokers/topics/t/partitions/0"),
        ("create", "/brokers/topics/t/partitions/0/state"),
        ("create", "/brokers/topics/t/partitions/1"),
        ("create", "/brokers/topics/t/partitions/1/state"),
    ]
    assert EntityConfig.from_json(ops[0].data).config == {"retention.ms": "5"}
    assert TopicAssignment.from_json(ops[1].data, "t") == TopicAssignment.of(
        {0: [1, 2], 1: [2, 1]}, T)
    assert PartitionState.from_json(ops[6].data, "t", 1) == PartitionState(2, 0, (2, 1), 7)
    # a config znode left behind by an earlier topic of that name is overwritten
    ops = plan_ops(image, records, 7, Facts(existing={"/config/topics/t"}))
    assert ops[0].kind == "set"


def test_changes_of_an_existing_topic() -> None:
    image, records = _created()
    for record in records:
        image.replay(record)
    records = [PartitionChangeRecord(T, 0, leader=2, isr=[2]),
               PartitionChangeRecord(T, 0, isr=[2, 1]),
               PartitionRecord(T, 2, [1, 2], [1, 2], 1),
               ConfigRecord(TOPIC_RESOURCE, "t", "retention.ms", None)]
    ops = plan_ops(image, records, 8, Facts(existing={"/config/topics/t"}))
    assert [(op.kind, op.path, op.version) for op in ops[:5]] == [
        ("set", "/brokers/topics/t", -1),
        # one conditional set per change: the znode version follows the partition epoch
        ("set", "/brokers/topics/t/partitions/0/state", 0),
        ("set", "/brokers/topics/t/partitions/0/state", 1),
        ("create", "/brokers/topics/t/partitions/2", -1),
        ("create", "/brokers/topics/t/partitions/2/state", -1),
    ]
    assert PartitionState.from_json(ops[2].data, "t", 0) == PartitionState(2, 1, (2, 1), 8)
    assert ops[5] == Op("set", "/config/topics/t", EntityConfig({}).to_json())
    assert ops[6].kind == "create" and ops[6].sequence
    assert ops[6].path == "/config/changes/config_change_"
    assert ops[6].data == b'{"version":2,"entity_path":"topics/t"}'


def test_removal_deletes_the_subtree_config_and_request() -> None:
    image, records = _created()
    for record in records:
        image.replay(record)
    tree = ["/brokers/topics/t/partitions/0/state", "/brokers/topics/t/partitions/0",
            "/brokers/topics/t/partitions", "/brokers/topics/t"]
    facts = Facts(existing={"/config/topics/t", "/admin/delete_topics/t"},
                  topic_trees={"t": tree})
    ops = plan_ops(image, [RemoveTopicRecord(T)], 1, facts)
    assert [(op.kind, op.path) for op in ops] == [("delete", p) for p in tree] + [
        ("delete", "/config/topics/t"), ("delete", "/admin/delete_topics/t")]


def test_broker_configs_and_producer_ids() -> None:
    image = MetadataImage(next_producer_id=1000)
    ops = plan_ops(image, [ConfigRecord(BROKER_RESOURCE, "", "log.retention.ms", "1"),
                           ConfigRecord(BROKER_RESOURCE, "3", "log.cleaner.threads", "2"),
                           ProducerIdsRecord(3, 2000)], 1,
                   Facts(producer_block=ProducerIdBlock(1, 0, 999), producer_block_version=4))
    assert [(op.kind, op.path) for op in ops] == [
        ("create", "/config/brokers/<default>"), ("create", "/config/changes/config_change_"),
        ("create", "/config/brokers/3"), ("create", "/config/changes/config_change_"),
        ("set", layout.LATEST_PRODUCER_ID_BLOCK)]
    assert ops[1].data == b'{"version":2,"entity_path":"brokers/<default>"}'
    assert ops[4].version == 4
    assert ProducerIdBlock.from_json(ops[4].data) == ProducerIdBlock(3, 1000, 1999)
    # an image behind ZooKeeper's block is refused rather than handing out ids twice
    with pytest.raises(KafkaError, match="hands out ids from 2000"):
        plan_ops(image, [ProducerIdsRecord(3, 2000)], 1,
                 Facts(producer_block=ProducerIdBlock(1, 1000, 1999)))


def test_records_brokers_write_themselves_are_refused() -> None:
    with pytest.raises(KafkaError) as info:
        plan_ops(MetadataImage(), [RegisterBrokerRecord(1, uuid.uuid4())], 1, Facts())
    assert info.value.code == ErrorCode.invalid_request
    assert "/brokers/ids" in info.value.message


def test_a_new_partition_changed_in_the_same_batch_keeps_version_equal_to_epoch() -> None:
    image, records = _created()
    ops = plan_ops(image, [*records, PartitionChangeRecord(T, 1, leader=1)], 7, Facts())
    state = [op for op in ops if op.path == "/brokers/topics/t/partitions/1/state"]
    assert [(op.kind, op.version) for op in state] == [("create", -1), ("set", 0)]
    assert PartitionState.from_json(state[-1].data, "t", 1).leader_epoch == 1
