"""``moldau rest-proxy`` and ``moldau serve`` with ``rest.proxy.listeners``, as processes:
they serve (also before the cluster is reachable), stop cleanly on SIGTERM with their consumer
instances leaving their groups, and refuse bad settings with a message naming the key."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from moldau.client import SyncAdminClient
from moldau.testing.processes import child_env, terminate
from moldau.testing.rest import RestBrokerProcess
from moldau.testing.runner import InProcessBroker

READY = re.compile(r"rest proxy ready on http://127\.0\.0\.1:(\d+)")
V2 = "application/vnd.kafka.v2+json"


def _port_from_log(path: Path, proc: subprocess.Popen[bytes], timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        match = READY.search(path.read_text(errors="replace"))
        if match:
            return int(match.group(1))
        if proc.poll() is not None:
            raise AssertionError(f"exited with {proc.returncode}:\n{path.read_text()}")
        time.sleep(0.05)
    raise AssertionError(f"no proxy within {timeout}s:\n{path.read_text()}")


def _http(port: int, method: str, path: str, body: Any = None,
          ctype: str = V2) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=data, method=method,
        headers={"Content-Type": ctype, "Accept": "application/vnd.kafka.json.v2+json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _cli(*args: str, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "moldau.cli.main", *args],
                                stdout=out, stderr=subprocess.STDOUT, env=child_env())


def test_standalone_proxy_serves_and_stops_cleanly(tmp_path: Path) -> None:
    log = tmp_path / "proxy.log"
    with InProcessBroker() as broker:
        proc = _cli("rest-proxy", "--bootstrap-server", broker.bootstrap, "--listeners",
                    "http://127.0.0.1:0", "--property", "id=cli", log=log)
        try:
            port = _port_from_log(log, proc)
            status, answer = _http(port, "POST", "/topics/cli-topic",
                                   {"records": [{"value": {"a": 1}}]},
                                   "application/vnd.kafka.json.v2+json")
            assert status == 200 and answer["offsets"][0]["offset"] == 0, answer
            status, made = _http(port, "POST", "/consumers/cli-group",
                                 {"format": "json", "auto.offset.reset": "earliest"})
            assert status == 200 and made["instance_id"].startswith("rest-consumer-cli-")
            path = f"/consumers/cli-group/instances/{made['instance_id']}"
            assert _http(port, "POST", f"{path}/subscription", {"topics": ["cli-topic"]})[0] \
                == 204
            for _ in range(30):  # the first reads may be empty while it joins
                status, got = _http(port, "GET", f"{path}/records")
                if got:
                    break
            assert got and got[0]["value"] == {"a": 1}, got
            admin = SyncAdminClient({"bootstrap.servers": broker.bootstrap})
            try:
                members = admin.describe_groups(["cli-group"])["cli-group"].members
                assert len(members) == 1
            finally:
                admin.close()
        finally:
            assert terminate(proc, 30) == 0
        admin = SyncAdminClient({"bootstrap.servers": broker.bootstrap})
        try:  # the instance left its group on shutdown
            assert not admin.describe_groups(["cli-group"])["cli-group"].members
        finally:
            admin.close()
    assert "Traceback" not in log.read_text()


def test_proxy_serves_before_its_cluster_is_up(tmp_path: Path) -> None:
    log = tmp_path / "proxy.log"
    proc = _cli("rest-proxy", "--bootstrap-server", "127.0.0.1:1", "--listeners",
                "http://127.0.0.1:0", "--property", "client.socket.connection.setup.timeout.ms=200",
                "--property", "admin.default.api.timeout.ms=1000", log=log)
    try:
        port = _port_from_log(log, proc)
        status, answer = _http(port, "GET", "/topics")
        assert status == 500 and answer["error_code"] == 50003, answer
        assert _http(port, "GET", "/")[0] == 200
    finally:
        assert terminate(proc, 30) == 0


def test_bad_settings_exit_2_naming_the_key(tmp_path: Path) -> None:
    for args, word in ((["--listeners", "localhost:8082", "--bootstrap-server", "h:1"],
                        "listeners"),
                       (["--listeners", "http://127.0.0.1:0"], "bootstrap.servers"),
                       (["--bootstrap-server", "h:1", "--property",
                         "consumer.instance.timeout.ms=never"], "consumer.instance.timeout.ms")):
        run = subprocess.run([sys.executable, "-m", "moldau.cli.main", "rest-proxy", *args],
                             capture_output=True, text=True, env=child_env(), timeout=60)
        assert run.returncode == 2 and word in run.stderr, (args, run.stderr)
    run = subprocess.run([sys.executable, "-m", "moldau.cli.main", "serve", "--override",
                          "rest.proxy.listeners=localhost:8082"],
                         capture_output=True, text=True, env=child_env(), timeout=60)
    assert run.returncode == 2 and "rest.proxy.listeners" in run.stderr


def test_serve_runs_the_proxy_with_the_registry(tmp_path: Path) -> None:
    with RestBrokerProcess(tmp_path / "data",
                           {"schema.registry.listeners": "http://127.0.0.1:0"}) as broker:
        port = int(broker.rest_url.rsplit(":", 1)[1])
        schema = json.dumps({"type": "record", "name": "R",
                             "fields": [{"name": "f", "type": "int"}]})
        status, answer = _http(port, "POST", "/topics/served",
                               {"value_schema": schema, "records": [{"value": {"f": 1}}]},
                               "application/vnd.kafka.avro.v2+json")
        assert status == 200 and answer["value_schema_id"] == 1, answer
        assert broker.stop() == 0
        assert "Traceback" not in broker.log_text()
