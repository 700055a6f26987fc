"""Start ``moldau serve`` (and ``moldau proxy``) inside lab namespaces.

The broker reads a small properties file (data directory, single-node internal topics) and
takes its listener settings from the scenario: as properties, or as the ``KAFKA_*``
environment variables of the Docker images (seed 000). Start-up is detected from the
broker's log line ``started (cluster id ...); listening on NAME://host:port, ...``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from moldau.devtools.brokers import STARTED
from moldau.testing.tail import complete_text

from .lab import Lab, Netns
from .topologies import SEED_000_ENV, ZOOKEEPER_CONTAINER_IP, DockerNetwork
from .zookeeper import LabZooKeeper

_LISTENER = re.compile(r"(?P<name>[A-Za-z0-9_]+)://(?P<host>[^ ,]*):(?P<port>\d+)")

BASE_PROPERTIES = {
    "num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}


@dataclass
class LabBroker:
    """A broker process in a lab namespace."""

    ns: Netns
    proc: subprocess.Popen[bytes]
    log_path: Path
    cluster_id: str
    listeners: dict[str, tuple[str, int]]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _wait_for_line(proc: subprocess.Popen[bytes], log_path: Path, pattern: re.Pattern[str],
                   timeout: float, what: str) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # The process is still writing: match complete lines only (a port cut short, or a
        # JSON line cut in two, must wait for the next poll).
        text = complete_text(log_path)
        match = pattern.search(text)
        if match:
            return match
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{text[-4000:]}")
        time.sleep(0.05)
    raise TimeoutError(f"{what} did not start within {timeout}s:\n"
                       f"{log_path.read_text(errors='replace')[-4000:]}")


def start_broker(lab: Lab, ns: Netns, *, properties: Mapping[str, str] | None = None,
                 env: Mapping[str, str] | None = None, name: str = "broker",
                 argv_prefix: list[str] | None = None, timeout: float = 60) -> LabBroker:
    """Run ``moldau serve`` in ``ns`` and wait until its listeners are bound."""
    data = lab.tmp / f"{ns.role}-{name}-data"
    settings = {"log.dirs": str(data), **BASE_PROPERTIES, **(properties or {})}
    config = lab.tmp / f"{ns.role}-{name}.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    log = lab.tmp / f"{ns.role}-{name}.log"
    argv = [*(argv_prefix or []), sys.executable, "-m", "moldau.cli.main", "serve",
            "--config", str(config)]
    proc = ns.spawn(argv, env=env, log=log)
    match = _wait_for_line(proc, log, STARTED, timeout, f"broker in {ns.role}")
    listeners = {m["name"]: (m["host"], int(m["port"]))
                 for m in _LISTENER.finditer(match["listeners"])}
    return LabBroker(ns, proc, log, match["cluster"], listeners)


def start_seed000_broker(lab: Lab, net: DockerNetwork, *, timeout: float = 60) -> LabBroker:
    """Seed 000's ``kafka0`` as its compose file runs it: the ``zookeeper`` service first
    (``depends_on``; a real ZooKeeper on ``zookeeper:2181``), then the broker with the seed's
    environment verbatim (``KAFKA_ZOOKEEPER_CONNECT=zookeeper:2181``, so a one-broker
    cluster)."""
    LabZooKeeper(lab, net.zookeeper, ZOOKEEPER_CONTAINER_IP).start(timeout=90)
    return start_broker(lab, net.kafka0, env=SEED_000_ENV, timeout=timeout)


@dataclass
class LabProxy:
    """A ``moldau proxy`` process; ``bootstrap`` is the address clients use."""

    ns: Netns
    proc: subprocess.Popen[bytes]
    log_path: Path
    started: dict[str, object]
    bootstrap: str


def start_proxy(lab: Lab, ns: Netns, args: list[str], *, timeout: float = 60) -> LabProxy:
    """Run ``moldau proxy ARGS --json`` in ``ns``; wait for its ``started`` event."""
    log = lab.tmp / f"{ns.role}-proxy-{len(lab.processes)}.log"
    proc = ns.spawn([sys.executable, "-m", "moldau.cli.main", "proxy", *args, "--json"],
                    log=log)
    match = _wait_for_line(proc, log, re.compile(r'^\{"event": "started".*$', re.M),
                           timeout, f"proxy in {ns.role}")
    started = json.loads(match.group(0))
    return LabProxy(ns, proc, log, started, _bootstrap_of(started))


def _bootstrap_of(started: Mapping[str, object]) -> str:
    boot = started["bootstrap"]
    assert isinstance(boot, Mapping), started
    servers = boot.get("servers")
    if isinstance(servers, str):
        return servers
    return f"{started['advertised_host']}:{boot['port']}"
