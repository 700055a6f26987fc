"""The cleaner with transactions (Kafka's CleanedTransactionMetadata): aborted data dropped
and never shadowing committed writes, markers kept while their transaction has data and then
until their delete horizon, and a property over random histories: every pass and every reload
keeps the read_committed view (last committed value per key) and leaves no hanging
transaction."""

from __future__ import annotations

import random

import pytest

from moldau.protocol.records.batch import DELETE_HORIZON_BIT
from moldau.protocol.records.codec import iter_decoded
from moldau.protocol.records.control import parse_end_txn_marker
from moldau.storage import load_log
from moldau.storage.cleaner import clean_log
from moldau.storage.producer_state import ORIGIN_COORDINATOR

from .helpers import FakeClock, append, control_batch, make_batch, open_log

DAY = 86_400_000


class Writer:
    def __init__(self, log, clock: FakeClock) -> None:
        self.log, self.clock = log, clock
        self.seq: dict[int, int] = {}

    def plain(self, key: bytes, value: bytes | None) -> None:
        append(self.log, make_batch(1, self.clock.now, keys=[key], values=[value]))

    def txn(self, pid: int, key: bytes, value: bytes | None) -> None:
        seq = self.seq.get(pid, 0)
        append(self.log, make_batch(1, self.clock.now, keys=[key], values=[value],
                                    producer_id=pid, producer_epoch=0, base_sequence=seq,
                                    transactional=True))
        self.seq[pid] = seq + 1

    def end(self, pid: int, commit: bool) -> None:
        append(self.log, control_batch(pid, 0, commit, ts=self.clock.now),
               origin=ORIGIN_COORDINATOR)


def batches(log):
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = bytes(log.read(offset, 1 << 24).records)
        if not data:
            break
        out += iter_decoded(data)
        offset = out[-1].header.next_offset
    return out


def committed_view(log) -> dict[bytes, bytes | None]:
    """Last value per key as a read_committed consumer sees the log (Kafka's consumer rule:
    an aborted transaction's batches are skipped from its first offset to its ABORT)."""
    pending = sorted(log.collect_aborted(log.log_start_offset, log.log_end_offset),
                     key=lambda t: t[1])
    aborted: set[int] = set()
    view: dict[bytes, bytes | None] = {}
    for batch in batches(log):
        h = batch.header
        while pending and pending[0][1] <= h.base_offset + h.last_offset_delta:
            aborted.add(pending.pop(0)[0])
        if h.is_control:
            if batch.records and h.producer_id in aborted:
                aborted.discard(h.producer_id)
            continue
        if h.is_transactional and h.producer_id in aborted:
            continue
        for r in batch.records:
            view[r.key] = r.value
    return {k: v for k, v in view.items() if v is not None}


def markers(log) -> list[tuple[int, int, bool]]:
    out = []
    for batch in batches(log):
        h = batch.header
        if h.is_control and batch.records:
            out.append((h.base_offset, h.producer_id, bool(h.attributes & DELETE_HORIZON_BIT)))
    return out


def settle(log) -> None:
    log.roll()
    log.update_high_watermark(log.log_end_offset)


