"""Checkpoint files are read strictly (issue 11, defect 5): one bad line stops the
start with an error naming the file, the line and what is wrong, instead of the whole file
being dropped (which lost every log start offset and brought deleted records back); and a
topic name that the format cannot hold is never written into it."""

from __future__ import annotations

import os

import pytest

from moldau.broker.metadata.validation import validate_topic_name
from moldau.protocol.errors import ErrorCode
from moldau.storage import LogManager
from moldau.storage.checkpoints import (
    MalformedCheckpoint,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from moldau.storage.errors import LogDirError
from moldau.storage.fs import DEFAULT_FS

from .helpers import FakeClock, append, make_batch


@pytest.mark.parametrize("name", ["orders\n", "orders\r\n", "\norders", "ord ers", "orders\t"])
def test_topic_names_must_match_in_full(name: str) -> None:
    problem = validate_topic_name(name)
    assert problem is not None and problem[0] == ErrorCode.invalid_topic_exception


def test_a_name_the_format_cannot_hold_is_left_out_not_written(tmp_path) -> None:
    path = str(tmp_path / "log-start-offset-checkpoint")
    write_offset_checkpoint(DEFAULT_FS, path, {("good", 0): 7, ("legacy\n", 0): 3})
    assert read_offset_checkpoint(DEFAULT_FS, path) == {("good", 0): 7}


@pytest.mark.parametrize(("body", "line_no", "says"), [
    ("0\n2\norders 0 5\norders\n 1 9\n", 4, "topic partition offset"),
    ("0\n1\norders zero 5\n", 3, "integer"),
    ("0\nx\n", 2, "number of entries"),
    ("1\n0\n", 1, "unknown version"),
])
def test_the_first_bad_line_is_named(tmp_path, body: str, line_no: int, says: str) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_text(body)
    with pytest.raises(MalformedCheckpoint) as info:
        read_offset_checkpoint(DEFAULT_FS, str(path))
    assert info.value.line_no == line_no
    assert f"line {line_no} of {path}" in str(info.value) and says in str(info.value)


def test_a_wrong_entry_count_is_reported(tmp_path) -> None:
    path = tmp_path / "cp"
    path.write_text("0\n3\na 0 1\n")
    with pytest.raises(MalformedCheckpoint, match="says it holds 3 entries"):
        read_offset_checkpoint(DEFAULT_FS, str(path))


def _manager(log_dir) -> LogManager:
    return LogManager([str(log_dir)], {}, time_ms=FakeClock())


def test_start_up_stops_on_a_bad_log_start_checkpoint_and_keeps_the_file(tmp_path) -> None:
    log_dir = tmp_path / "data"
    m = _manager(log_dir)
    m.startup()
    lg = m.get_or_create_log("orders", 0)
    for i in range(4):
        append(lg, make_batch(1, 1000 + i))
    lg.roll()
    append(lg, make_batch(1, 2000))
    lg.update_high_watermark(lg.log_end_offset)
    lg.delete_records_before(2)
    m.shutdown()
    path = log_dir / "log-start-offset-checkpoint"
    good = path.read_text()
    path.write_text(good.replace("orders 0", "orders\n0", 1))
    with pytest.raises(LogDirError) as info:
        _manager(log_dir).startup()
    text = str(info.value)
    assert str(path) in text and "line 3" in text and "'orders'" in text
    assert "DeleteRecords" in text  # says what deleting the line would cost
    assert path.read_text() != good and os.path.exists(path)  # nothing rewritten
    path.write_text(good)
    again = _manager(log_dir)
    again.startup()
    restored = again.get_log("orders", 0)
    assert (restored.log_start_offset, restored.log_end_offset) == (2, 5)
    again.shutdown()


def test_a_bad_recovery_point_file_costs_a_full_recovery_and_is_logged(tmp_path,
                                                                       caplog) -> None:
    log_dir = tmp_path / "data"
    m = _manager(log_dir)
    m.startup()
    append(m.get_or_create_log("orders", 0), make_batch(3, 1000))
    m.shutdown()
    os.remove(log_dir / ".kafka_cleanshutdown")
    path = log_dir / "recovery-point-offset-checkpoint"
    path.write_text("0\n1\norders 0\n")
    again = _manager(log_dir)
    with caplog.at_level("ERROR"):
        stats = again.startup()
    assert stats.segments_recovered == 1 and again.get_log("orders", 0).log_end_offset == 3
    assert any(f"line 3 of {path}" in r.getMessage() for r in caplog.records
               if r.levelname == "ERROR")
    again.shutdown()


def test_start_up_stops_on_a_bad_high_watermark_checkpoint(tmp_path) -> None:
    log_dir = tmp_path / "data"
    m = _manager(log_dir)
    m.startup()
    append(m.get_or_create_log("orders", 0), make_batch(3, 1000))
    m.shutdown()
    path = log_dir / "replication-offset-checkpoint"
    path.write_text("0\n1\norders 0 x\n")
    with pytest.raises(LogDirError, match=f"line 3 of {path}"):
        _manager(log_dir).startup()


def test_start_up_stops_on_a_bad_leader_epoch_checkpoint_and_the_fix_works(tmp_path) -> None:
    """After a clean shutdown no segment is recovered, so a leader-epoch-checkpoint that was
    dropped for one bad line lost the partition's epochs for good (OffsetForLeaderEpoch and
    ListOffsets then answered without them). Now the start stops, naming the file, the line
    and the fix, and following the fix brings every epoch back."""
    log_dir = tmp_path / "data"
    m = _manager(log_dir)
    m.startup()
    lg = m.get_or_create_log("orders", 0)
    append(lg, make_batch(2, 1000), epoch=1)
    lg.roll()
    append(lg, make_batch(2, 2000), epoch=3)
    assert lg.epoch_cache.entries == [(1, 0), (3, 2)]
    m.shutdown()
    path = log_dir / "orders-0" / "leader-epoch-checkpoint"
    assert path.read_text() == "0\n2\n1 0\n3 2\n"
    path.write_text("0\n2\n1 0\n3,2\n")
    with pytest.raises(LogDirError) as info:
        _manager(log_dir).startup()
    text = str(info.value)
    assert f"line 4 of {path}" in text and "'3,2'" in text and "epoch startOffset" in text
    assert "orders-0" in text and ".kafka_cleanshutdown" in text
    assert path.read_text() == "0\n2\n1 0\n3,2\n"  # nothing rewritten
    # The fix the message gives: delete the file with the marker and the recovery points.
    for stale in (path, log_dir / ".kafka_cleanshutdown",
                  log_dir / "recovery-point-offset-checkpoint"):
        os.remove(stale)
    again = _manager(log_dir)
    again.startup()
    restored = again.get_log("orders", 0)
    assert restored.epoch_cache.entries == [(1, 0), (3, 2)]
    assert restored.end_offset_for_epoch(1) == (1, 2)
    again.shutdown()
