"""Compaction: last value per key, tombstone horizons, crash mid-swap, concurrent appends."""

from __future__ import annotations

import os
import threading

import pytest

from moldau.protocol.records.batch import DELETE_HORIZON_BIT, check_crc, iter_batches
from moldau.protocol.records.codec import build_batch
from moldau.protocol.records.compression import Codec
from moldau.storage import LogManager, load_log
from moldau.storage.cleaner import clean_log
from moldau.storage.producer_state import ORIGIN_COORDINATOR

from .helpers import FakeClock, append, control_batch, make_batch, open_log, records_of

DAY = 86_400_000


def kv(key, value, ts=1000, **kw):
    return make_batch(1, ts, keys=[key], values=[value], **kw)


def all_records(log):
    out = []
    off = log.log_start_offset
    while off < log.log_end_offset:
        r = log.read(off, 1 << 20)
        if not len(r.records):
            break
        for pos, h in iter_batches(r.records):
            assert check_crc(r.records, pos, h)
        out += records_of(r.records)
        off = list(iter_batches(r.records))[-1][1].next_offset
    return out


def build(tmp_path, clock, n=120, keys=10, **cfg):
    cfg.setdefault("segment_bytes", 1200)
    log = open_log(str(tmp_path / "c-0"), clock, cleanup_policy="compact", **cfg)
    for i in range(n):
        append(log, kv(b"k%d" % (i % keys), b"v%d" % i, ts=clock.now))
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    return log


def test_keeps_last_value_per_key(tmp_path):
    clock = FakeClock()
    log = build(tmp_path, clock)
    before_segments = len(log.segments)
    leo = log.log_end_offset
    res = clean_log(log, clock.now)
    assert res.cleaned and res.records_in == 120 and res.records_out == 10
    assert res.first_dirty_offset == leo
    recs = all_records(log)
    assert [(r[0], r[1], r[2]) for r in recs] == [
        (110 + k, b"k%d" % k, b"v%d" % (110 + k)) for k in range(10)]
    assert log.log_end_offset == leo
    # Groups are formed from input sizes, so the first pass leaves one small segment per
    # full input segment; the next pass merges them (as Kafka's cleaner does).
    assert len(log.segments) == before_segments
    res = clean_log(log, clock.now, 0)
    assert res.cleaned and len(log.segments) == 2
    assert all_records(log) == recs
    names = os.listdir(log.dir)
    assert not [n for n in names if n.endswith((".cleaned", ".swap"))]
    assert any(n.endswith(".log.deleted") for n in names)
    # Offsets are preserved: reading an offset that was compacted away gives the next record.
    r = log.read(5, 1)
    assert records_of(r.records)[0][0] == 110
    # The cleaned log survives a clean reopen and a crash-reopen identically.
    log.close()
    again = load_log(log.dir, log.config, clean_shutdown=True)
    assert all_records(again) == recs
    again.close_handles()
    assert all_records(load_log(log.dir, log.config)) == recs


def test_active_segment_and_dirty_boundaries(tmp_path):
    clock = FakeClock()
    log = build(tmp_path, clock, n=40, keys=4)
    append(log, kv(b"k0", b"newest"))  # active segment: neither cleaned nor in the map
    res = clean_log(log, clock.now)
    assert res.cleaned
    recs = all_records(log)
    assert (b"k0", b"v36") in [(r[1], r[2]) for r in recs]
    assert recs[-1][1:3] == (b"k0", b"newest")
    # Second pass with nothing new: nothing to do.
    res2 = clean_log(log, clock.now, res.first_dirty_offset)
    assert not res2.cleaned and res2.aborted_reason == "nothing to clean"


def test_high_watermark_and_open_transactions_bound_cleaning(tmp_path):
    clock = FakeClock()
    log = build(tmp_path, clock, n=60, keys=3)
    segs = log.segments
    log.update_high_watermark(segs[2].base_offset)
    res = clean_log(log, clock.now)
    assert res.cleaned and res.first_dirty_offset <= segs[2].base_offset
    assert segs[2] in log.segments  # untouched beyond the high watermark