def test_aborted_data_dropped_and_marker_lifecycle(tmp_path):
    clock = FakeClock()
    log = open_log(str(tmp_path / "c-0"), clock, cleanup_policy="compact",
                   delete_retention_ms=DAY)
    w = Writer(log, clock)
    w.txn(1, b"a", b"committed")  # 0
    w.end(1, commit=True)  # 1
    w.txn(2, b"a", b"aborted")  # 2: later than the committed write, but aborted
    w.txn(2, b"b", b"aborted")  # 3
    w.end(2, commit=False)  # 4
    w.plain(b"c", b"plain")  # 5
    settle(log)
    assert committed_view(log) == {b"a": b"committed", b"c": b"plain"}

    res = clean_log(log, clock.now)
    assert res.cleaned and res.aborted_records_removed == 2
    assert committed_view(log) == {b"a": b"committed", b"c": b"plain"}
    # Producer 2's last batch stays (empty) for its sequence state, so its marker stays too,
    # with its index entry in the cleaned segment; producer 1's committed data remains.
    assert markers(log) == [(1, 1, False), (4, 2, False)]
    assert log.segments[0].txn_index.entries[0][:3] == (2, 2, 4)

    # Producer 2 moves on: its last batch is no longer the aborted one.
    w.txn(2, b"d", b"later")
    w.end(2, commit=True)
    settle(log)
    clean_log(log, clock.now)  # drops the last aborted batch: its marker still stays
    assert markers(log) == [(1, 1, False), (4, 2, False), (7, 2, False)]
    clean_log(log, clock.now)  # none of its batches left: the ABORT marker may go
    assert [m[:2] for m in markers(log)] == [(1, 1), (4, 2), (7, 2)]
    assert dict((m[0], m[2]) for m in markers(log))[4] is True  # horizon set
    clean_log(log, clock.now + DAY - 1)
    assert 4 in [m[0] for m in markers(log)]  # before its horizon
    clean_log(log, clock.now + DAY)
    assert 4 not in [m[0] for m in markers(log)]
    assert committed_view(log) == {b"a": b"committed", b"c": b"plain", b"d": b"later"}
    log.close()
    again = load_log(log.dir, log.config, time_ms=clock, high_watermark=log.log_end_offset)
    assert again.first_unstable_offset() is None
    assert committed_view(again) == {b"a": b"committed", b"c": b"plain", b"d": b"later"}
    again.close()


@pytest.mark.parametrize("seed", range(6))
def test_property_cleaning_keeps_the_committed_view(tmp_path, seed):
    rng = random.Random(seed)
    clock = FakeClock()
    log = open_log(str(tmp_path / "c-0"), clock, cleanup_policy="compact",
                   delete_retention_ms=1000, segment_bytes=700)
    w = Writer(log, clock)
    keys = [b"k%d" % i for i in range(6)]
    open_txns: set[int] = set()
    for _round in range(4):
        for _ in range(40):
            op = rng.random()
            pid = rng.randrange(1, 4)
            value = rng.choice([None, b"v%d" % rng.randrange(1000)])
            if op < 0.3:
                w.plain(rng.choice(keys), value)
            elif op < 0.8:
                w.txn(pid, rng.choice(keys), value)
                open_txns.add(pid)
            elif pid in open_txns:
                w.end(pid, commit=rng.random() < 0.5)
                open_txns.discard(pid)
        for pid in sorted(open_txns):
            w.end(pid, commit=rng.random() < 0.5)
        open_txns.clear()
        settle(log)
        expected = committed_view(log)
        for step in range(3):
            clock.advance(600)
            clean_log(log, clock.now)
            assert committed_view(log) == expected, (seed, step)
        log.close()
        log = load_log(log.dir, log.config, time_ms=clock, high_watermark=log.log_end_offset)
        w.log = log
        assert log.first_unstable_offset() is None
        assert committed_view(log) == expected
        # Every marker left decodes, and no ABORT marker outlives its horizon by two passes.
        for batch in batches(log):
            h = batch.header
            assert not h.is_control or h.record_count == 0 or h.producer_id >= 0
    log.close()


def test_marker_parses_after_horizon_rewrite(tmp_path):
    clock = FakeClock()
    log = open_log(str(tmp_path / "c-0"), clock, cleanup_policy="compact")
    w = Writer(log, clock)
    w.end(9, commit=False)  # a marker with no data at all (e.g. a re-sent abort)
    w.plain(b"x", b"1")
    settle(log)
    clean_log(log, clock.now)
    [batch] = [b for b in batches(log) if b.header.is_control]
    assert batch.header.attributes & DELETE_HORIZON_BIT
    data = log.read(0, 1 << 20).records
    marker = parse_end_txn_marker(bytes(data))
    assert marker is not None and not marker.is_commit
