"""Real ``kill -9`` of a process appending to a log, several times in a row.

Durability claim: a batch whose append returned (bytes handed to the kernel with ``pwrite``,
no fsync) survives the death of the process. After each kill the next child reopens the log
(running recovery) and keeps appending; at the end every acknowledged batch must be present
with its CRC intact, and nothing unacknowledged may be half there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from moldau.protocol.records.batch import check_crc, iter_batches
from moldau.storage import LogConfig, load_log

CHILD = r"""
import os, sys
from moldau.protocol.records.batch import validate_batches
from moldau.protocol.records.codec import build_batch
from moldau.storage import LogConfig, load_log

log = load_log(sys.argv[1], LogConfig.from_dict({"segment.bytes": 150000,
                                                 "index.interval.bytes": 1000}))
out = sys.stdout
out.write(f"start {log.log_end_offset}\n")
out.flush()
i = 0
while True:
    n = 1 + i % 4
    buf = bytearray(build_batch([(b"k%d" % i, os.urandom(50 + (i * 37) % 400), [], 1000 + i)
                                 for _ in range(n)]))
    info = log.append(buf, validate_batches(buf), 1)
    out.write(f"{info.first_offset} {info.last_offset} {int.from_bytes(buf[17:21], 'big')}\n")
    out.flush()
    i += 1
"""

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_and_kill(path: str, min_acks: int) -> tuple[int, list[tuple[int, int, int]]]:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, path], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT, text=True)
    acks: list[tuple[int, int, int]] = []
    start = -1
    deadline = time.monotonic() + 60
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("start "), first + proc.stderr.read()
        start = int(first.split()[1])
        while len(acks) < min_acks and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            a, b, c = line.split()
            acks.append((int(a), int(b), int(c)))
        os.kill(proc.pid, signal.SIGKILL)
        # Lines written before the kill are acknowledged appends too.
        for line in proc.stdout:
            parts = line.split()
            if len(parts) == 3:
                acks.append((int(parts[0]), int(parts[1]), int(parts[2])))
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert len(acks) >= min_acks, "child produced too few appends"
    return start, acks


def test_kill9_appender_three_times(tmp_path):
    path = str(tmp_path / "durable-0")
    all_acks: list[tuple[int, int, int]] = []
    for round_no in range(3):
        start, acks = run_and_kill(path, 1500)
        # Recovery in the child kept every earlier acknowledged batch and appended after them.
        expected_start = all_acks[-1][1] + 1 if all_acks else 0
        assert start >= expected_start, (round_no, start, expected_start)
        assert acks[0][0] == start
        all_acks += acks

    log = load_log(path, LogConfig.from_dict({"segment.bytes": 150000}))
    assert len(log.segments) > 3
    assert log.log_end_offset >= all_acks[-1][1] + 1
    for first, last, crc in all_acks:
        r = log.read(first, 1)
        (pos, h), *_ = iter_batches(r.records)
        assert (h.base_offset, h.last_offset, h.crc) == (first, last, crc)
        assert check_crc(r.records, pos, h)
    # Acknowledged offsets are contiguous except where an unacknowledged tail was cut.
    offsets = [a[0] for a in all_acks]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
