"""Kafka's replica assignment (AdminUtils.assignReplicasToBrokers): the known assignments of
Kafka's own AdminUtilsTest/AdminRackAwareTest, even spread, rack spread, and the errors."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from moldau.broker.metadata.assignment import (
    AssignmentError,
    assign_replicas,
    rack_alternated,
)
from moldau.protocol.errors import ErrorCode


def test_fixed_start_matches_kafkas_known_assignment() -> None:
    brokers = [(b, None) for b in range(5)]
    assert assign_replicas(brokers, 10, 3, fixed_start_index=0) == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}


def test_rack_alternated_list() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated(racks) == [0, 3, 1, 5, 4, 2]


def test_rack_aware_fixed_start() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    got = assign_replicas(list(racks.items()), 6, 3, fixed_start_index=0)
    assert got == {0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0],
                   5: [2, 0, 3]}


@pytest.mark.parametrize("seed", range(20))
def test_twelve_partitions_over_three_brokers_spread_evenly(seed: int) -> None:
    brokers = [(1, None), (2, None), (3, None)]
    got = assign_replicas(brokers, 12, 3, rng=random.Random(seed))
    assert sorted(got) == list(range(12))
    assert Counter(r[0] for r in got.values()) == {1: 4, 2: 4, 3: 4}
    assert Counter(b for r in got.values() for b in r) == {1: 12, 2: 12, 3: 12}
    assert all(len(set(r)) == 3 for r in got.values())
    one = assign_replicas(brokers, 12, 1, rng=random.Random(seed))
    assert Counter(r[0] for r in one.values()) == {1: 4, 2: 4, 3: 4}


@pytest.mark.parametrize("seed", range(20))
def test_rack_aware_puts_replicas_on_distinct_racks(seed: int) -> None:
    brokers = [(0, "a"), (1, "a"), (2, "b"), (3, "b"), (4, "c"), (5, "c")]
    got = assign_replicas(brokers, 12, 3, rng=random.Random(seed))
    racks = dict(brokers)
    for replicas in got.values():
        assert len({racks[b] for b in replicas}) == 3
    assert Counter(r[0] for r in got.values()) == {b: 2 for b in range(6)}
    # replication factor above the number of racks: every rack first, then distinct brokers
    four = assign_replicas(brokers, 6, 4, rng=random.Random(seed))
    for replicas in four.values():
        assert len(set(replicas)) == 4 and len({racks[b] for b in replicas}) == 3


def test_start_partition_id_continues_the_walk() -> None:
    brokers = [(b, None) for b in range(5)]
    full = assign_replicas(brokers, 10, 3, fixed_start_index=0)
    tail = assign_replicas(brokers, 4, 3, fixed_start_index=0, start_partition_id=6)
    # leaders continue where partition 6 would have had its leader (the follower shift
    # restarts, as in Kafka)
    assert {p: r[0] for p, r in tail.items()} == {p: full[p][0] for p in range(6, 10)}


def test_errors_carry_kafkas_codes_and_messages() -> None:
    brokers = [(1, None)]
    with pytest.raises(AssignmentError) as info:
        assign_replicas(brokers, 3, 2)
    assert info.value.code == ErrorCode.invalid_replication_factor
    assert info.value.message == "Replication factor: 2 larger than available brokers: 1."
    with pytest.raises(AssignmentError) as info:
        assign_replicas(brokers, 0, 1)
    assert info.value.code == ErrorCode.invalid_partitions
    with pytest.raises(AssignmentError) as info:
        assign_replicas(brokers, 1, 0)
    assert info.value.code == ErrorCode.invalid_replication_factor
    with pytest.raises(AssignmentError, match=r"rack information.*broker\(s\) \[2\]"):
        assign_replicas([(1, "a"), (2, None)], 1, 1)
