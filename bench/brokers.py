"""Start the brokers under comparison on free loopback ports, pinned to a CPU set.

* moldau: ``moldau serve`` (log on disk under the work dir, Kafka's default of no fsync);
* tansu: Tansu 0.6 with ``--storage-engine memory://`` (nothing persisted);
* noida: noida-db 0.2.3 (``--only kafka``; one JSON file under the work dir).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moldau.testing.peers import api_versions_ok, free_port, peer_command

BROKERS = ("moldau", "tansu", "noida")

MOLDAU_SETTINGS = {
    "node.id": 1,
    "num.partitions": 1,
    "offsets.topic.replication.factor": 1,
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "group.initial.rebalance.delay.ms": 0,
}


def _taskset(cpus: str | None) -> list[str]:
    return ["taskset", "-c", cpus] if cpus else []


@dataclass
class BenchBroker:
    """A running broker under test."""

    name: str
    port: int
    workdir: Path
    cpus: str | None
    proc: subprocess.Popen[bytes] | None = None
    started_in_s: float = 0.0
    settings: dict[str, Any] = field(default_factory=dict)
    keep_workdir: bool = False

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def log_path(self) -> Path:
        return self.workdir / f"{self.name}.log"

    def command(self) -> list[str]:
        if self.name == "moldau":
            conf = self.workdir / "server.properties"
            settings = dict(MOLDAU_SETTINGS)
            settings.update({"listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                             "log.dirs": str(self.workdir / "data")})
            settings.update(self.settings)
            conf.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
            return [sys.executable, "-m", "moldau.cli.main", "serve", "--config", str(conf),
                    "--log-level", "WARNING"]
        return peer_command(self.name, self.port, self.workdir)

    def start(self, timeout_s: float = 120.0) -> BenchBroker:
        """Start and wait until ApiVersions is answered; ``started_in_s`` is how long it took."""
        cmd = _taskset(self.cpus) + self.command()
        t0 = time.monotonic()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         cwd=self.workdir)
        while True:
            if self.proc.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{tail}")
            if api_versions_ok(self.port):
                self.started_in_s = time.monotonic() - t0
                return self
            if time.monotonic() - t0 > timeout_s:
                self.kill()
                raise RuntimeError(f"{self.name} did not serve within {timeout_s} s; "
                                   f"log: {self.log_path}")
            time.sleep(0.01)

    def stop(self, timeout_s: float = 120.0) -> float:
        """SIGTERM (clean shutdown); returns the seconds it took to exit."""
        if self.proc is None or self.proc.poll() is not None:
            return 0.0
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return time.monotonic() - t0

    def kill(self) -> None:
        """kill -9."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        self.stop(30)
        if not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def start_broker(name: str, cpus: str | None, *, settings: dict[str, Any] | None = None,
                 workdir: Path | None = None, root: Path | None = None) -> BenchBroker:
    """Start broker ``name`` on a free port, pinned to ``cpus`` (taskset list) if given."""
    if workdir is None:
        workdir = Path(tempfile.mkdtemp(prefix=f"moldau-bench-{name}-", dir=root))
    workdir.mkdir(parents=True, exist_ok=True)
    broker = BenchBroker(name, free_port(), workdir, cpus, settings=dict(settings or {}))
    return broker.start()


def create_topic(bootstrap: str, name: str, partitions: int, timeout_s: float = 60.0,
                 config: dict[str, str] | None = None) -> None:
    """Create ``name`` and wait until every partition has a leader in the metadata."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})],
                                  operation_timeout=timeout_s, request_timeout=timeout_s)
    for future in futures.values():
        future.result(timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        meta = admin.list_topics(name, timeout=10)
        topic = meta.topics.get(name)
        if (topic is not None and topic.error is None and len(topic.partitions) == partitions
                and all(p.leader >= 0 for p in topic.partitions.values())):
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {name} with {partitions} partitions did not appear")


def pin_self(cpus: set[int] | None) -> None:
    """Pin this process (and the client processes it spawns) to ``cpus``."""
    if cpus:
        os.sched_setaffinity(0, cpus)


@contextlib.contextmanager
def servers_on(servers: set[int], clients: set[int], *, pin: bool = True) -> Iterator[None]:
    """Children inherit this process's affinity: the servers started inside the block run on
    ``servers``; after it this process (the clients) runs on ``clients``. Nothing is pinned
    when not ``pin``."""
    if pin:
        pin_self(servers)
    try:
        yield
    finally:
        if pin:
            pin_self(clients)
