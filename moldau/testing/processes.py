"""Child processes of tests and benchmarks: free ports, their environment, stopping them.

Everything here acts on one process the caller started (by its ``Popen``), never by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from collections.abc import Iterator, Mapping
from typing import Any


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bound and released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 where connections are refused, for as long as the block runs.

    The port is bound but never listened on: a connect gets "connection refused", and no
    other process can take the port meanwhile (a port from :func:`free_port` that a test
    only means to keep dead may be bound by anything on the machine a moment later).
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment plus ``extra``, with Python output unbuffered (unless
    ``extra`` says otherwise) so a child's log lines arrive as they are written."""
    env = dict(os.environ)
    env.update(extra or {})
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def terminate(proc: subprocess.Popen[Any], timeout: float) -> int:
    """SIGTERM ``proc`` (if it still runs) and wait up to ``timeout`` s for it, then kill -9;
    its exit status."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def kill(proc: subprocess.Popen[Any]) -> None:
    """kill -9 ``proc`` if it still runs, and reap it."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
