"""Offset and time index files: Kafka's byte layout, lookups, truncation, sanity checks."""

from __future__ import annotations

import struct

import pytest

from moldau.storage.errors import CorruptIndex
from moldau.storage.fs import DEFAULT_FS
from moldau.storage.index import OffsetIndex, TimeIndex


def test_offset_index_layout_lookup_truncate(tmp_path):
    path = str(tmp_path / "00000000000000000100.index")
    idx = OffsetIndex(path, 100, 1000, DEFAULT_FS)
    idx.open_for_append()
    for off, pos in [(105, 4200), (110, 8400), (130, 12800)]:
        idx.append(off, pos)
    idx.append(120, 99999)  # not increasing: ignored, like Kafka refuses it
    with open(path, "rb") as f:
        assert f.read() == b""  # entries reach the file when the segment flushes/rolls/closes
    idx.sync()
    with open(path, "rb") as f:
        raw = f.read()
    assert raw == struct.pack(">iiiiii", 5, 4200, 10, 8400, 30, 12800)
    assert idx.lookup(99) == 0 and idx.lookup(104) == 0
    assert idx.lookup(105) == 4200 and idx.lookup(129) == 8400 and idx.lookup(10**9) == 12800
    assert idx.floor_position(8399) == 4200 and idx.floor_position(8400) == 8400
    idx.truncate_to(110)
    assert list(idx.rel) == [5]
    with open(path, "rb") as f:
        assert f.read() == struct.pack(">ii", 5, 4200)
    idx.close()
    loaded = OffsetIndex(path, 100, 1000, DEFAULT_FS)
    loaded.load(log_size=5000)
    assert list(loaded.rel) == [5] and list(loaded.positions) == [4200]
    with pytest.raises(CorruptIndex):
        OffsetIndex(path, 100, 1000, DEFAULT_FS).load(log_size=4200)  # entry past log end


def test_time_index_layout_and_lookup(tmp_path):
    path = str(tmp_path / "00000000000000000000.timeindex")
    idx = TimeIndex(path, 0, 1000, DEFAULT_FS)
    idx.open_for_append()
    idx.maybe_append(-1, 0)  # no timestamp: nothing
    idx.maybe_append(1000, 3)
    idx.maybe_append(1000, 7)  # not larger: nothing
    idx.maybe_append(900, 9)
    idx.maybe_append(2000, 9)
    idx.sync()
    with open(path, "rb") as f:
        assert f.read() == struct.pack(">qiqi", 1000, 3, 2000, 9)
    assert idx.lookup(999) == (-1, 0)
    assert idx.lookup(1500) == (1000, 3) and idx.lookup(5000) == (2000, 9)
    assert idx.last_entry() == (2000, 9)
    idx.truncate_to(9)
    assert idx.last_entry() == (1000, 3)
    idx.close()
    loaded = TimeIndex(path, 0, 1000, DEFAULT_FS)
    loaded.load()
    assert loaded.last_entry() == (1000, 3)


def test_index_full(tmp_path):
    idx = OffsetIndex(str(tmp_path / "x.index"), 0, 2, DEFAULT_FS)
    idx.append(1, 0)
    assert not idx.is_full
    idx.append(2, 10)
    assert idx.is_full


def test_preallocated_kafka_index_with_zero_tail_is_rejected(tmp_path):
    # A Kafka index left preallocated by a crash ends in zero entries: not trusted.
    path = str(tmp_path / "00000000000000000000.index")
    with open(path, "wb") as f:
        f.write(struct.pack(">ii", 4, 4100) + bytes(8 * 10))
    with pytest.raises(CorruptIndex):
        OffsetIndex(path, 0, 100, DEFAULT_FS).load(log_size=10_000)
