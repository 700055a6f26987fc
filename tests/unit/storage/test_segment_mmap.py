"""Zero-copy reads: large reads come from a memory map; views outlive truncation, deletion and
close without SIGBUS and keep the bytes they showed."""

from __future__ import annotations

import os

from moldau.storage.segment import MMAP_READ_MIN

from .helpers import FakeClock, append, headers_of, make_batch, open_log, records_of


def _fill(log, batches: int = 40, count: int = 20, value_size: int = 2000) -> list[bytes]:
    out = []
    for i in range(batches):
        buf = make_batch(count, ts=1_000 + i, value_size=value_size)
        append(log, buf)
        out.append(bytes(buf))
    return out


def test_large_reads_are_views_of_a_mapping_with_the_same_bytes(tmp_path) -> None:
    log = open_log(str(tmp_path / "t-0"))
    _fill(log)
    small = log.read(0, 4096)
    big = log.read(0, 1 << 20)
    assert isinstance(big.records, memoryview) and len(big.records) >= MMAP_READ_MIN
    assert isinstance(big.records.obj, __import__("mmap").mmap)
    seg = log.active_segment
    with open(seg.log_path, "rb") as f:
        on_disk = f.read()
    assert bytes(big.records) == on_disk[: len(big.records)]
    assert bytes(small.records) == on_disk[: len(small.records)]
    offsets = [h.base_offset for h in headers_of(big.records)]
    assert offsets == list(range(0, 20 * len(offsets), 20)) and len(offsets) >= 20
    # a read within the mapping reuses it; a small one past its end (the growing tail) is a
    # plain pread; a large one remaps
    _fill(log, batches=20)
    assert log.read(0, 100_000).records.obj is big.records.obj
    tail = log.read(800, 100_000).records
    assert not isinstance(tail, memoryview) or not isinstance(tail.obj, type(big.records.obj))
    again = log.read(0, 10 << 20)
    assert len(again.records) > len(big.records)
    assert records_of(again.records)[-1][0] == 1199
    log.close()


def test_truncation_with_a_live_view_keeps_the_view_and_shrinks_the_log(tmp_path) -> None:
    log = open_log(str(tmp_path / "t-0"), FakeClock())
    _fill(log)
    view = log.read(0, 1 << 20).records
    assert isinstance(view, memoryview)
    before = bytes(view)
    log.truncate_to(100)  # what a follower does after a leader change
    assert log.log_end_offset == 100
    # the view still shows the old bytes (its file is kept alive, not cut under it)
    assert bytes(view) == before
    seg = log.active_segment
    assert os.path.getsize(seg.log_path) == seg.size < len(before)
    assert not os.path.exists(seg.log_path + ".shrink")
    # appends continue at the new end, in the new file
    append(log, make_batch(3))
    assert [r[0] for r in records_of(log.read(100, 1 << 20).records)] == [100, 101, 102]
    del view
    log.close()
    reopened = open_log(str(tmp_path / "t-0"), FakeClock())
    assert reopened.log_end_offset == 103
    reopened.close()


def test_views_survive_close_and_deletion(tmp_path) -> None:
    log = open_log(str(tmp_path / "t-0"))
    _fill(log)
    view = log.read(0, 1 << 20).records
    expected = bytes(view)
    log.close()
    for name in os.listdir(tmp_path / "t-0"):
        os.remove(tmp_path / "t-0" / name)
    assert bytes(view) == expected


def test_truncation_without_views_cuts_in_place(tmp_path) -> None:
    log = open_log(str(tmp_path / "t-0"), FakeClock())
    _fill(log)
    seg = log.active_segment
    ino = os.stat(seg.log_path).st_ino
    data = log.read(0, 1 << 20).records
    del data  # no view left: the mapping can be closed and the file cut in place
    log.truncate_to(100)
    assert os.stat(seg.log_path).st_ino == ino
    assert os.path.getsize(seg.log_path) == seg.size
    log.close()
