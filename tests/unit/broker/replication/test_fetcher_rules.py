"""The follower's pure rules: where it truncates after a leader change (KIP-279) and which
fetcher a partition goes to (num.replica.fetchers)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from moldau.broker.replication.fetcher import (
    FetcherSettings,
    ReplicaFetcherManager,
    truncation_offset,
)


def own_ends(ends: dict[int, int]) -> Callable[[int], int]:
    """The follower's end offset of its largest epoch at or below the one asked for."""
    return lambda epoch: ends[max(e for e in ends if e <= epoch)]


def test_same_epoch_keeps_up_to_the_leaders_end() -> None:
    # Both in epoch 3; the leader's epoch 3 ends at 120, ours runs to 140: 20 orphans go.
    assert truncation_offset(3, 3, 120, log_end_offset=140, high_watermark=100,
                             own_end_for=own_ends({3: 140})) == 120
    # Ours is shorter: nothing to cut.
    assert truncation_offset(3, 3, 120, log_end_offset=110, high_watermark=100,
                             own_end_for=own_ends({3: 110})) == 110


def test_an_epoch_the_leader_never_had_is_cut_where_the_common_one_ends() -> None:
    # We wrote in epochs 2 (from 50) and 4 (from 90, as a short-lived leader); the leader's
    # largest epoch at or below 4 is 2, which it ended at 95. Ours ended at 90: cut at 90.
    assert truncation_offset(4, 2, 95, log_end_offset=130, high_watermark=80,
                             own_end_for=own_ends({0: 50, 2: 90, 4: 130})) == 90
    # The leader's epoch 2 ended earlier than ours: its end wins.
    assert truncation_offset(4, 2, 70, log_end_offset=130, high_watermark=60,
                             own_end_for=own_ends({0: 50, 2: 90, 4: 130})) == 70


def test_no_epoch_known_to_the_leader_falls_back_to_the_high_watermark() -> None:
    assert truncation_offset(5, -1, -1, log_end_offset=40, high_watermark=30,
                             own_end_for=own_ends({5: 40})) == 30


def test_partitions_spread_over_the_fetchers_stably() -> None:
    manager = ReplicaFetcherManager(node_id=1, image=None, partitions=dict,  # type: ignore[arg-type]
                                    listener="PLAINTEXT",
                                    settings=FetcherSettings(num_fetchers=3))
    keys = [("t", i) for i in range(300)]
    ids = [manager.fetcher_id(k) for k in keys]
    assert ids == [manager.fetcher_id(k) for k in keys]
    assert set(Counter(ids)) == {0, 1, 2} and min(Counter(ids).values()) > 50
    one = ReplicaFetcherManager(node_id=1, image=None, partitions=dict,  # type: ignore[arg-type]
                                listener="PLAINTEXT", settings=FetcherSettings())
    assert {one.fetcher_id(k) for k in keys} == {0}
