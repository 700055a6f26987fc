"""``moldau doctor`` against brokers on 127.0.0.1, without network namespaces.

Everything here stays on loopback: failures come from advertised names under the reserved
``.invalid`` domain (RFC 2606, never resolvable), closed loopback ports, a loopback socket
that accepts connections but never speaks Kafka, and a broker advertising another broker's
port. The lab scenarios (test_seed*, test_doctor_net) cover real network failures.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from moldau.client import AddressMap
from moldau.doctor import Outcome, diagnose, observe, render_text
from moldau.testing.processes import closed_port, free_port
from moldau.testing.runner import InProcessBroker

# How long the doctor waits for an answer. Healthy answers come in milliseconds, but the
# brokers run in this process: on a busy machine a short limit turned them into "timeout"
# findings. Only the silent-socket case waits it out, with a shorter one of its own.
TIMEOUT_S = 10.0
SILENT_TIMEOUT_S = 3.0


@contextmanager
def broker(tmp_path: Any, name: str, settings: dict[str, Any]) -> Iterator[InProcessBroker]:
    with InProcessBroker(tmp_path / name / "data", settings) as running:
        yield running


def run_doctor(bootstrap: str, address_map: str = "", timeout_s: float = TIMEOUT_S) -> Any:
    servers = [(h, int(p)) for h, p in (s.rsplit(":", 1) for s in bootstrap.split(","))]
    obs = asyncio.run(observe(servers, address_map=AddressMap.parse(address_map or None),
                              timeout_s=timeout_s))
    return diagnose(obs, timeout_s=timeout_s)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "moldau.cli.main", "doctor", *args],
                          capture_output=True, text=True, timeout=60)


def two_listeners(a: int, b: int, advertised_a: str) -> dict[str, Any]:
    return {
        "listeners": f"A://127.0.0.1:{a},B://127.0.0.1:{b}",
        "advertised.listeners": f"A://{advertised_a},B://127.0.0.1:{b}",
        "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT",
        "inter.broker.listener.name": "B",
    }


def test_healthy_broker(tmp_path: Any) -> None:
    port = free_port()
    with broker(tmp_path, "b", {"listeners": f"PLAINTEXT://127.0.0.1:{port}"}):
        report = run_doctor(f"127.0.0.1:{port}")
        assert report.exit_code == 0 and report.findings == ()
        [boot] = report.observations.bootstrap
        assert boot.answered_node == 1 and boot.listener_name() == "PLAINTEXT"
        assert boot.listeners is not None
        assert [str(e) for e in boot.listeners.listeners] == [f"PLAINTEXT://127.0.0.1:{port}"]
        result = cli("--bootstrap-server", f"127.0.0.1:{port}")
        assert result.returncode == 0, result.stdout + result.stderr
        assert "All 1 broker(s) reachable" in result.stdout


def test_unresolvable_advertised_name(tmp_path: Any) -> None:
    a, b = free_port(), free_port()
    with broker(tmp_path, "b", two_listeners(a, b, f"kafka0.invalid:{a}")):
        report = run_doctor(f"127.0.0.1:{a}")
        assert report.exit_code == 1
        [finding] = report.findings
        assert finding.code == "unresolvable" and "listener A" in finding.message
        fixes = [(f.kind, f.action) for f in finding.fixes]
        assert fixes[0] == ("bootstrap", f"--bootstrap-server 127.0.0.1:{b}")
        assert ("advertised.listeners",
                f"advertised.listeners=A://127.0.0.1:{a},B://127.0.0.1:{b}") in fixes
        assert ("address-map", f"--address-map kafka0.invalid:{a}=127.0.0.1:{a}") in fixes

        # With the map the doctor's fix suggests, moldau clients are fine (a warning remains
        # for unmodified clients), and the CLI agrees in JSON.
        mapped = run_doctor(f"127.0.0.1:{a}", f"kafka0.invalid:{a}=127.0.0.1:{a}")
        assert mapped.exit_code == 0
        assert [f.code for f in mapped.findings] == ["only-via-map"]
        result = cli("-b", f"127.0.0.1:{a}", "--json", "--timeout", str(TIMEOUT_S))
        assert result.returncode == 1
        data = json.loads(result.stdout)
        assert data["findings"][0]["code"] == "unresolvable"
        assert data["checks"][0]["direct"]["outcome"] == "dns"


def test_refused_advertised_port(tmp_path: Any) -> None:
    a, b = free_port(), free_port()
    with closed_port() as closed, \
            broker(tmp_path, "b", two_listeners(a, b, f"127.0.0.1:{closed}")):
        report = run_doctor(f"127.0.0.1:{a}")
        assert [f.code for f in report.findings] == ["refused"]
        assert report.observations.brokers[0].direct.outcome is Outcome.REFUSED
        assert report.exit_code == 1


def test_port_that_is_not_kafka(tmp_path: Any) -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts (the kernel completes the handshake) and never answers
    port = silent.getsockname()[1]
    a, b = free_port(), free_port()
    try:
        with broker(tmp_path, "b", two_listeners(a, b, f"127.0.0.1:{port}")):
            report = run_doctor(f"127.0.0.1:{a}", timeout_s=SILENT_TIMEOUT_S)
            [finding] = report.findings
            assert finding.code == "not-kafka"
            assert "no Kafka answer" in finding.message
    finally:
        silent.close()


def test_advertised_address_of_another_node(tmp_path: Any) -> None:
    cluster = {"cluster.id": "doctor-test-cluster-1"}
    p1, p2 = free_port(), free_port()
    with broker(tmp_path, "two", {**cluster, "node.id": 2,
                                  "listeners": f"PLAINTEXT://127.0.0.1:{p2}"}), \
            broker(tmp_path, "one", {**cluster, "node.id": 1,
                                     "listeners": f"PLAINTEXT://127.0.0.1:{p1}",
                                     "advertised.listeners": f"PLAINTEXT://127.0.0.1:{p2}"}):
        report = run_doctor(f"127.0.0.1:{p1}")
        codes = [f.code for f in report.findings]
        assert "wrong-node" in codes, render_text(report)
        finding = report.findings[codes.index("wrong-node")]
        assert f"127.0.0.1:{p2} answers as node 2" in finding.message
        assert "broker 1" in finding.message
        assert report.exit_code == 1


def test_mixed_listener_bootstrap_list(tmp_path: Any) -> None:
    a, b = free_port(), free_port()
    with broker(tmp_path, "b", two_listeners(a, b, f"localhost:{a}")):
        report = run_doctor(f"127.0.0.1:{a},127.0.0.1:{b}")
        assert [f.code for f in report.findings] == ["mixed-listeners"]
        assert report.exit_code == 1
        # Each listener on its own is healthy.
        assert run_doctor(f"127.0.0.1:{b}").exit_code == 0


def test_no_bootstrap_address_answers() -> None:
    with closed_port() as closed:
        report = run_doctor(f"127.0.0.1:{closed}")
        assert [f.code for f in report.findings] == ["bootstrap-refused"]
        assert report.exit_code == 1
        result = cli("-b", f"127.0.0.1:{closed}")
    assert result.returncode == 1
    assert "No bootstrap address answered" in result.stdout


@pytest.mark.parametrize("args", [
    ["-b", "no-port"],
    ["-b", "127.0.0.1:9092", "--address-map", "a=b=c"],
    ["-b", "127.0.0.1:9092", "--timeout", "0"],
])
def test_bad_options_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from moldau.cli.main import main

    try:
        status = main(["doctor", *args])
    except SystemExit as exc:  # argparse's own errors
        status = int(exc.code or 0)
    assert status == 2
    assert capsys.readouterr().err.strip()
