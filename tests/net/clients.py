"""Real clients inside lab namespaces: kcat, confluent-kafka, the moldau client and CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from .lab import Netns


def concurrently(*jobs: Callable[[], Any]) -> list[Any]:
    """Run independent client checks at the same time (each waits on its own processes);
    results in order, the first failure re-raised."""
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = [pool.submit(job) for job in jobs]
        return [f.result() for f in futures]


_FROM = re.compile(r"Metadata for all topics \(from broker (?P<id>-?\d+): (?P<addr>\S+)\)")
_BROKER = re.compile(r"^\s+broker (?P<id>\d+) at (?P<addr>\S+)", re.M)


@dataclass
class KcatMetadata:
    """What ``kcat -L`` printed: whom it asked and the brokers it was told about."""

    from_broker: int
    from_address: str
    brokers: list[tuple[int, str]]
    output: str


def kcat_metadata(ns: Netns, bootstrap: str, *, timeout: float = 20) -> KcatMetadata:
    result = ns.run(["kcat", "-b", bootstrap, "-L", "-m", "5"], timeout=timeout)
    text = result.stdout + result.stderr
    assert result.returncode == 0, f"kcat -L -b {bootstrap} failed in {ns.role}:\n{text}"
    header = _FROM.search(text)
    assert header, text
    return KcatMetadata(int(header["id"]), header["addr"],
                        [(int(m["id"]), m["addr"]) for m in _BROKER.finditer(text)], text)


def kcat_produce(ns: Netns, bootstrap: str, topic: str, values: list[str], *,
                 timeout_ms: int = 8000) -> subprocess.CompletedProcess[str]:
    """``kcat -P``; returns the finished process (non-zero exit when delivery failed)."""
    return ns.run(["kcat", "-b", bootstrap, "-P", "-t", topic,
                   "-X", f"message.timeout.ms={timeout_ms}",
                   "-X", f"socket.connection.setup.timeout.ms={timeout_ms}"],
                  input="\n".join(values) + "\n", timeout=timeout_ms / 1000 + 20)


def kcat_consume(ns: Netns, bootstrap: str, topic: str, count: int, *,
                 timeout: float = 20) -> list[str]:
    """``kcat -C`` from the beginning until ``count`` records (or the end) arrived."""
    result = ns.run(["kcat", "-b", bootstrap, "-C", "-t", topic, "-o", "beginning",
                     "-c", str(count), "-e", "-q"], timeout=timeout)
    assert result.returncode == 0, f"kcat -C failed in {ns.role}:\n{result.stderr}"
    return [line for line in result.stdout.splitlines() if line]


def kcat_roundtrip(ns: Netns, bootstrap: str, topic: str, count: int = 3) -> None:
    """Produce ``count`` records with kcat and read them back with kcat."""
    values = [f"kcat-{topic}-{i}" for i in range(count)]
    produced = kcat_produce(ns, bootstrap, topic, values)
    assert produced.returncode == 0, (
        f"kcat -P via {bootstrap} failed in {ns.role}:\n{produced.stderr}")
    assert kcat_consume(ns, bootstrap, topic, count) == values


def program(ns: Netns, client: str, bootstrap: str, topic: str, *, count: int = 3,
            timeout: float = 8.0, address_map: str = "", any_order: bool = False
            ) -> dict[str, Any]:
    """Run :mod:`tests.net.clientprog` in ``ns``; its JSON result plus the exit status."""
    argv = [sys.executable, "-m", "tests.net.clientprog", client, "--bootstrap", bootstrap,
            "--topic", topic, "--count", str(count), "--timeout", str(timeout)]
    if address_map:
        argv += ["--address-map", address_map]
    if any_order:
        argv.append("--any-order")
    result = ns.run(argv, timeout=timeout * 8 + 30)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert lines, f"{client} program printed no result:\n{result.stdout}\n{result.stderr}"
    outcome: dict[str, Any] = json.loads(lines[-1])
    outcome["exit"] = result.returncode
    outcome["stderr"] = result.stderr
    return outcome


def confluent_roundtrip(ns: Netns, bootstrap: str, topic: str, *,
                        any_order: bool = False) -> None:
    """Produce and consume (in a group) with confluent-kafka; ``any_order`` for a topic of
    several partitions."""
    outcome = program(ns, "confluent", bootstrap, topic, any_order=any_order)
    assert outcome["ok"] and outcome["exit"] == 0, (
        f"confluent-kafka via {bootstrap} in {ns.role}: {outcome}")


def doctor(ns: Netns, bootstrap: str, *more: str, timeout: float = 2.0,
           text: bool = False) -> tuple[int, str, dict[str, Any]]:
    """``moldau doctor --json`` in ``ns``: (exit status, text report or "", JSON report).

    With ``text=True`` the text report is produced too (a second run) and must agree on
    the exit status.
    """
    base = [sys.executable, "-m", "moldau.cli.main", "doctor", "--bootstrap-server", bootstrap,
            "--timeout", str(timeout), *more]
    data = ns.run([*base, "--json"], timeout=timeout * 10 + 30)
    assert data.returncode in (0, 1), f"doctor crashed:\n{data.stdout}\n{data.stderr}"
    report = json.loads(data.stdout)
    assert report["exit_code"] == data.returncode
    rendered = ""
    if text:
        run = ns.run(base, timeout=timeout * 10 + 30)
        assert run.returncode == data.returncode, (run.stdout, data.stdout)
        rendered = run.stdout
    return data.returncode, rendered or data.stdout, report
