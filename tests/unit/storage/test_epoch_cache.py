"""Leader epoch cache: Kafka's checkpoint format, assign rules, OffsetForLeaderEpoch answers."""

from __future__ import annotations

import os

import pytest

from moldau.storage.epoch_cache import LeaderEpochCache
from moldau.storage.errors import LogDirError
from moldau.storage.fs import DEFAULT_FS

from .helpers import append, make_batch, open_log


def test_checkpoint_file_format_round_trip(tmp_path):
    cache = LeaderEpochCache(str(tmp_path), DEFAULT_FS)
    cache.assign(0, 0)
    cache.assign(1, 150)
    cache.assign(4, 300)
    text = (tmp_path / "leader-epoch-checkpoint").read_text()
    assert text == "0\n3\n0 0\n1 150\n4 300\n"
    again = LeaderEpochCache(str(tmp_path), DEFAULT_FS)
    assert again.entries == [(0, 0), (1, 150), (4, 300)]


def test_assign_rules():
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        c = LeaderEpochCache(d, DEFAULT_FS)
        assert c.assign(2, 10)
        assert not c.assign(2, 20)  # same epoch, later offset: no change
        assert c.assign(2, 5)  # same epoch, earlier start: replaced
        assert c.entries == [(2, 5)]
        c.assign(3, 50)
        c.assign(5, 70)
        c.assign(4, 60)  # lower epoch than the latest: later entries go
        assert c.entries == [(2, 5), (3, 50), (4, 60)]
        assert not c.assign(-1, 100)


def test_end_offset_for_epoch(tmp_path):
    c = LeaderEpochCache(str(tmp_path), DEFAULT_FS)
    assert c.end_offset_for(0, 100) == (-1, -1)
    for epoch, start in [(1, 10), (3, 40), (6, 90)]:
        c.assign(epoch, start)
    assert c.end_offset_for(6, 120) == (6, 120)  # latest epoch: log end offset
    assert c.end_offset_for(3, 120) == (3, 90)
    assert c.end_offset_for(4, 120) == (3, 90)  # unknown epoch between: floor epoch's end
    assert c.end_offset_for(0, 120) == (0, 10)  # smaller than all
    assert c.end_offset_for(7, 120) == (-1, -1)  # larger than all
    assert c.end_offset_for(-1, 120) == (-1, -1)
    assert c.epoch_for_offset(45) == 3 and c.epoch_for_offset(5) is None


def test_truncation(tmp_path):
    c = LeaderEpochCache(str(tmp_path), DEFAULT_FS)
    for epoch, start in [(1, 10), (3, 40), (6, 90)]:
        c.assign(epoch, start)
    c.truncate_from_end(40)
    assert c.entries == [(1, 10)]
    c.assign(3, 40)
    c.truncate_from_start(45)
    assert c.entries == [(3, 45)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n1\n3 45\n"


def test_malformed_checkpoint_stops_the_load_even_when_recovery_runs(tmp_path):
    """Recovery from the recovery point would rebuild only the epochs of the segments it
    scans, so a bad file is never dropped (Kafka takes the log dir offline)."""
    path = str(tmp_path / "t-0")
    log = open_log(path)
    append(log, make_batch(2), epoch=1)
    append(log, make_batch(2), epoch=3)
    assert log.epoch_cache.entries == [(1, 0), (3, 2)]
    log.close()
    checkpoint = os.path.join(path, "leader-epoch-checkpoint")
    with open(checkpoint, "w") as f:
        f.write("0\n7\n1 0\n")  # wrong count
    with pytest.raises(LogDirError, match=f"{checkpoint} says it holds 7 entries"):
        open_log(path)
    os.remove(checkpoint)
    log = open_log(path)  # unclean, recovery point 0: every batch header is read again
    assert log.epoch_cache.entries == [(1, 0), (3, 2)]
    assert log.end_offset_for_epoch(1) == (1, 2)
    assert log.end_offset_for_epoch(3) == (3, 4)


def test_log_truncation_truncates_epochs(tmp_path):
    log = open_log(str(tmp_path / "t-0"))
    append(log, make_batch(2), epoch=1)
    append(log, make_batch(2), epoch=2)
    append(log, make_batch(2), epoch=3)
    log.truncate_to(4)
    assert log.log_end_offset == 4
    assert log.epoch_cache.entries == [(1, 0), (2, 2)]
    log.assign_epoch_start_offset(5)
    assert log.latest_epoch() == 5
    assert log.end_offset_for_epoch(2) == (2, 4)
