"""Idempotent producer state: duplicates, sequence gaps, epochs, wrap, transactions,
snapshots and rebuilds."""

from __future__ import annotations

import os
import time

import pytest

from moldau.protocol.errors import ErrorCode
from moldau.storage import ProducerStateError, load_log
from moldau.storage.producer_state import (
    ORIGIN_COORDINATOR,
    decode_snapshot,
    encode_snapshot,
)

from .helpers import FakeClock, append, control_batch, make_batch, open_log

PID = 4242
INT32_MAX = 0x7FFFFFFF


NOW = int(time.time() * 1000)


def idem(seq, count=2, epoch=0, pid=PID, ts=NOW, **kw):
    # Timestamps near "now": producer ids expire by their batches' timestamps, as in Kafka.
    return make_batch(count, ts, producer_id=pid, producer_epoch=epoch, base_sequence=seq, **kw)


def test_in_sequence_appends_and_duplicate_retry(tmp_path):
    log = open_log(str(tmp_path / "t-0"))
    a = append(log, idem(0))
    b = append(log, idem(2))
    assert (a.first_offset, b.first_offset) == (0, 2)
    dup = append(log, idem(0))
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (0, 1)
    assert log.log_end_offset == 4  # nothing written
    entry = log.producer_state.last_entry(PID)
    assert entry.last_seq == 3 and entry.producer_epoch == 0


def test_duplicates_of_last_five_batches_only(tmp_path):
    log = open_log(str(tmp_path / "t-0"))
    for i in range(6):
        append(log, idem(i * 2))
    for i in range(1, 6):
        info = append(log, idem(i * 2))
        assert info.duplicate and info.first_offset == i * 2
    with pytest.raises(ProducerStateError) as exc:
        append(log, idem(0))  # evicted from the cache: an out-of-order sequence
    assert exc.value.code == ErrorCode.out_of_order_sequence_number


def test_sequence_gap_rejected(tmp_path):
    log = open_log(str(tmp_path / "t-0"))
    append(log, idem(0))
    with pytest.raises(ProducerStateError) as exc:
        append(log, idem(5))
    assert exc.value.code == ErrorCode.out_of_order_sequence_number
    assert "incoming seq. number" in str(exc.value)
    assert log.log_end_offset == 2
    append(log, idem(2))


def test_epochs(tmp_path):
    log = open_log(str(tmp_path / "t-0"))
    append(log, idem(0, epoch=3))
    with pytest.raises(ProducerStateError) as exc:
        append(log, idem(2, epoch=2))
    assert exc.value.code == ErrorCode.invalid_producer_epoch
    with pytest.raises(ProducerStateError) as exc:
        append(log, idem(7, epoch=4))  # a new epoch must start at 0
    assert exc.value.code == ErrorCode.out_of_order_sequence_number
    append(log, idem(0, epoch=4))  # bump resets sequences
    assert log.producer_state.last_entry(PID).producer_epoch == 4
    # The old epoch's batches are no longer duplicates.
    with pytest.raises(ProducerStateError):
        append(log, idem(0, epoch=3))


def test_unknown_producer_may_start_anywhere(tmp_path):
    # Kafka >= 2.5 (KIP-360): no state means any first sequence is accepted.
    log = open_log(str(tmp_path / "t-0"))
    info = append(log, idem(1234, pid=77))
    assert not info.duplicate
    append(log, idem(1236, pid=77))


def test_sequence_wraps_at_int32_max(tmp_path):
    log = open_log(str(tmp_path / "t-0"))
    append(log, idem(INT32_MAX - 3, count=2))  # seqs MAX-3, MAX-2
    append(log, idem(INT32_MAX - 1, count=3))  # MAX-1, MAX, 0
    assert log.producer_state.last_entry(PID).last_seq == 0
    dup = append(log, idem(INT32_MAX - 1, count=3))
    assert dup.duplicate and dup.first_offset == 2
    append(log, idem(1))
    log2 = open_log(str(tmp_path / "u-0"))
    append(log2, idem(INT32_MAX - 1, count=2))
    append(log2, idem(0, count=1))  # MAX -> 0


def test_non_idempotent_batches_skip_checks(tmp_path):
    log = open_log(str(tmp_path / "t-0"))
    append(log, make_batch(2))
    append(log, make_batch(2))
    assert log.producer_state.producers == {}


def test_transactions_tracked(tmp_path):
    log = open_log(str(tmp_path / "t-0"))
    append(log, make_batch(1))
    append(log, idem(0, transactional=True))
    append(log, idem(0, pid=9, transactional=True))
    assert log.first_unstable_offset() == 1
    with pytest.raises(ProducerStateError) as exc:
        append(log, idem(2))  # non-transactional while its transaction is open
    assert exc.value.code == ErrorCode.invalid_txn_state
    append(log, idem(2, transactional=True))
    info = append(log, control_batch(PID, 0, commit=True, coordinator_epoch=3),
                  origin=ORIGIN_COORDINATOR)
    assert info.first_offset == 7
    # Its marker is not below the high watermark yet: the transaction still holds the LSO.
    assert log.first_unstable_offset() == 1
    log.update_high_watermark(7)
    assert log.first_unstable_offset() == 1
    log.update_high_watermark(8)
    assert log.first_unstable_offset() == 3  # producer 9's transaction
    append(log, control_batch(9, 0, commit=False, coordinator_epoch=3), origin=ORIGIN_COORDINATOR)
    assert log.first_unstable_offset() == 3
    log.update_high_watermark(log.log_end_offset)
    assert log.first_unstable_offset() is None
    with pytest.raises(ProducerStateError) as exc:
        append(log, control_batch(9, 0, commit=True, coordinator_epoch=1),
               origin=ORIGIN_COORDINATOR)
    assert exc.value.code == ErrorCode.transaction_coordinator_fenced


