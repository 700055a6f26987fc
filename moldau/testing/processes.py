"""Child processes of tests and benchmarks: free ports, their environment, stopping them.

Everything here acts on one process the caller started (by its ``Popen``), never by name.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Mapping
from typing import Any


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bound and released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
