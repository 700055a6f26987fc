"""A reassignment in progress in ZooKeeper: the controller writes Kafka's ``adding_replicas``
and ``removing_replicas`` into ``/brokers/topics/<t>`` (plan_ops), and every broker's sync
reads them back into its image (snapshot.diff), so a controller elected mid-move resumes it."""

from __future__ import annotations

import json
import uuid

from moldau.broker.metadata.image import MetadataImage
from moldau.broker.metadata.records import PartitionChangeRecord, PartitionRecord, TopicRecord
from moldau.broker.zk import layout
from moldau.broker.zk.layout import PartitionState, TopicAssignment
from moldau.broker.zk.snapshot import ClusterState, ZkPartition, diff
from moldau.broker.zk.store import Facts, plan_ops

T = uuid.UUID("11111111-2222-3333-4444-555555555555")


def _image() -> MetadataImage:
    image = MetadataImage()
    image.replay(TopicRecord("t", T))
    image.replay(PartitionRecord(T, 0, [1, 2, 3], [1, 2, 3], 1))
    return image


def test_the_assignment_znode_carries_the_move_as_kafka_writes_it() -> None:
    image = _image()
    start = PartitionChangeRecord(T, 0, replicas=[2, 3, 4, 1], adding_replicas=[4],
                                  removing_replicas=[1])
    ops = plan_ops(image, [start], 5, Facts())
    assert [(op.kind, op.path, op.version) for op in ops] == [
        ("set", layout.topic_path("t"), -1),
        ("set", layout.partition_state_path("t", 0), 0)]
    assert json.loads(ops[0].data) == {
        "partitions": {"0": [2, 3, 4, 1]}, "topic_id": layout.uuid_to_text(T),
        "adding_replicas": {"0": [4]}, "removing_replicas": {"0": [1]}, "version": 3}
    image.replay(start)
    done = PartitionChangeRecord(T, 0, leader=2, isr=[2, 3, 4], replicas=[2, 3, 4],
                                 adding_replicas=[], removing_replicas=[])
    ops = plan_ops(image, [done], 5, Facts())
    assert json.loads(ops[0].data)["adding_replicas"] == {}
    assert json.loads(ops[0].data)["partitions"] == {"0": [2, 3, 4]}


def test_a_broker_reads_the_move_back_from_zookeeper() -> None:
    image = _image()
    zk = ClusterState()
    zk.topics["t"] = TopicAssignment.from_json(
        b'{"version":3,"partitions":{"0":[2,3,4,1]},"adding_replicas":{"0":[4]},'
        b'"removing_replicas":{"0":[1]},"topic_id":"' + layout.uuid_to_text(T).encode()
        + b'"}', "t")
    zk.partitions[("t", 0)] = ZkPartition(PartitionState(1, 0, (1, 2, 3), 1), 1)
    records = [r for r in diff(image, zk) if getattr(r, "topic_id", None) == T]
    assert records == [PartitionChangeRecord(T, 0, replicas=[2, 3, 4, 1], adding_replicas=[4],
                                             removing_replicas=[1])]
    for record in records:
        image.replay(record)
    p = image.topics_by_name["t"].partitions[0]
    assert (p.adding_replicas, p.removing_replicas, p.target_replicas) == ([4], [1], [2, 3, 4])
    assert [r for r in diff(image, zk) if getattr(r, "topic_id", None) == T] == []
    # a broker that starts now gets the whole state in one record
    fresh = [r for r in diff(MetadataImage(), zk) if isinstance(r, PartitionRecord)]
    assert fresh == [PartitionRecord(T, 0, [2, 3, 4, 1], [1, 2, 3], 1, 0, 1, [4], [1])]
