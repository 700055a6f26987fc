"""Unclean leader election (pure rules): with no live in-sync replica, a partition stays
offline unless its topic allows ``unclean.leader.election.enable``; then the first live
replica outside the ISR leads and forms the ISR alone, and a warning names the partition."""

from __future__ import annotations

import logging
import uuid

import pytest

from moldau.broker.metadata.image import MetadataImage, PartitionState
from moldau.broker.metadata.records import PartitionChangeRecord, PartitionRecord, TopicRecord
from moldau.broker.zk.cluster_controller import elect_leader, leader_elections

T = uuid.UUID(int=1)
U = uuid.UUID(int=2)


def _state(leader: int, isr: list[int], replicas: list[int]) -> PartitionState:
    return PartitionState(0, replicas, isr, leader, 3, 5)


def test_elect_leader_unclean() -> None:
    alive = {1, 3}
    # the ISR member 2 died: clean election leaves it offline, unclean elects 1
    assert elect_leader(T, 0, _state(2, [2], [2, 1]), alive, alive) == \
        PartitionChangeRecord(T, 0, leader=-1)
    assert elect_leader(T, 0, _state(2, [2], [2, 1]), alive, alive, unclean=True) == \
        PartitionChangeRecord(T, 0, leader=1, isr=[1])
    # already offline: unclean elects the first live replica in assignment order
    assert elect_leader(T, 0, _state(-1, [2], [2, 3, 1]), alive, alive, unclean=True) == \
        PartitionChangeRecord(T, 0, leader=3, isr=[3])
    # an in-sync replica alive is always preferred
    assert elect_leader(T, 0, _state(2, [2, 1], [3, 2, 1]), alive, alive, unclean=True) == \
        PartitionChangeRecord(T, 0, leader=1, isr=[1])
    # none alive and eligible: offline even when unclean
    assert elect_leader(T, 0, _state(-1, [2], [2, 1]), alive, {3}, unclean=True) is None


def _image() -> MetadataImage:
    image = MetadataImage()
    for record in [TopicRecord("dirty", T), PartitionRecord(T, 0, [2, 1], [2], 2),
                   TopicRecord("clean", U), PartitionRecord(U, 0, [2, 1], [2], 2)]:
        image.replay(record)
    image.brokers = {b: None for b in (1, 3)}  # type: ignore[misc]  # broker 2 is gone
    return image


def test_leader_elections_per_topic_and_the_warning(caplog: pytest.LogCaptureFixture) -> None:
    asked: list[str] = []

    def unclean(topic: str) -> bool:
        asked.append(topic)
        return topic == "dirty"

    with caplog.at_level(logging.WARNING, "moldau.broker.zk.cluster_controller"):
        records = leader_elections(_image(), (), unclean)
    assert records == [PartitionChangeRecord(T, 0, leader=1, isr=[1]),
                       PartitionChangeRecord(U, 0, leader=-1)]
    assert sorted(asked) == ["clean", "dirty"]
    [warning] = [r.getMessage() for r in caplog.records]
    assert "dirty-0" in warning and "lost" in warning and "replica 1" in warning
    # without the lookup (or with it false everywhere) nothing unclean happens
    assert leader_elections(_image()) == [PartitionChangeRecord(T, 0, leader=-1),
                                          PartitionChangeRecord(U, 0, leader=-1)]


def test_a_partition_already_offline_is_elected_once_unclean_is_enabled() -> None:
    image = _image()
    for record in leader_elections(image):
        image.replay(record)
    assert leader_elections(image) == []  # stays offline, nothing to write
    assert leader_elections(image, (), lambda topic: True) == [
        PartitionChangeRecord(T, 0, leader=1, isr=[1]),
        PartitionChangeRecord(U, 0, leader=1, isr=[1])]
    # a replica in controlled shutdown is never chosen
    assert leader_elections(image, {1}, lambda topic: True) == []
