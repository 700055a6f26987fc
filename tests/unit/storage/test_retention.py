"""Retention by time and size, DeleteRecords, delayed file deletion."""

from __future__ import annotations

import os

import pytest

from moldau.storage import OffsetOutOfRange

from .helpers import FakeClock, append, make_batch, open_log, segment_files

DAY = 86_400_000


def build(tmp_path, clock, n=20, ts0=None, step=1000, **cfg):
    log = open_log(str(tmp_path / "t-0"), clock, segment_bytes=600, **cfg)
    ts0 = clock.now if ts0 is None else ts0
    for i in range(n):
        append(log, make_batch(2, ts0 + i * step, value_size=40))
    log.update_high_watermark(log.log_end_offset)
    return log


def test_retention_by_time_deletes_old_segments_only(tmp_path):
    clock = FakeClock()
    log = build(tmp_path, clock, retention_ms=DAY)
    segs = log.segments
    assert len(segs) >= 5
    assert log.delete_old_segments() == 0
    # Move time so that segments whose newest record is older than a day expire.
    cutoff_seg = segs[2]
    clock.now = cutoff_seg.max_timestamp + DAY + 1
    deleted = log.delete_old_segments()
    assert deleted == 3
    assert log.log_start_offset == segs[3].base_offset
    assert log.segments[0].base_offset == segs[3].base_offset
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 100)
    assert len(log.read(log.log_start_offset, 100).records) > 0


def test_retention_by_time_can_delete_active_segment_and_rolls(tmp_path):
    clock = FakeClock()
    log = build(tmp_path, clock, retention_ms=1000)
    leo = log.log_end_offset
    clock.advance(10 * DAY)
    n = len(log.segments)
    assert log.delete_old_segments() == n
    assert len(log.segments) == 1
    assert log.active_segment.size == 0
    assert log.active_segment.base_offset == leo
    assert log.log_start_offset == leo == log.log_end_offset
    # Nothing more to delete: an empty active segment stays.
    clock.advance(DAY)
    assert log.delete_old_segments() == 0
    info = append(log, make_batch(1, clock.now))
    assert info.first_offset == leo


def test_retention_never_passes_high_watermark(tmp_path):
    clock = FakeClock()
    log = build(tmp_path, clock, retention_ms=1000)
    segs = log.segments
    log.update_high_watermark(segs[2].base_offset)
    clock.advance(10 * DAY)
    assert log.delete_old_segments() == 2
    assert log.log_start_offset == segs[2].base_offset


def test_retention_by_size(tmp_path):
    clock = FakeClock()
    log = build(tmp_path, clock, n=30, retention_bytes=1500)
    total = log.size_in_bytes
    deleted = log.delete_old_segments()
    assert deleted > 0
    assert log.size_in_bytes <= 1500 + log.segments[0].size
    assert log.size_in_bytes < total
    # Deleting one more segment would have gone below the limit: Kafka keeps it.
    assert log.size_in_bytes - log.segments[0].size < 1500
    assert log.delete_old_segments() == 0


def test_retention_disabled_for_compact_only_topics(tmp_path):
    clock = FakeClock()
    log = build(tmp_path, clock, retention_ms=1000, cleanup_policy="compact")
    clock.advance(10 * DAY)
    assert log.delete_old_segments() == 0


def test_infinite_retention(tmp_path):
    clock = FakeClock()
    log = build(tmp_path, clock, retention_ms=-1)
    clock.advance(1000 * DAY)
    assert log.delete_old_segments() == 0


def test_deleted_files_removed_after_delay(tmp_path):
    clock = FakeClock()
    log = build(tmp_path, clock, retention_ms=1000, file_delete_delay_ms=60_000)
    clock.advance(10 * DAY)
    log.delete_old_segments()
    deleted = [n for n in os.listdir(log.dir) if n.endswith(".deleted")]
    assert any(n.endswith(".log.deleted") for n in deleted)
    assert segment_files(log.dir) == [f"{log.active_segment.base_offset:020d}.log"]
    assert log.remove_deleted_files(clock.now + 59_999) == 0
    assert log.remove_deleted_files(clock.now + 60_000) > 0
    assert not [n for n in os.listdir(log.dir) if n.endswith(".deleted")]


def test_delete_records(tmp_path):
    clock = FakeClock()
    log = build(tmp_path, clock)
    segs = log.segments
    mid = segs[3].base_offset + 1
    assert log.delete_records_before(mid) == mid
    assert log.log_start_offset == mid
    assert log.segments[0].base_offset == segs[3].base_offset  # whole segments only
    with pytest.raises(OffsetOutOfRange):
        log.read(mid - 1, 100)
    # Lower values are a no-op, values above the high watermark are refused.
    assert log.delete_records_before(2) == mid
    log.update_high_watermark(log.log_end_offset - 2)
    with pytest.raises(OffsetOutOfRange):
        log.delete_records_before(log.log_end_offset)
    # Up to the high watermark is allowed.
    assert log.delete_records_before(log.high_watermark) == log.high_watermark


def test_delete_records_survives_restart_via_checkpoint_values(tmp_path):
    clock = FakeClock()
    log = build(tmp_path, clock)
    target = log.segments[2].base_offset + 1
    log.delete_records_before(target)
    log.close()
    reopened = open_log(str(tmp_path / "t-0"), clock, segment_bytes=600)
    # Without the checkpoint value the log starts at its first segment...
    assert reopened.log_start_offset == target - 1
    from moldau.storage import load_log

    reopened.close()
    again = load_log(str(tmp_path / "t-0"), reopened.config, time_ms=clock,
                     log_start_offset=target, clean_shutdown=True)
    assert again.log_start_offset == target
