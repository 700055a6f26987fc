"""Storage faults: torn tails, flipped bytes, garbage, failing writes, crash without close.

Durability claim tested here: data written with ``pwrite`` (no fsync) survives the death of the
process (it is in the page cache); recovery keeps every complete, CRC-valid batch and drops the
first bad batch and everything after it. Nothing here claims survival of a power loss.
"""

from __future__ import annotations

import os
import random

import pytest

from moldau.protocol.records.batch import check_crc, iter_batches
from moldau.storage import KafkaStorageError, LoadStats, LogConfig, load_log
from tests.unit.storage.helpers import FailingFS, FakeClock, append, make_batch

CFG = LogConfig.from_dict({"segment.bytes": 4000, "index.interval.bytes": 300})


def build(path, n=120, fs=None):
    kw = {"fs": fs} if fs is not None else {}
    log = load_log(path, CFG, time_ms=FakeClock(), **kw)
    batches = []
    for i in range(n):
        buf = make_batch(1 + i % 3, 1000 + i, value_size=30 + i % 20)
        append(log, buf, epoch=1)
        batches.append(bytes(buf))
    return log, batches


def assert_serves_only_valid_prefix(log, batches):
    """Every readable offset returns the original, CRC-valid batch; the log holds exactly a
    prefix of what was written."""
    out = bytearray()
    off = log.log_start_offset
    while off < log.log_end_offset:
        r = log.read(off, 1 << 20)
        for pos, h in iter_batches(r.records):
            assert check_crc(r.records, pos, h), f"served a corrupt batch at offset {h.base_offset}"
        out += r.records
        off = list(iter_batches(r.records))[-1][1].next_offset
    n = 0
    pos = 0
    for b in batches:
        if bytes(out[pos:pos + len(b)]) != b:
            break
        pos += len(b)
        n += 1
    assert pos == len(out), "log holds bytes that were never written"
    return n


def crash(log):
    log.close_handles()  # like kill -9: no flush, no snapshot, no clean marker


def test_torn_tail_is_truncated(tmp_path):
    path = str(tmp_path / "t-0")
    log, batches = build(path)
    leo = log.log_end_offset
    last = log.active_segment.log_path
    crash(log)
    with open(last, "ab") as f:
        f.write(make_batch(3, 5)[:40])  # a partial batch: the header is cut
    stats = LoadStats()
    log = load_log(path, CFG, stats=stats)
    assert stats.bytes_truncated == 40
    assert log.log_end_offset == leo
    assert assert_serves_only_valid_prefix(log, batches) == len(batches)
    assert append(log, make_batch(1)).first_offset == leo


def test_partial_batch_body_is_truncated(tmp_path):
    path = str(tmp_path / "t-0")
    log, batches = build(path)
    leo = log.log_end_offset
    crash(log)
    extra = make_batch(2, 7, value_size=100)
    with open(log.active_segment.log_path, "ab") as f:
        f.write(extra[: len(extra) - 10])  # header complete, body cut short
    log = load_log(path, CFG)
    assert log.log_end_offset == leo
    assert_serves_only_valid_prefix(log, batches)


