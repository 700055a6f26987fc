"""File descriptors of segment files are bounded (issue 11, defect 6): only a partition's
active segment keeps its ``.log`` open; older segments open on demand and the least recently
used are closed beyond the pool's capacity; indexes hold no descriptor. A log with more
segments than the open-file limit loads and serves."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from moldau.storage.handles import HANDLE_POOL

from .helpers import append, make_batch, open_log, records_of


def descriptors_under(path: str) -> int:
    """Open descriptors of this process on files below ``path``."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(path):
            count += 1
    return count


@pytest.fixture
def small_pool():
    saved = HANDLE_POOL.capacity
    HANDLE_POOL.capacity = 8
    yield HANDLE_POOL
    HANDLE_POOL.capacity = saved


def test_old_segments_hold_no_descriptor_beyond_the_pool(tmp_path, small_pool) -> None:
    directory = str(tmp_path / "t-0")
    log = open_log(directory, segment_bytes=200)
    for i in range(150):
        append(log, make_batch(1, 1000 + i, value_size=100))
    assert len(log.segments) >= 100
    # One descriptor for the active segment, none for indexes, and the recently rolled
    # segments the pool keeps.
    assert descriptors_under(directory) <= small_pool.capacity + 1
    values = []
    for offset in range(log.log_end_offset):
        got = log.read(offset, 1 << 20)
        values += [r[2] for r in records_of(got.records) if r[0] == offset]
        assert descriptors_under(directory) <= small_pool.capacity + 2
    assert values == [b"A" * 100] * 150
    log.close()
    assert descriptors_under(directory) == 0

    reopened = open_log(directory, segment_bytes=200)
    assert descriptors_under(directory) <= 2  # loading released every older segment
    assert reopened.log_end_offset == 150
    assert records_of(reopened.read(0, 1 << 20).records)[0][2] == b"A" * 100
    reopened.close()


def test_a_log_with_more_segments_than_the_open_file_limit_loads(tmp_path) -> None:
    directory = str(tmp_path / "t-0")
    log = open_log(directory, segment_bytes=200)
    for i in range(300):
        append(log, make_batch(1, 1000 + i, value_size=100))
    segments = len(log.segments)
    log.close()
    assert segments > 200
    program = textwrap.dedent(f"""
        import resource, sys
        sys.path.insert(0, {os.getcwd()!r})
        resource.setrlimit(resource.RLIMIT_NOFILE, (100, 100))
        from tests.unit.storage.helpers import open_log, records_of
        log = open_log({directory!r}, segment_bytes=200)
        assert len(log.segments) == {segments}, len(log.segments)
        total = 0
        offset = 0
        while offset < log.log_end_offset:
            records = records_of(log.read(offset, 1 << 20).records)
            total += len(records)
            offset = records[-1][0] + 1
        log.close()
        print("read", total)
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "read 300"
