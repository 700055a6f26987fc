"""ListOffsets lookups: offset_for_timestamp, max timestamp, special timestamps."""

from __future__ import annotations

from moldau.storage.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
)

from .helpers import FakeClock, append, make_batch, open_log


def test_offset_for_timestamp_exact_record(tmp_path):
    log = open_log(str(tmp_path / "t-0"), segment_bytes=800, index_interval_bytes=100)
    # batch i holds 3 records with timestamps 1000+10i, +1, +2
    for i in range(60):
        append(log, make_batch(3, 1000 + 10 * i, ts_step=1), epoch=4)
    assert len(log.segments) > 3
    for i in range(0, 60, 7):
        r = log.offset_for_timestamp(1000 + 10 * i + 1)
        assert (r.timestamp, r.offset, r.leader_epoch) == (1000 + 10 * i + 1, 3 * i + 1, 4)
        # Between batches: the first record of the next batch.
        r = log.offset_for_timestamp(1000 + 10 * i + 5)
        assert (r.timestamp, r.offset) == (1000 + 10 * (i + 1), 3 * (i + 1)) or i == 59
    assert log.offset_for_timestamp(0).offset == 0
    assert log.offset_for_timestamp(10_000_000) is None


def test_offset_for_timestamp_out_of_order_timestamps(tmp_path):
    log = open_log(str(tmp_path / "t-0"), index_interval_bytes=1)
    for ts in (5000, 1000, 7000, 3000, 9000):
        append(log, make_batch(1, ts))
    assert log.offset_for_timestamp(4000).offset == 0  # first record with ts >= 4000
    assert log.offset_for_timestamp(6000).offset == 2
    assert log.offset_for_timestamp(8000).offset == 4


def test_offset_for_timestamp_respects_log_start(tmp_path):
    log = open_log(str(tmp_path / "t-0"))
    for i in range(5):
        append(log, make_batch(2, 1000 + i * 100, ts_step=1))
    log.update_high_watermark(log.log_end_offset)
    log.delete_records_before(3)
    assert log.offset_for_timestamp(0).offset == 3


def test_max_timestamp(tmp_path):
    log = open_log(str(tmp_path / "t-0"), segment_bytes=500)
    assert log.max_timestamp_and_offset() is None
    stamps = [3000, 9000, 1000, 9000, 2000, 8999]
    for i, ts in enumerate(stamps):
        # records: ts-2, ts, ts-1 -> max in the middle record
        buf = make_batch(3, 0, values=[b"a", b"b", b"c"])
        from moldau.protocol.records.codec import build_batch

        buf = bytearray(build_batch([(None, b"a", [], ts - 2), (None, b"b", [], ts),
                                     (None, b"c", [], ts - 1)]))
        append(log, buf, epoch=i)
    r = log.max_timestamp_and_offset()
    assert (r.timestamp, r.offset, r.leader_epoch) == (9000, 4, 1)  # first batch holding 9000
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) == r


def test_max_timestamp_log_append_time(tmp_path):
    clock = FakeClock(50_000)
    log = open_log(str(tmp_path / "t-0"), clock, message_timestamp_type="LogAppendTime")
    append(log, make_batch(3, 1))
    clock.advance(5)
    append(log, make_batch(3, 1))
    r = log.max_timestamp_and_offset()
    assert (r.timestamp, r.offset) == (50_005, 3)
    assert log.offset_for_timestamp(50_001).offset == 3


def test_special_timestamps(tmp_path):
    log = open_log(str(tmp_path / "t-0"))
    append(log, make_batch(4, 100), epoch=2)
    append(log, make_batch(4, 200), epoch=3)
    log.update_high_watermark(8)
    log.delete_records_before(2)
    assert tuple(log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP)) == (-1, 2, 2)
    assert tuple(log.fetch_offset_by_timestamp(LATEST_TIMESTAMP)) == (-1, 8, 3)
    assert tuple(log.fetch_offset_by_timestamp(150)) == (200, 4, 3)


def test_time_index_survives_reopen(tmp_path):
    path = str(tmp_path / "t-0")
    log = open_log(path, segment_bytes=700, index_interval_bytes=50)
    for i in range(40):
        append(log, make_batch(2, 10_000 + 100 * i, ts_step=10))
    before = [log.offset_for_timestamp(10_000 + 37 * k) for k in range(100)]
    seg_max = [s.max_timestamp for s in log.segments]
    log.close()
    from moldau.storage import load_log

    log = load_log(path, log.config, clean_shutdown=True)
    assert [s.max_timestamp for s in log.segments] == seg_max
    assert [log.offset_for_timestamp(10_000 + 37 * k) for k in range(100)] == before
