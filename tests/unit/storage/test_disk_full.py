"""Storage on a full disk or without file descriptors, by fault injection (issue 11, defects 6
and 9; the real thing, a full tmpfs and a lowered RLIMIT_NOFILE, is in
tests/integration/test_storage_limits.py): failures are logged once per log dir, a failed
roll leaves the log online, a failed creation of many logs leaves none of them, and every
write works again once the cause is gone."""

from __future__ import annotations

import errno
import os

from moldau.storage import LogManager
from moldau.storage.errors import KafkaStorageError
from moldau.storage.health import DiskHealth

from .helpers import FailingFS, FakeClock, append, make_batch, open_log, records_of


class NoSpaceFS(FailingFS):
    """Every write (data, snapshots, checkpoints) fails with ENOSPC while ``full``."""

    def __init__(self) -> None:
        super().__init__()
        self.full = False

    def pwrite(self, fd, data, offset):  # type: ignore[no-untyped-def]
        if self.full:
            raise OSError(errno.ENOSPC, "No space left on device (injected)")
        return super().pwrite(fd, data, offset)


class FewDescriptorsFS(FailingFS):
    """``open`` fails with EMFILE after ``left`` more successful opens (None: never)."""

    def __init__(self) -> None:
        super().__init__()
        self.left: int | None = None

    def open(self, path, flags=os.O_RDWR | os.O_CREAT, mode=0o644):  # type: ignore[no-untyped-def]
        if self.left is not None:
            if self.left <= 0:
                raise OSError(errno.EMFILE, "Too many open files (injected)")
            self.left -= 1
        return super().open(path, flags, mode)


def test_a_roll_on_a_full_disk_fails_the_append_and_leaves_the_log_online(tmp_path,
                                                                         caplog) -> None:
    caplog.set_level("INFO")
    fs = NoSpaceFS()
    log = open_log(str(tmp_path / "t-0"), fs=fs, segment_bytes=300)
    health = DiskHealth()
    log._health = health
    append(log, make_batch(1, 1000, value_size=200))
    fs.full = True
    for _ in range(3):
        try:
            append(log, make_batch(1, 1001, value_size=200))  # needs a roll
        except KafkaStorageError as exc:
            assert "not acknowledged" in exc.message
        else:
            raise AssertionError("the append on a full disk succeeded")
    assert not log.offline and len(log.segments) == 1
    # The new segment's files and producer snapshot were taken back.
    assert [n for n in os.listdir(tmp_path / "t-0") if n.startswith("00000000000000000001")
            ] == []
    failing = [r for r in caplog.records if "are failing" in r.getMessage()]
    assert len(failing) == 1 and str(tmp_path) in failing[0].getMessage()
    fs.full = False
    info = append(log, make_batch(1, 1002, value_size=200))
    assert info.first_offset == 1 and len(log.segments) == 2
    assert [r[0] for r in records_of(log.read(0, 1 << 20).records)] == [0]
    assert [r[0] for r in records_of(log.read(1, 1 << 20).records)] == [1]
    assert not health.failing
    assert any("work again" in r.getMessage() for r in caplog.records)
    log.close()


def test_a_failed_batch_of_new_logs_leaves_none_of_them(tmp_path) -> None:
    fs = FewDescriptorsFS()
    manager = LogManager([str(tmp_path / "data")], {}, fs=fs, time_ms=FakeClock())
    manager.startup()
    fs.left = 12  # enough for a few logs, not for ten
    specs = [("t", p, None, "AAAAAAAAAAAAAAAAAAAAAA") for p in range(10)]
    try:
        manager.create_logs(specs, atomic=True)
    except KafkaStorageError as exc:
        assert "Too many open files" in exc.message and "RLIMIT_NOFILE" in exc.message
    else:
        raise AssertionError("creating ten logs with twelve opens left succeeded")
    assert manager.all_logs() == []
    assert [n for n in os.listdir(tmp_path / "data") if n.startswith("t-")] == []
    fs.left = None
    logs = manager.create_logs(specs, atomic=True)
    assert len(logs) == 10 and len(manager.all_logs()) == 10
    manager.shutdown()
