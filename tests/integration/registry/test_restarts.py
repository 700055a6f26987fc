"""State survives: the broker restarted under a running registry, and a registry killed
with kill -9 during a burst of registrations (every acknowledged id is still there, no id
was handed out twice)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from moldau.testing.processes import child_env, free_port, kill, terminate
from moldau.testing.runner import BrokerProcess

from .registry_harness import RunningRegistry

LISTENING = re.compile(r"schema registry ready on http://127\.0\.0\.1:(\d+)")


def _enum(i: int) -> str:
    return json.dumps({"type": "enum", "name": f"E{i}", "symbols": ["A"]})


def test_registry_rides_out_a_broker_restart(tmp_path: Path) -> None:
    port = free_port()
    with BrokerProcess(tmp_path / "data",
                       {"listeners": f"PLAINTEXT://127.0.0.1:{port}"}) as broker, \
            RunningRegistry(broker.bootstrap, kafkastore_timeout_ms=2000) as reg:
        assert reg.request("POST", "/subjects/a/versions", {"schema": _enum(1)})[2]["id"] == 1
        assert broker.stop() == 0
        status, _, answer = reg.request("GET", "/subjects")
        assert status == 500 and answer["error_code"] in (50001, 50002)
        broker.start()
        deadline = time.monotonic() + 30
        while True:
            status, _, answer = reg.request("POST", "/subjects/b/versions",
                                            {"schema": _enum(2)})
            if status == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert (status, answer["id"]) == (200, 2)
        assert reg.request("GET", "/subjects")[2] == ["a", "b"]


def _start(bootstrap: str, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    start = log.stat().st_size if log.exists() else 0
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moldau.cli.main", "schema-registry", "--bootstrap-server",
             bootstrap, "--listeners", "http://127.0.0.1:0",
             "--property", "kafkastore.timeout.ms=10000"],
            stdout=out, stderr=subprocess.STDOUT, env=child_env())
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        match = LISTENING.search(log.read_bytes()[start:].decode(errors="replace"))
        if match:
            return proc, int(match.group(1))
        assert proc.poll() is None, log.read_text()
        time.sleep(0.05)
    raise AssertionError(log.read_text())


def _register(port: int, subject: str, schema: str) -> int | None:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/subjects/{subject}/versions",
        data=json.dumps({"schema": schema}).encode(), method="POST",
        headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(json.loads(response.read())["id"])
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


def test_kill_9_during_a_registration_burst_loses_no_acknowledged_id(tmp_path: Path) -> None:
    log = tmp_path / "registry.log"
    with BrokerProcess(tmp_path / "data") as broker:
        proc, port = _start(broker.bootstrap, log)
        acknowledged: dict[int, int] = {}
        stop = threading.Event()

        def burst() -> None:
            i = 0
            while not stop.is_set():
                schema_id = _register(port, f"s{i}", _enum(i))
                if schema_id is None:
                    return
                acknowledged[i] = schema_id
                i += 1

        writer = threading.Thread(target=burst)
        writer.start()
        deadline = time.monotonic() + 30
        while len(acknowledged) < 30 and time.monotonic() < deadline:
            time.sleep(0.01)
        kill(proc)  # kill -9 in the middle of the burst
        stop.set()
        writer.join(30)
        assert len(acknowledged) >= 30
        proc, port = _start(broker.bootstrap, log)
        try:
            for i, schema_id in acknowledged.items():
                assert _register(port, f"s{i}", _enum(i)) == schema_id  # still there
            ids = list(acknowledged.values())
            assert len(set(ids)) == len(ids)  # no id handed out twice
            fresh = _register(port, "after", _enum(10_000))
            assert fresh is not None and fresh > max(ids)
        finally:
            assert terminate(proc, 30) == 0