def test_a_retry_inside_the_open_transaction_is_a_duplicate(tmp_path):
    log = open_log(str(tmp_path / "t-0"))
    append(log, idem(0, transactional=True))
    append(log, idem(2, transactional=True))
    dup = append(log, idem(0, transactional=True))  # its answer was lost: a retry
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (0, 1)
    assert log.log_end_offset == 4


def test_a_sequence_used_again_after_the_transaction_ended_is_not_a_duplicate(tmp_path):
    # librdkafka's abort_transaction() purges a message whose request failed in transport
    # although the leader wrote it, and hands its sequence to the next transaction's first
    # message (same epoch). Answering that as a duplicate acknowledges a record that is never
    # written and the next commit loses it; checked as a new batch it is out of order and
    # the transaction aborts.
    log = open_log(str(tmp_path / "t-0"))
    append(log, idem(0, transactional=True))
    append(log, idem(2, count=1, transactional=True))  # written; the client never heard
    append(log, control_batch(PID, 0, commit=False, coordinator_epoch=1),
           origin=ORIGIN_COORDINATOR)
    with pytest.raises(ProducerStateError) as exc:
        append(log, idem(2, count=1, transactional=True))
    assert exc.value.code == ErrorCode.out_of_order_sequence_number
    assert log.log_end_offset == 4  # nothing written, nothing acknowledged
    info = append(log, idem(3, count=1, transactional=True))  # in sequence: a new transaction
    assert not info.duplicate and info.first_offset == 4
    # Idempotent producers without transactions keep Kafka's duplicate window.
    append(log, idem(0, pid=7))
    assert append(log, idem(0, pid=7)).duplicate


def test_clients_may_not_write_control_batches(tmp_path):
    from moldau.storage import InvalidRecord

    log = open_log(str(tmp_path / "t-0"))
    with pytest.raises(InvalidRecord) as exc:
        append(log, control_batch(PID, 0, commit=True))
    assert exc.value.code == ErrorCode.invalid_record
    assert log.log_end_offset == 0


def test_snapshot_format_round_trip():
    from moldau.storage.producer_state import BatchMetadata, ProducerStateEntry

    producers = {
        5: ProducerStateEntry(5, 2, [BatchMetadata(9, 100, 4, 77), BatchMetadata(12, 104, 2, 78)],
                              1, 78, -1),
        6: ProducerStateEntry(6, 0, [BatchMetadata(0, 3, 0, 5)], -1, 5, 3),
    }
    data = encode_snapshot(producers)
    assert data[:4] == b"MPSN"
    assert decode_snapshot(data) == producers
    from moldau.storage.errors import CorruptSnapshot

    with pytest.raises(CorruptSnapshot):
        decode_snapshot(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(CorruptSnapshot):
        decode_snapshot(data[:20])


def test_snapshot_at_roll_and_clean_restart_without_scan(tmp_path):
    path = str(tmp_path / "t-0")
    log = open_log(path, segment_bytes=500)
    for i in range(20):
        append(log, idem((i // 3) * 2, pid=1 + i % 3))
    snaps = sorted(n for n in os.listdir(path) if n.endswith(".snapshot"))
    assert snaps and all(n[:-9].isdigit() and len(n) == 29 for n in snaps)
    state = {pid: e for pid, e in log.producer_state.producers.items()}
    log.close()
    assert os.path.exists(os.path.join(path, f"{40:020d}.snapshot"))
    from moldau.storage import LoadStats

    stats = LoadStats()
    log = load_log(path, log.config, clean_shutdown=True, stats=stats)
    assert stats.producer_batches_replayed == 0
    assert log.producer_state.producers == state
    assert append(log, idem(12, pid=2)).duplicate


def test_rebuild_after_unclean_stop_and_corrupt_snapshot(tmp_path):
    path = str(tmp_path / "t-0")
    log = open_log(path, segment_bytes=500)
    for i in range(20):
        append(log, idem(i * 2))
    state = log.producer_state.last_entry(PID)
    log.close_handles()  # crash: no snapshot at the end
    # Damage the newest snapshot: it must be ignored, the older one used.
    snaps = sorted(n for n in os.listdir(path) if n.endswith(".snapshot"))
    with open(os.path.join(path, snaps[-1]), "r+b") as f:
        f.seek(12)
        f.write(b"\xff\xff")
    from moldau.storage import LoadStats

    stats = LoadStats()
    log = load_log(path, log.config, stats=stats)
    assert stats.producer_batches_replayed > 0
    assert log.producer_state.last_entry(PID) == state
    assert snaps[-1] not in os.listdir(path)
    assert append(log, idem(36)).duplicate
    append(log, idem(40))


def test_truncation_rebuilds_producer_state(tmp_path):
    log = open_log(str(tmp_path / "t-0"), segment_bytes=400)
    for i in range(12):
        append(log, idem(i * 2))
    log.truncate_to(10)
    assert log.producer_state.last_entry(PID).last_seq == 9
    info = append(log, idem(10))
    assert not info.duplicate and info.first_offset == 10


def test_expiry(tmp_path):
    clock = FakeClock(10_000)
    log = open_log(str(tmp_path / "t-0"), clock, producer_id_expiration_ms=1000)
    append(log, idem(0, ts=10_000))
    append(log, idem(0, pid=5, ts=10_000, transactional=True))
    assert log.remove_expired_producers(10_999) == 0
    assert log.remove_expired_producers(11_000) == 1  # the open transaction keeps pid 5
    assert set(log.producer_state.producers) == {5}
    append(log, idem(17))  # expired producer: starts over at any sequence