def test_tombstones_kept_until_horizon_then_removed(tmp_path):
    clock = FakeClock()
    log = open_log(str(tmp_path / "c-0"), clock, cleanup_policy="compact", segment_bytes=600,
                   delete_retention_ms=DAY)
    for i in range(30):
        append(log, kv(b"k%d" % (i % 3), b"v%d" % i, ts=clock.now))
    append(log, kv(b"k1", None, ts=clock.now))  # tombstone
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    res = clean_log(log, clock.now)
    recs = all_records(log)
    assert [(r[1], r[2]) for r in recs] == [(b"k0", b"v27"), (b"k2", b"v29"), (b"k1", None)]
    assert res.next_horizon_ms == clock.now + DAY
    data = log.read(recs[-1][0], 1).records
    (_pos, h), = iter_batches(data)
    assert h.attributes & DELETE_HORIZON_BIT and h.base_timestamp == clock.now + DAY
    assert records_of(data)[0][3] == clock.now  # the record keeps its own timestamp
    clock.advance(DAY - 1)
    clean_log(log, clock.now, 0)
    assert [(r[1], r[2]) for r in all_records(log)][-1] == (b"k1", None)
    clock.advance(1)
    res = clean_log(log, clock.now, 0)
    assert res.tombstones_removed == 1
    assert [(r[1], r[2]) for r in all_records(log)] == [(b"k0", b"v27"), (b"k2", b"v29")]


def test_compressed_batches_rebuilt_with_same_codec(tmp_path):
    clock = FakeClock()
    log = open_log(str(tmp_path / "c-0"), clock, cleanup_policy="compact")
    for i in range(5):
        recs = [(b"a", b"x%d" % i, [("h", b"1")], 1000 + i), (b"b%d" % i, b"y", [], 1000 + i)]
        buf = bytearray(build_batch(recs, codec=Codec.ZSTD))
        append(log, buf)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    clean_log(log, clock.now)
    data = log.read(0, 1 << 20).records
    assert {h.compression for _p, h in iter_batches(data)} == {Codec.ZSTD}
    recs = records_of(data)
    assert [(r[0], r[1]) for r in recs] == [(1, b"b0"), (3, b"b1"), (5, b"b2"), (7, b"b3"),
                                            (8, b"a"), (9, b"b4")]
    # A follower accepts compacted batches (fewer records than the offset span).
    follower = open_log(str(tmp_path / "f-0"))
    follower.append_as_follower(bytes(data))
    assert follower.log_end_offset == 10


def test_idempotent_last_batch_kept_and_committed_transactions_compact(tmp_path):
    clock = FakeClock()
    log = open_log(str(tmp_path / "c-0"), clock, cleanup_policy="compact")
    append(log, kv(b"k", b"p0", ts=clock.now, producer_id=5, producer_epoch=0, base_sequence=0))
    append(log, kv(b"k", b"p1", ts=clock.now, producer_id=5, producer_epoch=0, base_sequence=1))
    append(log, kv(b"t", b"txn", ts=clock.now, producer_id=6, producer_epoch=0,
                   base_sequence=0, transactional=True))
    assert log.first_unstable_offset() == 2  # an open transaction stops the cleaner there
    append(log, control_batch(6, 0, commit=True, ts=clock.now), origin=ORIGIN_COORDINATOR)
    append(log, kv(b"t", b"plain", ts=clock.now))
    append(log, kv(b"k", b"plain", ts=clock.now))
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    clean_log(log, clock.now)
    data = log.read(0, 1 << 20).records
    hs = [h for _p, h in iter_batches(data)]
    # p0 dropped; p1 (producer 5's last batch) kept empty; the committed transactional write
    # of "t" is shadowed by the later plain one and compacts like any data (producer 6's last
    # batch: kept empty); its marker stays while a batch of its transaction remains.
    assert [(h.base_offset, h.record_count) for h in hs] == [(1, 0), (2, 0), (3, 1), (4, 1),
                                                             (5, 1)]
    assert hs[0].producer_id == 5 and hs[0].base_sequence == 1
    assert hs[1].is_transactional and hs[2].is_control
    log.close_handles()
    # Producer state rebuilt from the log (the checkpointed high watermark: 6).
    log = load_log(log.dir, log.config, time_ms=clock, high_watermark=6)
    assert log.first_unstable_offset() is None  # no transaction left hanging
    dup = append(log, kv(b"k", b"p1", ts=clock.now, producer_id=5, producer_epoch=0,
                         base_sequence=1))
    assert dup.duplicate and dup.first_offset == 1


