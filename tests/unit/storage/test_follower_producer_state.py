"""Producer state on a follower (issue 13): built from the batches it replicates with
``append_as_follower``, kept across restarts (snapshots at rolls, rebuild from the log after a
kill) and trimmed by a truncation, so that the follower, once it leads, answers a retried
batch with its original offsets, a gap with OUT_OF_ORDER_SEQUENCE_NUMBER, and (Kafka 2.5+,
KIP-360) takes a producer it no longer knows at any sequence instead of UNKNOWN_PRODUCER_ID."""

from __future__ import annotations

import time

import pytest

from moldau.protocol.errors import ErrorCode
from moldau.storage import Log, ProducerStateError, load_log

from .helpers import append, make_batch, open_log

PID = 77
NOW = int(time.time() * 1000)


def idem(seq: int, count: int = 2, epoch: int = 0) -> bytearray:
    return make_batch(count, NOW, producer_id=PID, producer_epoch=epoch, base_sequence=seq)


def replicate(leader: Log, follower: Log) -> None:
    """Copy what the follower lacks, as the leader's Fetch would send it."""
    while follower.log_end_offset < leader.log_end_offset:
        got = leader.read(follower.log_end_offset, 1 << 20)
        follower.append_as_follower(bytes(got.records))


def pair(tmp_path, **cfg: object) -> tuple[Log, Log, list[int]]:
    """A leader with 6 batches of 2 records (sequences 0..11) and its follower."""
    leader = open_log(str(tmp_path / "leader" / "t-0"), **cfg)
    follower = open_log(str(tmp_path / "follower" / "t-0"), **cfg)
    firsts = [append(leader, idem(seq)).first_offset for seq in range(0, 12, 2)]
    replicate(leader, follower)
    return leader, follower, firsts


def test_the_follower_state_equals_the_leaders(tmp_path) -> None:
    leader, follower, _firsts = pair(tmp_path)
    assert follower.producer_state.producers == leader.producer_state.producers
    assert follower.producer_state.last_entry(PID).last_seq == 11


def test_the_promoted_follower_answers_retries_with_original_offsets(tmp_path) -> None:
    _leader, follower, firsts = pair(tmp_path)
    end = follower.log_end_offset
    for seq, first in zip(range(2, 12, 2), firsts[1:], strict=True):  # the last 5 batches
        info = append(follower, idem(seq), epoch=1)
        assert info.duplicate and info.first_offset == first
    assert follower.log_end_offset == end
    with pytest.raises(ProducerStateError) as gap:
        append(follower, idem(14), epoch=1)
    assert gap.value.code == ErrorCode.out_of_order_sequence_number
    assert append(follower, idem(12), epoch=1).first_offset == end


def test_state_survives_a_kill_and_restart_of_the_follower(tmp_path) -> None:
    _leader, follower, firsts = pair(tmp_path, segment_bytes=300)
    assert follower.producer_state.snapshot_offsets(), "rolls should have left snapshots"
    state = dict(follower.producer_state.producers)
    follower.close_handles()  # kill -9: no snapshot at the log end
    follower = load_log(follower.dir, follower.config)
    assert follower.producer_state.producers == state
    assert append(follower, idem(10), epoch=1).first_offset == firsts[-1]


def test_truncation_forgets_the_truncated_batches_only(tmp_path) -> None:
    _leader, follower, firsts = pair(tmp_path, segment_bytes=300)
    follower.truncate_to(firsts[4])  # batches 4 and 5 (sequences 8..11) were not committed
    assert follower.producer_state.last_entry(PID).last_seq == 7
    assert append(follower, idem(6), epoch=1).first_offset == firsts[3]  # still a duplicate
    with pytest.raises(ProducerStateError) as gap:
        append(follower, idem(10), epoch=1)
    assert gap.value.code == ErrorCode.out_of_order_sequence_number
    # The retry of a batch the truncation removed is written again, once.
    info = append(follower, idem(8), epoch=1)
    assert not info.duplicate and info.first_offset == firsts[4]


def test_after_a_full_truncation_an_unknown_producer_may_go_on(tmp_path) -> None:
    _leader, follower, _firsts = pair(tmp_path)
    follower.truncate_fully_and_start_at(100)
    assert follower.producer_state.last_entry(PID) is None
    # Kafka 2.5+: no UNKNOWN_PRODUCER_ID from the log; any sequence starts the producer anew.
    info = append(follower, idem(12), epoch=1)
    assert not info.duplicate and info.first_offset == 100
    assert append(follower, idem(12), epoch=1).duplicate
