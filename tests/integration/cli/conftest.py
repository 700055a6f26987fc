"""Fixtures for the ``moldau`` command tests: one broker subprocess per session, and a
helper that runs the real console script (``python -m moldau``) in subprocesses.

Each subprocess costs about half a second of start-up, so tests batch their commands and
run independent ones concurrently (:func:`moldau_many`).
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pytest

from moldau.testing.runner import BrokerProcess

MOLDAU = [sys.executable, "-m", "moldau"]
_names = itertools.count()


@dataclass
class Result:
    """Exit status and output of one command."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    def ok(self) -> Result:
        assert self.returncode == 0, f"{self.args} exited {self.returncode}:\n{self.stderr}"
        assert "Traceback" not in self.stderr, self.stderr
        return self

    def failed(self, code: int = 1) -> Result:
        assert self.returncode == code, (
            f"{self.args} exited {self.returncode}, expected {code}:\n{self.stdout}\n{self.stderr}")
        assert "Traceback" not in self.stderr, self.stderr
        return self


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _start(args: Sequence[str], stdin: str | bytes | None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*MOLDAU, *args], stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(),
    )


def _finish(proc: subprocess.Popen[bytes], args: Sequence[str], stdin: str | bytes | None,
            timeout: float) -> Result:
    data = stdin.encode() if isinstance(stdin, str) else stdin
    try:
        out, err = proc.communicate(data, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"moldau {' '.join(args)} did not finish within {timeout} s:\n"
                             f"{out.decode(errors='replace')}\n{err.decode(errors='replace')}"
                             ) from None
    return Result(list(args), proc.returncode, out.decode("utf-8", "surrogateescape"),
                  err.decode("utf-8", "replace"))


def moldau(*args: str, stdin: str | bytes | None = None, timeout: float = 60) -> Result:
    """Run ``moldau ARGS`` and return its exit status and output."""
    return _finish(_start(args, stdin), args, stdin, timeout)


def moldau_many(*calls: list[str] | tuple[list[str], str | bytes | None],
                timeout: float = 60) -> list[Result]:
    """Run several independent commands at once; results in the order given.

    Each call is an argument list, or a tuple (argument list, stdin).
    """
    started = []
    for call in calls:
        args, stdin = call if isinstance(call, tuple) else (call, None)
        started.append((_start(args, stdin), args, stdin))
    return [_finish(p, a, s, timeout) for p, a, s in started]


def unique(prefix: str) -> str:
    """A topic or group name not used by any other test of the session."""
    return f"{prefix}-{os.getpid()}-{next(_names)}"


def kcat(*args: str, stdin: str | None = None, timeout: float = 30) -> str:
    """Run kcat (Debian's package, installed by ``make test``) and return stdout."""
    path = shutil.which("kcat")
    if path is None:
        pytest.fail("kcat is not installed (make test installs it)", pytrace=False)
    done = subprocess.run([path, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="session")
def broker() -> Iterator[BrokerProcess]:
    """A single-node broker for the whole CLI test session (auto-creation on)."""
    with BrokerProcess(settings={"auto.create.topics.enable": "true"}) as proc:
        # The broker creates __consumer_offsets on the first group lookup, as Kafka does; look
        # one up now so that listings are the same in every test.
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        admin.describe_consumer_groups(["cli-tests-warm-up"])["cli-tests-warm-up"].result(30)
        deadline = time.monotonic() + 30
        while "__consumer_offsets" not in admin.list_topics(timeout=10).topics:
            assert time.monotonic() < deadline, "__consumer_offsets was not created"
            time.sleep(0.1)
        yield proc


@pytest.fixture(scope="session")
def bootstrap(broker: BrokerProcess) -> str:
    return broker.bootstrap