def test_crash_between_swap_and_rename_is_completed_by_loader(tmp_path):
    from moldau.storage.fs import FileSystem

    class FS(FileSystem):
        armed = False

        def rename(self, src, dst):
            if self.armed and src.endswith(".swap"):
                raise OSError(5, "crash during swap (injected)")
            super().rename(src, dst)

    fs = FS()
    clock = FakeClock()
    log = open_log(str(tmp_path / "c-0"), clock, fs=fs, cleanup_policy="compact",
                   segment_bytes=1200)
    for i in range(80):
        append(log, kv(b"k%d" % (i % 5), b"v%d" % i, ts=clock.now))
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    original = all_records(log)
    fs.armed = True
    with pytest.raises(OSError, match="injected"):
        clean_log(log, clock.now)
    names = os.listdir(log.dir)
    assert any(n.endswith(".log.swap") for n in names)
    log.close_handles()  # the process dies here
    reopened = load_log(log.dir, log.config, time_ms=clock)
    recs = all_records(reopened)
    # The first group's swap was completed by the loader; later groups (still ".cleaned")
    # were discarded: a partly compacted but complete log.
    assert len(recs) < len(original)
    assert set(recs) <= set(original) and recs == sorted(recs)
    latest = {r[1]: r for r in original}
    assert set(latest.values()) <= set(recs)
    assert reopened.log_end_offset == 80
    assert not [n for n in os.listdir(log.dir) if n.endswith((".swap", ".cleaned"))]


def test_log_change_during_cleaning_aborts_the_swap(tmp_path):
    from moldau.storage.fs import FileSystem

    holder = {}

    class FS(FileSystem):
        def open(self, path, *args, **kw):
            fd = super().open(path, *args, **kw)
            hook = holder.pop("hook", None)
            if hook and path.endswith(".log.cleaned"):
                hook()
            return fd

    clock = FakeClock()
    log = open_log(str(tmp_path / "c-0"), clock, fs=FS(), cleanup_policy="compact",
                   segment_bytes=1200)
    for i in range(80):
        append(log, kv(b"k%d" % (i % 5), b"v%d" % i, ts=clock.now))
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    before = all_records(log)
    holder["hook"] = lambda: log.truncate_to(70)  # e.g. a follower truncation
    res = clean_log(log, clock.now)
    assert not res.cleaned and res.aborted_reason == "log changed during cleaning"
    assert all_records(log) == [r for r in before if r[0] < 70]
    assert not [n for n in os.listdir(log.dir) if n.endswith((".swap", ".cleaned"))]


def test_appends_and_reads_continue_during_cleaning(tmp_path):
    clock = FakeClock()
    log = build(tmp_path, clock, n=600, keys=50, segment_bytes=4000)
    stop = threading.Event()
    appended = []

    def writer():
        i = 0
        while not stop.is_set() or i < 50:
            info = append(log, kv(b"w%d" % (i % 7), b"w%d" % i, ts=clock.now))
            appended.append(info.first_offset)
            log.read(info.first_offset, 100)
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        res = clean_log(log, clock.now)
    finally:
        stop.set()
        t.join()
    assert res.cleaned
    recs = all_records(log)
    offsets = {r[0] for r in recs}
    assert set(appended) <= offsets
    assert sum(1 for r in recs if r[1].startswith(b"k")) == 50


def test_manager_cleans_by_dirty_ratio_and_checkpoints(tmp_path):
    clock = FakeClock()
    m = LogManager([str(tmp_path / "d")], {"cleanup.policy": "compact",
                                           "segment.bytes": "1200",
                                           "min.cleanable.dirty.ratio": "0.5"},
                   time_ms=clock)
    m.startup()
    lg = m.get_or_create_log("compacted", 0)
    plain = m.get_or_create_log("plain", 0)
    plain.update_config({"cleanup.policy": "delete"})
    for i in range(100):
        append(lg, kv(b"k%d" % (i % 4), b"v%d" % i, ts=clock.now))
    lg.roll()
    lg.update_high_watermark(lg.log_end_offset)
    results = m.clean_logs()
    assert list(results) == [("compacted", 0)] and results[("compacted", 0)].cleaned
    with open(tmp_path / "d" / "cleaner-offset-checkpoint") as f:
        assert f.read() == f"0\n1\ncompacted 0 {lg.log_end_offset}\n"
    assert m.clean_logs() == {}  # clean now: dirty ratio 0
