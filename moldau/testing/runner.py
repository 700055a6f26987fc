"""Run Moldau brokers for tests and benchmarks: in a subprocess or in a background thread.

Brokers bind 127.0.0.1 on port 0 by default (the OS picks a free port; the advertised port
follows), so tests never collide with other brokers on the machine. The subprocess runner
reads the bound ports from the broker's start-up log line.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..devtools.brokers import parse_started
from ..devtools.processes import ChildProcess
from ..protocol import properties
from .processes import child_env
from .tail import complete_lines


def _properties(settings: Mapping[str, Any]) -> str:
    return properties.dump((key, str(value)) for key, value in settings.items())


def default_settings(data_dir: Path, node_id: int = 1) -> dict[str, Any]:
    return {
        "node.id": node_id,
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(data_dir),
        "num.partitions": 1,
        "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 5,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0,
    }


class BrokerProcess(ChildProcess):
    """A ``moldau serve`` subprocess (for tests that kill -9, restart, or use real clients)."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        settings: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        *,
        node_id: int = 1,
        config_text: str | None = None,
    ) -> None:
        self._tmp = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="moldau-test-")
            data_dir = Path(self._tmp.name) / "data"
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.settings = default_settings(self.data_dir, node_id)
        self.settings.update(settings or {})
        self.env = dict(env or {})
        self.config_text = config_text
        self.proc: subprocess.Popen[bytes] | None = None
        self.ports: dict[str, int] = {}
        self.cluster_id = ""
        self.log_path = self.data_dir.parent / f"broker-{node_id}.log"
        self.config_path = self.data_dir.parent / f"server-{node_id}.properties"

    @property
    def bootstrap(self) -> str:
        name = next(iter(self.ports))
        return f"127.0.0.1:{self.ports[name]}"

    def port(self, listener: str = "PLAINTEXT") -> int:
        return self.ports[listener]

    def start(self, timeout: float = 30.0, *, extra_args: list[str] | None = None) -> BrokerProcess:
        text = self.config_text if self.config_text is not None else _properties(self.settings)
        self.config_path.write_text(text)
        env = child_env(self.env)
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        start_at = self.log_path.stat().st_size
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moldau.cli.main", "serve", "--config",
             str(self.config_path), *(extra_args or [])],
            stdout=log, stderr=subprocess.STDOUT, env=env,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            # The broker is still writing its log: a half-written last line would give a
            # port cut short ("...:4" of ":45678").
            for line in complete_lines(self.log_path, start_at):
                started = parse_started(line)
                if started is not None:
                    self.cluster_id, self.ports = started
                    return self
            if self.proc.poll() is not None:
                text_now = self.log_path.read_bytes()[start_at:].decode(errors="replace")
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{text_now}")
            time.sleep(0.05)
        self.kill()
        raise TimeoutError(f"broker did not start within {timeout}s; log: {self.log_path}")

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait (clean shutdown); its exit status (0 when it was not running).
        ``kill()`` is kill -9 (:class:`~moldau.devtools.processes.ChildProcess`)."""
        code = self.wait_stopped(timeout)
        return 0 if code is None else code

    def wait_for_log(self, pattern: re.Pattern[str], offset: int, timeout: float,
                     what: str) -> re.Match[str]:
        """The first match of ``pattern`` in the log after byte ``offset`` (the ready line of
        a service the broker runs in-process); RuntimeError if the broker exits first,
        TimeoutError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            found = pattern.search(self.log_path.read_bytes()[offset:].decode(errors="replace"))
            if found:
                return found
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n"
                                   f"{self.log_text()[offset:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} did not start within {timeout}s; "
                                   f"log: {self.log_path}")
            time.sleep(0.05)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def close(self) -> None:
        self.kill()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.close()


class InProcessBroker:
    """A broker on its own event loop in a background thread (fast start, inspectable)."""

    def __init__(self, data_dir: str | os.PathLike[str] | None = None,
                 settings: Mapping[str, Any] | None = None, *, node_id: int = 1) -> None:
        from ..broker.config import build_config

        self._tmp = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="moldau-test-")
            data_dir = Path(self._tmp.name) / "data"
        raw = {k: str(v) for k, v in default_settings(Path(data_dir), node_id).items()}
        raw.update({k: str(v) for k, v in (settings or {}).items()})
        self.config = build_config(raw)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                       name="moldau-broker")
        self.broker: Any = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.broker.bound_port()}"

    def call(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` on the broker's loop and return its result (awaited when it is
        awaitable, e.g. a controller operation)."""

        async def run() -> Any:
            result = fn(*args)
            return await result if inspect.isawaitable(result) else result

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def start(self) -> InProcessBroker:
        from ..broker.server import Broker

        self.thread.start()

        async def boot() -> Any:
            broker = Broker(self.config)
            await broker.start()
            return broker

        self.broker = asyncio.run_coroutine_threadsafe(boot(), self.loop).result(60)
        return self

    def stop(self) -> None:
        if self.broker is not None:
            asyncio.run_coroutine_threadsafe(self.broker.stop(), self.loop).result(60)
            self.broker = None
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> InProcessBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
