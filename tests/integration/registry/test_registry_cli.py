"""``moldau schema-registry`` and ``moldau serve`` with ``schema.registry.listeners``, as
processes: they serve, survive a restart with their schemas, stop cleanly on SIGTERM, and
refuse bad settings with a message naming the key."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from moldau.testing.processes import child_env, terminate
from moldau.testing.runner import BrokerProcess, InProcessBroker

LISTENING = re.compile(r"schema registry ready on http://127\.0\.0\.1:(\d+)")


def _port_from_log(path: Path, start: int, proc: subprocess.Popen[bytes] | None = None,
                   timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        match = LISTENING.search(path.read_text(errors="replace")[start:])
        if match:
            return int(match.group(1))
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"exited with {proc.returncode}:\n{path.read_text()}")
        time.sleep(0.05)
    raise AssertionError(f"no registry within {timeout}s:\n{path.read_text()}")


def _http(port: int, method: str, path: str, body: object = None) -> object:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=data, method=method,
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _cli(*args: str, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "moldau.cli.main", *args],
                                stdout=out, stderr=subprocess.STDOUT, env=child_env())


def test_standalone_registry_serves_and_restarts(tmp_path: Path) -> None:
    log = tmp_path / "registry.log"
    log.touch()
    with InProcessBroker() as broker:
        args = ("schema-registry", "--bootstrap-server", broker.bootstrap,
                "--listeners", "http://127.0.0.1:0", "--property", "kafkastore.topic=_reg",
                "--property", "kafkastore.timeout.ms=10000")
        proc = _cli(*args, log=log)
        try:
            port = _port_from_log(log, 0, proc)
            assert _http(port, "POST", "/subjects/a/versions", {"schema": '"string"'}) == {
                "version": 1, "id": 1}
        finally:
            assert terminate(proc, 30) == 0
        start = len(log.read_text())
        proc = _cli(*args, log=log)
        try:
            port = _port_from_log(log, start, proc)
            assert _http(port, "GET", "/subjects/a/versions/1") == {
                "subject": "a", "version": 1, "id": 1, "schema": '"string"'}
            assert _http(port, "POST", "/subjects/b/versions", {"schema": '"int"'}) == {
                "version": 1, "id": 2}
        finally:
            assert terminate(proc, 30) == 0


def test_bad_settings_exit_2_naming_the_key(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "moldau.cli.main", "schema-registry", "--bootstrap-server",
         "127.0.0.1:1", "--listeners", "localhost:8081"],
        capture_output=True, text=True, env=child_env(), timeout=60)
    assert run.returncode == 2
    assert "listeners" in run.stderr and "'localhost:8081'" in run.stderr
    run = subprocess.run(
        [sys.executable, "-m", "moldau.cli.main", "schema-registry"],
        capture_output=True, text=True, env=child_env(), timeout=60)
    assert run.returncode == 2 and "kafkastore.bootstrap.servers" in run.stderr
    run = subprocess.run(
        [sys.executable, "-m", "moldau.cli.main", "serve", "--override",
         f"log.dirs={tmp_path}", "--override", "schema.registry.listeners=ftp://x:1"],
        capture_output=True, text=True, env=child_env(), timeout=60)
    assert run.returncode == 2 and "schema.registry.listeners" in run.stderr


def test_serve_runs_a_registry_in_process(tmp_path: Path) -> None:
    settings = {"schema.registry.listeners": "http://127.0.0.1:0"}
    with BrokerProcess(tmp_path / "data", settings) as broker:
        port = _port_from_log(broker.log_path, 0)
        assert _http(port, "GET", "/") == {}
        assert _http(port, "POST", "/subjects/t-value/versions", {"schema": '"long"'}) == {
            "version": 1, "id": 1}
        assert broker.stop() == 0
        start = len(broker.log_text())
        broker.start()
        port = _port_from_log(broker.log_path, start)
        assert _http(port, "GET", "/schemas/ids/1") == {"schema": '"long"'}
