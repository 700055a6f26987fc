"""The controller's leader election rules (pure): a dead leader's partition gets the first
live in-sync replica or goes offline (-1, ISR keeps its last member), a returning broker
leads its offline partitions again, controlled shutdown moves leadership off."""

from __future__ import annotations

import uuid

from moldau.broker.metadata.image import MetadataImage, PartitionState
from moldau.broker.metadata.records import PartitionChangeRecord, PartitionRecord, TopicRecord
from moldau.broker.zk.cluster_controller import controlled_shutdown, elect_leader

T = uuid.UUID(int=1)


def _state(leader: int, isr: list[int], replicas: list[int]) -> PartitionState:
    return PartitionState(0, replicas, isr, leader, 3, 5)


def test_dead_leader_and_followers() -> None:
    alive = {1, 3}
    # the first replica (assignment order) alive and in the ISR leads; the dead leaves the ISR
    assert elect_leader(T, 0, _state(2, [2, 3, 1], [2, 3, 1]), alive, alive) == \
        PartitionChangeRecord(T, 0, leader=3, isr=[3, 1])
    # a live leader stays; a dead follower leaves the ISR
    assert elect_leader(T, 0, _state(1, [1, 2], [1, 2]), alive, alive) == \
        PartitionChangeRecord(T, 0, isr=[1])
    assert elect_leader(T, 0, _state(1, [1, 3], [1, 3]), alive, alive) is None
    # replication factor 1: offline, the ISR keeps its last member
    assert elect_leader(T, 0, _state(2, [2], [2]), alive, alive) == \
        PartitionChangeRecord(T, 0, leader=-1)
    assert elect_leader(T, 0, _state(-1, [2], [2]), alive, alive) is None
    # a live replica outside the ISR is not elected (no unclean election)
    assert elect_leader(T, 0, _state(2, [2], [2, 1]), alive, alive) == \
        PartitionChangeRecord(T, 0, leader=-1)


def test_a_returning_broker_leads_its_offline_partitions() -> None:
    assert elect_leader(T, 0, _state(-1, [2], [2]), {1, 2}, {1, 2}) == \
        PartitionChangeRecord(T, 0, leader=2)
    # unless it is shutting down
    assert elect_leader(T, 0, _state(-1, [2], [2]), {1, 2}, {1}) is None


def test_controlled_shutdown() -> None:
    image = MetadataImage()
    for record in [TopicRecord("t", T), PartitionRecord(T, 0, [2, 1, 3], [2, 1, 3], 2),
                   PartitionRecord(T, 1, [1, 2], [1, 2], 1), PartitionRecord(T, 2, [2], [2], 2)]:
        image.replay(record)
    image.brokers = {b: None for b in (1, 2, 3)}  # type: ignore[misc]
    assert controlled_shutdown(image, 2, {2}) == [
        PartitionChangeRecord(T, 0, leader=1, isr=[1, 3]),
        PartitionChangeRecord(T, 1, isr=[1]),
    ]
