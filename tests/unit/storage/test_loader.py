"""Opening logs: clean-shutdown fast path, index sanity checks, stray files, swap completion."""

from __future__ import annotations

import os
import shutil

from moldau.protocol.records.batch import check_crc, iter_batches
from moldau.storage import LoadStats, LogConfig, load_log

from .helpers import CountingFS, FakeClock, append, make_batch, open_log, segment_files

CFG = LogConfig.from_dict({"segment.bytes": 3000, "index.interval.bytes": 256})


def build(path, n=200, cfg=CFG):
    log = load_log(path, cfg, time_ms=FakeClock())
    for i in range(n):
        append(log, make_batch(2, 1000 + i, value_size=40), epoch=1)
    return log


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def snapshot_reads(log):
    return {off: bytes(log.read(off, 1).records) for off in range(0, log.log_end_offset, 5)}


def test_clean_shutdown_skips_the_scan(tmp_path):
    path = str(tmp_path / "t-0")
    log = build(path)
    expected = snapshot_reads(log)
    total = log.size_in_bytes
    log.flush()
    log.close()
    fs = CountingFS()
    stats = LoadStats()
    log = load_log(path, CFG, fs=fs, clean_shutdown=True, stats=stats)
    assert stats.segments > 5
    assert stats.batches_scanned == 0 and stats.segments_recovered == 0
    assert stats.indexes_rebuilt == 0 and stats.producer_batches_replayed == 0
    # Only the tail after each segment's last index entry was read (a few KB per segment).
    assert fs.bytes_read < total / 4
    assert snapshot_reads(log) == expected


def test_unclean_start_recovers_only_after_the_recovery_point(tmp_path):
    path = str(tmp_path / "t-0")
    log = build(path)
    segs = log.segments
    recovery_point = segs[-2].base_offset + 1  # inside the second-to-last segment
    log.close_handles()
    stats = LoadStats()
    log = load_log(path, CFG, recovery_point=recovery_point, stats=stats)
    assert stats.segments_recovered == 2
    assert stats.batches_scanned == sum(
        1 for s in segs[-2:] for _ in iter_batches(read_bytes(s.log_path)))
    assert log.recovery_point == recovery_point
    assert log.log_end_offset == 400


def test_missing_index_is_rebuilt_identically(tmp_path):
    path = str(tmp_path / "t-0")
    log = build(path)
    seg = log.segments[1]
    index_bytes = read_bytes(seg.index.path)
    time_bytes = read_bytes(seg.time_index.path)
    expected = snapshot_reads(log)
    log.close()
    os.remove(seg.index.path)
    os.remove(seg.time_index.path)
    stats = LoadStats()
    log = load_log(path, CFG, clean_shutdown=True, stats=stats)
    assert stats.indexes_rebuilt == 1 and stats.segments_recovered == 1
    assert read_bytes(seg.index.path) == index_bytes
    assert read_bytes(seg.time_index.path) == time_bytes
    assert snapshot_reads(log) == expected


def test_corrupt_indexes_are_rebuilt(tmp_path):
    path = str(tmp_path / "t-0")
    log = build(path)
    expected = snapshot_reads(log)
    segs = log.segments
    log.close()
    with open(segs[0].index.path, "ab") as f:
        f.write(b"\x00\x01\x02")  # not a multiple of 8
    with open(segs[1].index.path, "r+b") as f:
        f.seek(8)
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x00")  # offsets out of order
    with open(segs[2].time_index.path, "r+b") as f:
        f.write(b"\x7f" * 12)  # timestamps out of order
    with open(segs[3].index.path, "r+b") as f:
        f.seek(4)
        f.write(b"\x7f\xff\xff\xff")  # position past the end of the log
    stats = LoadStats()
    log = load_log(path, CFG, clean_shutdown=True, stats=stats)
    assert stats.indexes_rebuilt == 4
    assert snapshot_reads(log) == expected


