"""ElectLeaders' rules and the automatic rebalance's choice (pure planning over an image):
Kafka's answers per partition and the records committed."""

from __future__ import annotations

import logging
import uuid

import pytest

from moldau.broker.metadata.image import BrokerRegistration, MetadataImage
from moldau.broker.metadata.leader_election import (
    PREFERRED,
    UNCLEAN,
    imbalanced_partitions,
    plan_elections,
)
from moldau.broker.metadata.records import PartitionChangeRecord, PartitionRecord, TopicRecord
from moldau.protocol.errors import ErrorCode

T = uuid.UUID(int=1)


def image(partitions: list[tuple[list[int], list[int], int]], alive: set[int]) -> MetadataImage:
    """Topic "t" with (replicas, isr, leader) per partition; ``alive`` registered."""
    result = MetadataImage()
    result.replay(TopicRecord("t", T))
    for p, (replicas, isr, leader) in enumerate(partitions):
        result.replay(PartitionRecord(T, p, replicas, isr, leader))
    result.brokers = {b: BrokerRegistration(b, uuid.uuid4(), [], None, False) for b in alive}
    return result


def codes(plan: object) -> dict[tuple[str, int], ErrorCode]:
    return {tp: code for tp, (code, _) in plan.results.items()}  # type: ignore[attr-defined]


def test_preferred_elects_the_first_replica_when_it_can_lead() -> None:
    img = image([([1, 2, 3], [1, 2, 3], 2),   # moved: elected
                 ([2, 3, 1], [2, 3, 1], 2),   # already preferred
                 ([3, 1, 2], [1, 2], 1),      # preferred out of the ISR
                 ([1, 2, 3], [1, 2, 3], 3)],  # preferred shutting down
                alive={1, 2, 3})
    plan = plan_elections(img, PREFERRED, [("t", 0), ("t", 1), ("t", 2), ("t", 3), ("t", 9),
                                           ("nope", 0)], ineligible={1})
    assert codes(plan)[("t", 0)] == ErrorCode.preferred_leader_not_available  # 1 ineligible
    plan = plan_elections(img, PREFERRED, [("t", 0), ("t", 1), ("t", 2), ("t", 9),
                                           ("nope", 0)])
    assert codes(plan) == {("t", 0): ErrorCode.none,
                           ("t", 1): ErrorCode.election_not_needed,
                           ("t", 2): ErrorCode.preferred_leader_not_available,
                           ("t", 9): ErrorCode.unknown_topic_or_partition,
                           ("nope", 0): ErrorCode.unknown_topic_or_partition}
    assert plan.records == [PartitionChangeRecord(T, 0, leader=1)]
    assert "not in the ISR" in (plan.results[("t", 2)][1] or "")


def test_all_partitions_leaves_out_those_needing_no_election() -> None:
    img = image([([1, 2], [1, 2], 2), ([2, 1], [2, 1], 2)], alive={1, 2})
    plan = plan_elections(img, PREFERRED, None)
    assert codes(plan) == {("t", 0): ErrorCode.none}


def test_unclean_prefers_in_sync_then_any_live_replica(caplog: pytest.LogCaptureFixture
                                                       ) -> None:
    img = image([([1, 2, 3], [1, 2, 3], 1),  # leader alive: not needed
                 ([3, 2, 1], [3, 2], -1),    # live ISR member 2
                 ([3, 1], [3], -1),          # only out-of-sync 1 alive: unclean
                 ([3], [3], -1)],            # nobody alive
                alive={1, 2})
    with caplog.at_level(logging.WARNING):
        plan = plan_elections(img, UNCLEAN, [("t", 0), ("t", 1), ("t", 2), ("t", 3)])
    assert codes(plan) == {("t", 0): ErrorCode.election_not_needed,
                           ("t", 1): ErrorCode.none,
                           ("t", 2): ErrorCode.none,
                           ("t", 3): ErrorCode.eligible_leaders_not_available}
    assert plan.records == [PartitionChangeRecord(T, 1, leader=2, isr=[2]),
                            # unclean: RECOVERING (KIP-704), so the new leader logs it
                            PartitionChangeRecord(T, 2, leader=1, isr=[1],
                                                  leader_recovery_state=1)]
    assert "t-2" in caplog.text and "data loss" in caplog.text


def test_imbalance_over_the_percentage_only() -> None:
    # broker 1 prefers 4 partitions and leads 3 of them: 25 % not led
    parts = [([1, 2], [1, 2], 1)] * 3 + [([1, 2], [1, 2], 2)] + [([2, 1], [2, 1], 2)]
    img = image(parts, alive={1, 2})
    assert imbalanced_partitions(img, 25) == []
    assert imbalanced_partitions(img, 24) == [("t", 3)]
    assert imbalanced_partitions(img, 10, ineligible={1}) == []
    # the preferred replica must be in the ISR to take over
    img = image([([1, 2], [2], 2)], alive={1, 2})
    assert imbalanced_partitions(img, 10) == []


def test_a_partition_being_reassigned_is_not_rebalanced() -> None:
    img = image([([1, 2], [1, 2], 2)], alive={1, 2})
    assert imbalanced_partitions(img, 10) == [("t", 0)]
    img.topics_by_name["t"].partitions[0].adding_replicas = [1]
    assert imbalanced_partitions(img, 10) == []
