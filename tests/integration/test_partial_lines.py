"""The harness reads files that child processes are still writing (a worker's JSON lines,
kcat's output, a broker's start-up log): a half-written last line must be left for the next
poll, never parsed. Found by ``make test``: ``Worker.events()`` choked on ``{"e"``."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from groups_harness import Worker, _parse_kcat

from moldau.testing.runner import BrokerProcess
from moldau.testing.tail import complete_lines, complete_text


def _worker(tmp_path: Path, **kw: object) -> Worker:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return Worker("w", tmp_path / "w.jsonl", proc, **kw)  # type: ignore[arg-type]


def test_complete_lines_leave_the_half_written_line_for_later(tmp_path: Path) -> None:
    path = tmp_path / "f"
    assert complete_lines(path) == [] and complete_text(path) == ""  # not created yet
    path.write_bytes(b"one\r\ntwo\nthr")
    assert complete_lines(path) == ["one", "two"]
    assert complete_text(path) == "one\r\ntwo\n"
    assert complete_lines(path, start=5) == ["two"]
    path.write_bytes(b"caf\xc3\xa9\n\xc3")  # a UTF-8 sequence cut in two
    assert complete_lines(path) == ["caf\u00e9"]
    path.write_bytes(b"no newline yet")
    assert complete_lines(path) == []


def test_worker_events_skip_a_partial_json_line(tmp_path: Path) -> None:
    worker = _worker(tmp_path)
    done = json.dumps({"e": "assign", "p": [0, 1], "t": 1.0})
    worker.out.write_text(done + "\n" + '{"e"')
    assert worker.events() == [{"e": "assign", "p": [0, 1], "t": 1.0}]
    assert worker.assignment() == {0, 1}
    with worker.out.open("a") as f:
        f.write(': "revoke", "p": [1], "t": 2.0}\n')
    assert worker.assignment() == {0}


def test_kcat_output_skips_partial_lines(tmp_path: Path) -> None:
    worker = _worker(tmp_path, parse=_parse_kcat, stderr_path=tmp_path / "w.err")
    # "rec 0 12" caught after "rec 0 1": offset 1 would be a record that was never read.
    worker.out.write_text("rec 0 10\nrec 0 11\nrec 0 1")
    assert worker.stderr_path is not None
    worker.stderr_path.write_text("% Group g rebalanced (memberid x): assigned: t [0], t [3]\n"
                                  "% Group g rebalanced (memberid x): assigned: t [1")
    events = worker.events()
    assert [e for e in events if e["e"] == "rec"] == [
        {"e": "rec", "p": 0, "o": 10, "t": 0.0}, {"e": "rec", "p": 0, "o": 11, "t": 0.0}]
    assert [e["p"] for e in events if e["e"] == "assign"] == [[0, 3]]


def test_broker_start_waits_for_the_whole_listening_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A broker caught writing its start-up line: the port must not be read as ``4`` when
    the line ends ``:45678``."""
    fake = tmp_path / "fake-python"
    fake.write_text("#!/bin/sh\n"
                    "printf 'INFO started (cluster id abc); listening on PLAINTEXT://127.0.0.1:4'\n"
                    "sleep 1.5\n"
                    "printf '5678\\n'\n"
                    "exec sleep 60\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(sys, "executable", str(fake))
    broker = BrokerProcess(tmp_path / "data")
    try:
        broker.start(timeout=30)
        assert broker.ports == {"PLAINTEXT": 45678}
        assert broker.cluster_id == "abc"
    finally:
        broker.kill()
        broker.close()
    assert os.path.exists(broker.log_path)