def test_stray_files_cleaned(tmp_path):
    path = str(tmp_path / "t-0")
    log = build(path, n=50)
    log.close()
    for name in ("00000000000000000010.log.deleted", "00000000000000000099.log.cleaned",
                 "00000000000000000099.index.cleaned", "leader-epoch-checkpoint.tmp",
                 "00000000000000099999.index", "00000000000000099999.timeindex"):
        with open(os.path.join(path, name), "wb") as f:
            f.write(b"junk")
    stats = LoadStats()
    log = load_log(path, CFG, clean_shutdown=True, stats=stats)
    assert stats.stray_files_removed == 6
    names = os.listdir(path)
    assert not [n for n in names if n.endswith((".deleted", ".cleaned", ".tmp"))]
    assert "00000000000000099999.index" not in names
    assert log.log_end_offset == 100


def test_interrupted_swap_is_completed(tmp_path):
    """A compaction that crashed after writing ``.swap`` files: the swap replaces the segments
    in its offset range, exactly as Kafka's loader completes it."""
    path = str(tmp_path / "t-0")
    log = build(path, n=60)
    segs = log.segments
    assert len(segs) >= 3
    # "Compacted" replacement for the first two segments: only batches of the first segment.
    replacement = read_bytes(segs[0].log_path)
    log.close()
    shutil.copy(segs[0].log_path, segs[0].log_path + ".swap")
    with open(segs[0].log_path + ".swap", "ab") as f:
        f.write(read_bytes(segs[1].log_path))
    # The old second segment is still there (crash before it was renamed to .deleted).
    stats = LoadStats()
    log = load_log(path, CFG, clean_shutdown=True, stats=stats)
    assert stats.swaps_completed == 1
    assert segment_files(path)[0] == "00000000000000000000.log"
    assert f"{segs[1].base_offset:020d}.log" not in segment_files(path)
    data = read_bytes(os.path.join(path, "00000000000000000000.log"))
    assert data.startswith(replacement)
    assert log.log_end_offset == 120
    for off in range(0, 120):
        r = log.read(off, 1)
        pos_h = list(iter_batches(r.records))
        assert pos_h and pos_h[0][1].base_offset <= off <= pos_h[0][1].last_offset
        assert check_crc(r.records, 0, pos_h[0][1])


def test_swap_above_cleaned_file_is_discarded(tmp_path):
    path = str(tmp_path / "t-0")
    log = build(path, n=60)
    segs = log.segments
    log.close()
    shutil.copy(segs[1].log_path, segs[1].log_path + ".swap")
    shutil.copy(segs[0].log_path, segs[0].log_path + ".cleaned")
    stats = LoadStats()
    log = load_log(path, CFG, clean_shutdown=True, stats=stats)
    assert stats.swaps_completed == 0
    assert log.log_end_offset == 120
    assert len(log.segments) == len(segs)


def test_log_start_beyond_end_restarts_empty(tmp_path):
    path = str(tmp_path / "t-0")
    log = build(path, n=10)
    log.close()
    log = load_log(path, CFG, clean_shutdown=True, log_start_offset=500)
    assert (log.log_start_offset, log.log_end_offset) == (500, 500)
    assert append(log, make_batch(1)).first_offset == 500


def test_empty_dir_gets_a_segment_at_log_start(tmp_path):
    log = load_log(str(tmp_path / "new-7"), CFG, log_start_offset=42)
    assert (log.topic, log.partition) == ("new", 7)
    assert log.log_end_offset == 42 and segment_files(log.dir) == [f"{42:020d}.log"]


def test_stale_snapshots_above_log_end_removed(tmp_path):
    path = str(tmp_path / "t-0")
    log = open_log(path)
    append(log, make_batch(2, producer_id=1, producer_epoch=0, base_sequence=0))
    log.close()
    with open(os.path.join(path, f"{999:020d}.snapshot"), "wb") as f:
        f.write(b"x")
    log = load_log(path, CFG, clean_shutdown=True)
    assert f"{999:020d}.snapshot" not in os.listdir(path)
