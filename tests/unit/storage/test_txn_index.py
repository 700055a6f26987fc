"""The aborted transaction index (``.txnindex``): Kafka's bytes, collect, truncation, and the
log writing, recovering and truncating it; the last stable offset with markers not yet below
the high watermark; KIP-890 verification guards."""

from __future__ import annotations

import os

import pytest

from moldau.protocol.errors import ErrorCode
from moldau.storage import ProducerStateError, load_log
from moldau.storage.errors import CorruptIndex
from moldau.storage.fs import DEFAULT_FS
from moldau.storage.producer_state import ORIGIN_COORDINATOR
from moldau.storage.txn_index import AbortedTxn, TransactionIndex

from .helpers import append, control_batch, make_batch, open_log


def txn(seq: int, pid: int, count: int = 2, epoch: int = 0) -> bytearray:
    return make_batch(count, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                      transactional=True)


def marker(pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> bytearray:
    return control_batch(pid, epoch, commit, coordinator_epoch)


def end(log, pid: int, commit: bool, **kw) -> int:
    return append(log, marker(pid, commit, **kw), origin=ORIGIN_COORDINATOR).first_offset


def txn_index_files(path: str) -> dict[str, bytes]:
    return {n: open(os.path.join(path, n), "rb").read()
            for n in sorted(os.listdir(path)) if n.endswith(".txnindex")}


def test_entry_bytes_are_kafkas(tmp_path):
    # version int16 0, producer id, first offset, last offset, last stable offset (int64s)
    assert AbortedTxn(5, 10, 20, 21).pack() == bytes.fromhex(
        "0000" "0000000000000005" "000000000000000a" "0000000000000014" "0000000000000015")
    index = TransactionIndex(str(tmp_path / "00000000000000000000.txnindex"), DEFAULT_FS)
    assert not index.exists()  # created with its first entry
    index.append(AbortedTxn(5, 10, 20, 21))
    index.append(AbortedTxn(6, 15, 30, 31))
    assert os.path.getsize(index.path) == 68
    again = TransactionIndex(index.path, DEFAULT_FS)
    assert again.entries == [AbortedTxn(5, 10, 20, 21), AbortedTxn(6, 15, 30, 31)]
    with pytest.raises(ValueError):
        again.append(AbortedTxn(7, 1, 29, 40))  # markers land in offset order


def test_collect_truncate_reset_and_sanity(tmp_path):
    index = TransactionIndex(str(tmp_path / "x.txnindex"), DEFAULT_FS)
    for entry in [AbortedTxn(1, 0, 10, 5), AbortedTxn(2, 5, 20, 21), AbortedTxn(3, 22, 40, 41)]:
        index.append(entry)
    assert index.collect(11, 22) == ([AbortedTxn(2, 5, 20, 21)], True)
    assert index.collect(0, 100) == (index.entries, False)
    assert index.collect(41, 100) == ([], False)
    index.truncate_to(20)  # the marker at 20 is cut: its entry goes, and the later one
    assert TransactionIndex(index.path, DEFAULT_FS).entries == [AbortedTxn(1, 0, 10, 5)]
    with open(index.path, "ab") as f:
        f.write(b"\x00" * 7)  # a torn write
    with pytest.raises(CorruptIndex):
        TransactionIndex(index.path, DEFAULT_FS).sanity_check()
    index.reset()
    assert not os.path.exists(index.path) and index.entries == []


def test_aborts_indexed_per_segment_and_collected(tmp_path):
    log = open_log(str(tmp_path / "t-0"))
    append(log, txn(0, pid=1))  # 0-1
    append(log, txn(0, pid=2))  # 2-3
    assert end(log, 1, commit=False) == 4
    log.roll()
    append(log, make_batch(1))  # 5
    assert end(log, 2, commit=True) == 6  # commits leave no entry
    append(log, txn(0, pid=3))  # 7-8
    assert end(log, 3, commit=False) == 9
    [first, second] = log.segments
    # Producer 2 was still open when 1 aborted: the LSO then was 2.
    assert first.txn_index.entries == [AbortedTxn(1, 0, 4, 2)]
    assert second.txn_index.entries == [AbortedTxn(3, 7, 9, 10)]
    assert log.collect_aborted(0, 10) == [(1, 0), (3, 7)]
    assert log.collect_aborted(5, 10) == [(3, 7)]
    assert log.collect_aborted(0, 2) == [(1, 0)]  # complete in the first segment
    # A follower truncating below the second abort's marker (above its HW) drops its entry.
    log.update_high_watermark(9)
    log.truncate_to(9)
    assert log.segments[1].txn_index.entries == []
    assert log.collect_aborted(0, 9) == [(1, 0)]
    assert log.first_unstable_offset() == 7  # producer 3 is open again


def test_lso_waits_for_the_marker_to_be_replicated(tmp_path):
    log = open_log(str(tmp_path / "t-0"))
    append(log, txn(0, pid=1))  # 0-1
    log.update_high_watermark(2)
    assert log.first_unstable_offset() == 0
    end(log, 1, commit=True)  # 2
    assert log.first_unstable_offset() == 0  # HW 2: the marker may still be lost
    log.update_high_watermark(3)
    assert log.first_unstable_offset() is None


@pytest.mark.parametrize("how", ["unclean", "unclean, index deleted", "clean, index torn"])
def test_recovery_rebuilds_the_index(tmp_path, how):
    path = str(tmp_path / "t-0")
    log = open_log(path, segment_bytes=400)
    for pid in range(1, 9):
        append(log, txn(0, pid=pid, count=3))
        append(log, make_batch(1))
        end(log, pid, commit=pid % 3 != 0)
    log.flush()
    before = txn_index_files(path)
    assert len(before) >= 2  # aborts in several segments
    collected = log.collect_aborted(0, log.log_end_offset)
    log.close()
    first = sorted(before)[0]
    if how == "unclean, index deleted":
        os.remove(os.path.join(path, first))
    elif how == "clean, index torn":
        with open(os.path.join(path, first), "ab") as f:
            f.write(b"\x01\x02\x03")
    clean = how.startswith("clean")
    log = load_log(path, log.config, clean_shutdown=clean)
    assert txn_index_files(path) == before
    assert log.collect_aborted(0, log.log_end_offset) == collected
    assert log.first_unstable_offset() is None or log.first_unstable_offset() >= 0
    log.close()


def test_verification_guard(tmp_path):
    log = open_log(str(tmp_path / "t-0"))
    guard = log.begin_verification(1)
    assert log.verification_guard(1) is guard and log.begin_verification(1) is guard
    # An abort marker (the coordinator timed the txn out) lands between the verification and
    # the append: the verified write may no longer open a transaction.
    end(log, 1, commit=False)
    assert log.verification_guard(1) is None
    with pytest.raises(ProducerStateError) as exc:
        append(log, txn(0, pid=1), verification_guard=guard)
    assert exc.value.code == ErrorCode.invalid_txn_state
    assert "not added to the transaction" in exc.value.message
    fresh = log.begin_verification(1)
    append(log, txn(0, pid=1), verification_guard=fresh)
    assert log.verification_guard(1) is None and log.has_ongoing_txn(1)
    # Within the open transaction the guard no longer matters.
    append(log, txn(2, pid=1), verification_guard=fresh)
    # Appends without a guard (verification off, replication) are not checked.
    append(log, txn(0, pid=2))
    assert log.has_ongoing_txn(2)


def test_verification_guard_ends_with_a_new_epoch(tmp_path):
    log = open_log(str(tmp_path / "t-0"))
    append(log, make_batch(1, producer_id=1, producer_epoch=0, base_sequence=0))
    guard = log.begin_verification(1)
    # The producer bumped its epoch (InitProducerId after an error) and wrote meanwhile.
    append(log, make_batch(1, producer_id=1, producer_epoch=1, base_sequence=0))
    assert log.verification_guard(1) is None
    with pytest.raises(ProducerStateError) as exc:
        append(log, txn(1, pid=1, epoch=1), verification_guard=guard)
    assert exc.value.code == ErrorCode.invalid_txn_state


def test_first_unstable_offset_never_below_the_log_start(tmp_path):
    log = open_log(str(tmp_path / "t-0"))
    append(log, txn(0, pid=1))  # 0-1, left open
    append(log, make_batch(3))  # 2-4
    log.update_high_watermark(log.log_end_offset)
    assert log.first_unstable_offset() == 0
    log.delete_records_before(3)  # DeleteRecords past the open transaction's start
    assert log.first_unstable_offset() == 3
