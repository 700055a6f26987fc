"""Real ``kill -9`` of a process writing transactions to a log (transactional batches of
several producers, COMMIT and ABORT markers, small segments), three times in a row.

After every kill the log is reopened with recovery: each segment's ``.txnindex`` must hold
exactly the aborted transactions a scan of the log's markers finds (whole 34-byte entries, no
torn one), and the transactions left open must hold the last stable offset. Each new child
first ends the transactions the previous one left open (as a coordinator would), so the open
ones it finds are the recovered producer state.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from moldau.protocol.records.codec import iter_decoded
from moldau.protocol.records.control import parse_end_txn_marker
from moldau.storage import LogConfig, load_log
from moldau.storage.txn_index import ENTRY_SIZE, AbortedTxn

CONFIG = {"segment.bytes": 6000, "index.interval.bytes": 500, "cleanup.policy": "delete"}

CHILD = r"""
import json, random, sys
from moldau.protocol.records.batch import validate_batches
from moldau.protocol.records.codec import build_batch
from moldau.protocol.records.control import build_end_txn_marker
from moldau.storage import LogConfig, load_log
from moldau.storage.producer_state import ORIGIN_COORDINATOR

log = load_log(sys.argv[1], LogConfig.from_dict(json.loads(sys.argv[3])))
rng = random.Random(int(sys.argv[2]))
base_pid = int(sys.argv[2]) * 100

def put(buf, origin="client"):
    buf = bytearray(buf)
    return log.append(buf, validate_batches(buf), 1, origin=origin)

def end(pid, epoch, commit):
    put(build_end_txn_marker(pid, epoch, 0, commit, 1000), ORIGIN_COORDINATOR)

for pid in sorted(log.producer_state.ongoing_txns):
    end(pid, log.producer_state.producers[pid].producer_epoch, False)
print("start", log.log_end_offset, flush=True)
seq = {}
open_txns = set()
while True:
    pid = base_pid + rng.randrange(4)
    if pid in open_txns and rng.random() < 0.3:
        end(pid, 0, rng.random() < 0.5)
        open_txns.discard(pid)
    else:
        s = seq.get(pid, 0)
        n = 1 + rng.randrange(3)
        put(build_batch([(b"k", b"v" * rng.randrange(10, 200), [], 1000)] * n, producer_id=pid,
                        producer_epoch=0, base_sequence=s, transactional=True))
        seq[pid] = s + n
        open_txns.add(pid)
    print("ok", log.log_end_offset, flush=True)
"""

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_and_kill(path: str, round_no: int, min_acks: int) -> None:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, path, str(round_no + 1),
                             json.dumps(CONFIG)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, text=True)
    acks = 0
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("start "), first + proc.stderr.read()
        deadline = time.monotonic() + 60
        while acks < min_acks and time.monotonic() < deadline:
            if not proc.stdout.readline():
                break
            acks += 1
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert acks >= min_acks, "child made too few appends: " + proc.stderr.read()


def expected_from_markers(log) -> tuple[list[tuple[int, int, int]], dict[int, int]]:
    """(pid, first offset, marker offset) of every abort, and the transactions still open,
    from a scan of the log."""
    ongoing: dict[int, int] = {}
    aborted = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = bytes(log.read(offset, 1 << 20).records)
        for batch in iter_decoded(data):
            h = batch.header
            if h.is_control:
                marker = _marker(batch)
                first = ongoing.pop(h.producer_id, h.base_offset)
                if marker is not None and not marker.is_commit:
                    aborted.append((h.producer_id, first, h.base_offset))
            elif h.is_transactional:
                ongoing.setdefault(h.producer_id, h.base_offset)
            offset = h.next_offset
    return aborted, ongoing


def _marker(batch):
    """The marker of a decoded control batch (read back through the codec's parser)."""
    h = batch.header
    from moldau.protocol.records.codec import build_batch

    record = batch.records[0]
    return parse_end_txn_marker(build_batch([(record.key, record.value, [], 0)],
                                            producer_id=h.producer_id,
                                            producer_epoch=h.producer_epoch,
                                            transactional=True, control=True))


def test_kill9_txn_writer_three_times(tmp_path):
    path = str(tmp_path / "txn-0")
    for round_no in range(3):
        run_and_kill(path, round_no, min_acks=150 + 50 * round_no)
        log = load_log(path, LogConfig.from_dict(CONFIG))
        try:
            files = [n for n in os.listdir(path) if n.endswith(".txnindex")]
            assert files and all(os.path.getsize(os.path.join(path, n)) % ENTRY_SIZE == 0
                                 for n in files)
            entries: list[AbortedTxn] = [e for s in log.segments for e in s.txn_index.entries]
            aborted, ongoing = expected_from_markers(log)
            assert [(e.producer_id, e.first_offset, e.last_offset) for e in entries] == aborted
            assert dict(log.producer_state.ongoing_txns) == ongoing
            log.update_high_watermark(log.log_end_offset)
            assert log.first_unstable_offset() == (min(ongoing.values()) if ongoing else None)
            assert log.collect_aborted(0, log.log_end_offset) == [(p, f) for p, f, _ in aborted]
            assert len(log.segments) > 3 and len(aborted) >= 3 * (round_no + 1)
        finally:
            log.close()
