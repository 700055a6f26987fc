"""``moldau dev-cluster`` run as a user runs it (a child process), for the tests; what runs is
checked by pid and by /proc."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from moldau.devtools.tail import complete_lines, complete_text

READY = "registered in ZooKeeper. Ctrl-C stops the cluster."


def processes_under(path: Path) -> list[tuple[int, str]]:
    """(pid, command line) of every process whose command line names ``path``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(path) in cmdline:
            found.append((int(entry.name), cmdline))
    return found


class DevCluster:
    """``moldau dev-cluster`` as a child process, its output in a file read line by line."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.dir = tmp_path / "dc"
        self.out = tmp_path / "dev-cluster.out"
        with open(self.out, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "moldau.cli.main", "dev-cluster", "--dir",
                 str(self.dir), *args],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def text(self) -> str:
        return complete_text(self.out)

    def wait_for(self, needle: str, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.text():
            if self.proc.poll() is not None:
                pytest.fail(f"dev-cluster exited {self.proc.returncode}:\n{self.text()}")
            if time.monotonic() > deadline:
                pytest.fail(f"no {needle!r} after {timeout} s:\n{self.text()}")
            time.sleep(0.1)

    def stop(self, signum: int, timeout: float = 120) -> int:
        self.proc.send_signal(signum)
        return self.proc.wait(timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid, _cmd in processes_under(self.dir):  # a failed test leaves no orphan
            os.kill(pid, signal.SIGKILL)


def brokers_started(directory: Path, count: int) -> bool:
    return all(any("started (cluster id" in line
                   for line in complete_lines(directory / f"broker-{i}" / "broker.log"))
               for i in range(1, count + 1))


def consecutive_free_ports(count: int) -> int:
    import socket

    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = probe.getsockname()[1]
        if base + count > 65535:
            continue
        socks = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return int(base)
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError("no run of free ports found")
