"""The per-partition answer to a fetch from a broker that is not a replica (defect 10 of
issue 11): Kafka's order of checks (metadata, leader epoch, leadership, replica set)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from moldau.broker.handlers.fetch import _non_replica_error
from moldau.broker.partition import Partition
from moldau.broker.replica_manager import FetchTarget
from moldau.protocol.errors import ErrorCode as E


def manager(*, leader: bool = True, epoch: int = 5, hosted: bool = True) -> Any:
    partition = SimpleNamespace(leader=1 if leader else 2, node_id=1, leader_epoch=epoch)
    partition.is_leader = partition.leader == partition.node_id
    partition.check_leader_epoch = lambda requested: Partition.check_leader_epoch(
        partition, requested)  # type: ignore[arg-type]
    image = SimpleNamespace(topics_by_name={"t": SimpleNamespace(partitions={0: object()})})
    return SimpleNamespace(
        image=image,
        get=lambda topic, index: partition if hosted and (topic, index) == ("t", 0) else None)


def target(topic: str | None = "t", partition: int = 0, epoch: int = -1, *,
           unknown_id: bool = False) -> FetchTarget:
    return FetchTarget(topic, partition, 0, 1024, epoch, unknown_id=unknown_id)


@pytest.mark.parametrize(("kwargs", "fetch", "expected"), [
    ({}, target(epoch=5), E.unknown_leader_epoch),          # the replica is not assigned
    ({}, target(epoch=-1), E.not_leader_or_follower),       # ... and the request has no epoch
    ({}, target(epoch=4), E.fenced_leader_epoch),           # epoch checks come first
    ({}, target(epoch=6), E.unknown_leader_epoch),
    ({"leader": False}, target(epoch=5), E.not_leader_or_follower),
    ({"hosted": False}, target(epoch=5), E.not_leader_or_follower),
    ({}, target(partition=3), E.unknown_topic_or_partition),
    ({}, target(topic="other"), E.unknown_topic_or_partition),
    ({}, target(topic=None, unknown_id=True), E.unknown_topic_id),
])
def test_errors_follow_kafkas_order(kwargs: dict[str, Any], fetch: FetchTarget,
                                    expected: E) -> None:
    assert _non_replica_error(manager(**kwargs), fetch) == expected
