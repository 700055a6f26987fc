"""Unclean leader election (pure rules): with no live in-sync replica, a partition stays
offline unless its topic allows ``unclean.leader.election.enable``; then the first live
replica outside the ISR leads and forms the ISR alone, with ``leader_recovery_state``
RECOVERING (KIP-704) until it changes the ISR, and a warning names the partition."""

from __future__ import annotations

import logging
import uuid

import pytest

from moldau.broker.metadata.image import RECOVERED, RECOVERING, MetadataImage, PartitionState
from moldau.broker.metadata.isr_change import IsrChange, apply_isr_change
from moldau.broker.metadata.records import (
    PartitionChangeRecord,
    PartitionRecord,
    TopicRecord,
    decode_record,
)
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
        PartitionChangeRecord(T, 0, leader=1, isr=[1], leader_recovery_state=1)
    # already offline: unclean elects the first live replica in assignment order
    assert elect_leader(T, 0, _state(-1, [2], [2, 3, 1]), alive, alive, unclean=True) == \
        PartitionChangeRecord(T, 0, leader=3, isr=[3], leader_recovery_state=1)
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
    assert records == [PartitionChangeRecord(T, 0, leader=1, isr=[1], leader_recovery_state=1),
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
        PartitionChangeRecord(T, 0, leader=1, isr=[1], leader_recovery_state=1),
        PartitionChangeRecord(U, 0, leader=1, isr=[1], leader_recovery_state=1)]
    # a replica in controlled shutdown is never chosen
    assert leader_elections(image, {1}, lambda topic: True) == []


def test_an_unclean_leader_is_recovering_until_it_changes_the_isr() -> None:
    """KIP-704's leader_recovery_state: RECOVERING from the unclean election (what tells the
    new leader to log the loss), RECOVERED with the leader's first ISR change or a new leader;
    encoded only when set, so records written before it decode as they were."""
    image = _image()
    [record, _clean] = leader_elections(image, (), lambda topic: topic == "dirty")
    assert decode_record(record.encode()) == record
    assert b'"leader_recovery_state":1' in record.encode()
    assert b"leader_recovery_state" not in PartitionChangeRecord(T, 0, isr=[1]).encode()
    image.replay(record)
    state = image.topics_by_id[T].partitions[0]
    assert (state.leader, state.isr, state.leader_recovery_state) == (1, [1], RECOVERING)
    expand = apply_isr_change(IsrChange(T, 0, state.leader_epoch, state.partition_epoch,
                                        (1, 2)), state)
    assert expand == PartitionChangeRecord(T, 0, isr=[1, 2], leader_recovery_state=RECOVERED)
    image.replay(expand)
    assert state.leader_recovery_state == RECOVERED
    # once recovered, ISR changes say nothing about it
    assert apply_isr_change(IsrChange(T, 0, state.leader_epoch, state.partition_epoch, (1,)),
                            state) == PartitionChangeRecord(T, 0, isr=[1])
    # a clean election of another leader ends a recovery too
    image.replay(PartitionChangeRecord(T, 0, leader=2, isr=[2], leader_recovery_state=1))
    assert state.leader_recovery_state == RECOVERING
    image.replay(PartitionChangeRecord(T, 0, leader=1))
    assert state.leader_recovery_state == RECOVERED