@pytest.mark.parametrize(
    "where", ["records", "crc", "attributes", "base_offset_up", "base_offset_down", "length"]
)
def test_flipped_bytes_truncate_at_the_bad_batch(tmp_path, where):
    path = str(tmp_path / "t-0")
    log, batches = build(path)
    segs = log.segments
    victim_seg = segs[-3]  # not the last: later segments must be dropped too
    with open(victim_seg.log_path, "rb") as f:
        data = f.read()
    positions = [(p, h) for p, h in iter_batches(data)]
    pos, h = positions[len(positions) // 2]
    crash(log)
    # The CRC does not cover baseOffset or batchLength: those are caught by offset order,
    # relative-offset range and length checks.
    with open(victim_seg.log_path, "r+b") as f:
        if where == "base_offset_down":
            f.seek(pos)
            f.write((h.base_offset - 1).to_bytes(8, "big"))
        else:
            at = pos + {"records": 70, "crc": 18, "attributes": 22, "base_offset_up": 2,
                        "length": 9}[where]
            f.seek(at)
            byte = f.read(1)[0]
            f.seek(at)
            f.write(bytes([byte ^ 0x80]))
    stats = LoadStats()
    log = load_log(path, CFG, stats=stats)  # recovery point 0: everything is scanned
    assert log.log_end_offset == h.base_offset
    assert stats.segments_dropped == 2
    assert len(log.segments) == len(segs) - 2
    kept = assert_serves_only_valid_prefix(log, batches)
    assert kept == sum(1 for b in batches if int.from_bytes(b[:8], "big") < h.base_offset)
    assert sum(len(b) for b in batches[:kept]) == sum(s.size for s in log.segments)
    # New appends continue right after the last good batch.
    assert append(log, make_batch(1)).first_offset == h.base_offset


def test_garbage_appended_is_truncated(tmp_path):
    path = str(tmp_path / "t-0")
    log, batches = build(path)
    leo = log.log_end_offset
    crash(log)
    rng = random.Random(3)
    with open(log.active_segment.log_path, "ab") as f:
        f.write(bytes(rng.randrange(256) for _ in range(5000)))
    log = load_log(path, CFG)
    assert log.log_end_offset == leo
    assert assert_serves_only_valid_prefix(log, batches) == len(batches)


def test_garbage_after_clean_shutdown_is_still_caught(tmp_path):
    path = str(tmp_path / "t-0")
    log, batches = build(path)
    leo = log.log_end_offset
    last = log.active_segment.log_path
    log.close()
    with open(last, "ab") as f:
        f.write(b"\x00" * 30 + b"\xff" * 70)
    stats = LoadStats()
    log = load_log(path, CFG, clean_shutdown=True, stats=stats)
    assert stats.segments_recovered == 1
    assert log.log_end_offset == leo
    assert_serves_only_valid_prefix(log, batches)


def test_crash_without_close_keeps_every_acknowledged_batch(tmp_path):
    path = str(tmp_path / "t-0")
    log, batches = build(path, n=300)
    leo = log.log_end_offset
    del log  # dropped without close: fds leak until GC, nothing flushed or snapshotted
    stats = LoadStats()
    log = load_log(path, CFG, stats=stats)
    assert stats.bytes_truncated == 0
    assert log.log_end_offset == leo
    assert assert_serves_only_valid_prefix(log, batches) == 300


def test_failed_write_is_rolled_back_and_not_acknowledged(tmp_path):
    fs = FailingFS()
    path = str(tmp_path / "t-0")
    log, batches = build(path, n=20, fs=fs)
    leo = log.log_end_offset
    size = log.active_segment.size
    fs.fail_writes = True
    fs.torn_bytes = 25
    with pytest.raises(KafkaStorageError):
        append(log, make_batch(3))
    assert os.path.getsize(log.active_segment.log_path) == size  # torn bytes removed
    assert log.log_end_offset == leo and not log.offline
    fs.fail_writes = False
    buf = make_batch(3)
    assert append(log, buf).first_offset == leo
    batches.append(bytes(buf))
    assert_serves_only_valid_prefix(log, batches)


def test_failed_write_and_failed_rollback_take_the_log_offline(tmp_path):
    fs = FailingFS()
    path = str(tmp_path / "t-0")
    log, batches = build(path, n=20, fs=fs)
    leo = log.log_end_offset
    fs.fail_writes = True
    fs.torn_bytes = 25
    fs.fail_truncate = True
    with pytest.raises(KafkaStorageError):
        append(log, make_batch(3))
    assert log.offline
    with pytest.raises(KafkaStorageError):
        log.read(0, 100)
    with pytest.raises(KafkaStorageError):
        append(log, make_batch(1))
    # After a restart recovery removes the torn bytes.
    log.close_handles()
    log = load_log(path, CFG)
    assert log.log_end_offset == leo
    assert assert_serves_only_valid_prefix(log, batches) == 20


def test_failed_fsync_takes_log_offline(tmp_path):
    fs = FailingFS()
    log, _ = build(str(tmp_path / "t-0"), n=5, fs=fs)
    fs.fail_fsync = True
    with pytest.raises(KafkaStorageError):
        log.flush()
    assert log.offline and log.recovery_point == 0
