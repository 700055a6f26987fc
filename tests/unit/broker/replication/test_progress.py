"""Kafka's caught-up rule and the high watermark over the ISR (replication.progress)."""

from __future__ import annotations

from moldau.broker.replication.progress import (
    UNKNOWN_OFFSET,
    ReplicaProgress,
    can_join_isr,
    high_watermark_candidate,
    is_caught_up,
    new_leader_progress,
    record_fetch,
)


def test_a_fetch_at_the_leaders_end_is_caught_up_now() -> None:
    p = ReplicaProgress(2)
    record_fetch(p, fetch_offset=10, log_start_offset=0, leader_log_end_offset=10, now_ms=500)
    assert (p.log_end_offset, p.last_caught_up_time_ms, p.last_fetch_time_ms) == (10, 500, 500)
    assert p.last_fetch_leader_log_end_offset == 10


def test_a_fetch_reaching_the_previous_leader_end_is_caught_up_as_of_the_previous_fetch() -> None:
    p = ReplicaProgress(2)
    record_fetch(p, fetch_offset=5, log_start_offset=0, leader_log_end_offset=10, now_ms=100)
    assert p.last_caught_up_time_ms == 0  # behind, and nothing known before
    # The leader grew to 20 meanwhile; the follower now has the 10 it had at 100.
    record_fetch(p, fetch_offset=10, log_start_offset=0, leader_log_end_offset=20, now_ms=300)
    assert p.last_caught_up_time_ms == 100
    # Falling behind what the leader had at the previous fetch: no credit.
    record_fetch(p, fetch_offset=15, log_start_offset=0, leader_log_end_offset=40, now_ms=900)
    assert p.last_caught_up_time_ms == 100
    assert p.log_end_offset == 15


def test_caught_up_time_never_moves_back() -> None:
    p = ReplicaProgress(2, last_caught_up_time_ms=1000)
    record_fetch(p, fetch_offset=3, log_start_offset=0, leader_log_end_offset=3, now_ms=900)
    assert p.last_caught_up_time_ms == 1000


def test_new_leader_progress_trusts_isr_members_for_now() -> None:
    assert new_leader_progress(2, in_isr=True, now_ms=77).last_caught_up_time_ms == 77
    other = new_leader_progress(3, in_isr=False, now_ms=77)
    assert other.last_caught_up_time_ms == 0 and other.log_end_offset == UNKNOWN_OFFSET


def test_high_watermark_is_the_smallest_end_over_the_isr() -> None:
    followers = {2: ReplicaProgress(2, log_end_offset=7), 3: ReplicaProgress(3, log_end_offset=4)}
    assert high_watermark_candidate(9, 1, [1, 2, 3], followers) == 4
    # Replica 3 out of the ISR does not hold the high watermark back.
    assert high_watermark_candidate(9, 1, [1, 2], followers) == 7
    # The leader alone: its own log end.
    assert high_watermark_candidate(9, 1, [1], {}) == 9
    # A member the leader has no fetch from yet pins it below any real value.
    assert high_watermark_candidate(9, 1, [1, 2, 4], followers) == UNKNOWN_OFFSET
    assert high_watermark_candidate(9, 1, [1, 2], {2: ReplicaProgress(2)}) == UNKNOWN_OFFSET
    # A follower ahead of the leader (it cannot be, but) never lifts it past the leader's end.
    assert high_watermark_candidate(3, 1, [1, 2], followers) == 3


def test_is_caught_up_by_end_offset_or_lag_time() -> None:
    p = ReplicaProgress(2, log_end_offset=10, last_caught_up_time_ms=1000)
    assert is_caught_up(p, leader_log_end_offset=10, now_ms=10**9, max_lag_ms=30000)
    assert is_caught_up(p, leader_log_end_offset=12, now_ms=31000, max_lag_ms=30000)
    assert not is_caught_up(p, leader_log_end_offset=12, now_ms=31001, max_lag_ms=30000)


def test_can_join_isr_needs_the_high_watermark_and_the_epoch_start() -> None:
    p = ReplicaProgress(2, log_end_offset=10)
    assert can_join_isr(p, high_watermark=10, leader_epoch_start_offset=8)
    assert not can_join_isr(p, high_watermark=11, leader_epoch_start_offset=8)
    assert not can_join_isr(p, high_watermark=5, leader_epoch_start_offset=11)
    assert not can_join_isr(ReplicaProgress(2), high_watermark=0, leader_epoch_start_offset=0)
