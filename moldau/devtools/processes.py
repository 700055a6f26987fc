"""Child processes of local clusters, tests and benchmarks: free ports, their environment,
stopping them.

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


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on 127.0.0.1 a moment ago (all held at once while picked,
    so two picks cannot return the same port)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket())
            sock.bind(("127.0.0.1", 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


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


class ChildProcess:
    """The process of one runner node (a broker, a ZooKeeper server) while it runs: ``proc``
    is its ``Popen``, None before it starts and after it is stopped or killed. Stopping acts
    on that process by its pid, never by name."""

    proc: subprocess.Popen[Any] | None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_stopped(self, timeout: float) -> int | None:
        """SIGTERM (if it still runs) and wait up to ``timeout`` s for the process to exit,
        then kill -9; its exit status (None when there was no process)."""
        if self.proc is None:
            return None
        code = terminate(self.proc, timeout)
        self.proc = None
        return code

    def kill(self) -> None:
        """kill -9, and reap it."""
        if self.proc is not None:
            kill(self.proc)
        self.proc = None


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (a zombie counts until it is reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """``preexec_fn`` for a child that must not outlive the process that started it: Linux
    sends it SIGTERM when the parent dies (even by kill -9), so an interrupted run leaves no
    orphan broker or ZooKeeper holding ports. A no-op where prctl is not available."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass
