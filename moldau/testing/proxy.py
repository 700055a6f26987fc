"""Run ``moldau proxy`` for tests and benchmarks, and put it in front of the compat suite.

:class:`ProxyProcess` starts ``moldau proxy --json`` as a subprocess on free ports and reads
its JSON status lines (the ``started`` mapping, then ``route_added``/``route_moved`` events).

:func:`proxied_endpoint` is a compatibility-suite endpoint factory
(``MOLDAU_COMPAT_ENDPOINT=direct,moldau.testing.proxy:proxied_endpoint``): the broker
advertises ``broker.invalid:<port>``, a name that never resolves, so every client connection
after bootstrap that did not go through the proxy's rewritten addresses fails loudly; the
proxy reaches the broker through ``--address-map``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..devtools.processes import ChildProcess
from .processes import child_env, free_port
from .runner import BrokerProcess

__all__ = ["UNREACHABLE_HOST", "ProxyProcess", "free_port", "proxied_broker",
           "proxied_endpoint"]

UNREACHABLE_HOST = "broker.invalid"  # RFC 2606: never resolves


class ProxyProcess(ChildProcess):
    """A ``moldau proxy --json`` subprocess (127.0.0.1 and free ports unless ``args`` say
    otherwise); ``wrapper`` prefixes the command, e.g. to start it in a network namespace."""

    def __init__(
        self,
        bootstrap: str,
        *,
        address_map: str | None = None,
        args: Sequence[str] = (),
        log_path: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        wrapper: Sequence[str] = (),
    ) -> None:
        self.bootstrap_upstream = bootstrap
        self.wrapper = list(wrapper)  # e.g. ["ip", "netns", "exec", "lab-nat"]
        self.address_map = address_map
        self.args = list(args)
        self.env = dict(env or {})
        self._tmp = None
        if log_path is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="moldau-proxy-")
            log_path = Path(self._tmp.name) / "proxy.log"
        self.log_path = Path(log_path)
        self.proc: subprocess.Popen[str] | None = None
        self.events: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._reader: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------

    def command(self) -> list[str]:
        """The argv that starts the proxy (``wrapper`` first)."""
        cmd = [*self.wrapper, sys.executable, "-m", "moldau.cli.main", "proxy", "--json",
               "--bootstrap-server", self.bootstrap_upstream]
        if self.address_map:
            cmd += ["--address-map", self.address_map]
        return cmd + self.args

    def start(self, timeout: float = 30.0) -> ProxyProcess:
        """Start and wait for the ``started`` line; raises with the log on failure."""
        env = child_env(self.env)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command(), stdout=subprocess.PIPE, stderr=log,
                                         text=True, env=env)
        self._reader = threading.Thread(target=self._read, daemon=True, name="proxy-stdout")
        self._reader.start()
        try:
            self.wait_for(lambda e: e.get("event") == "started", timeout)
        except TimeoutError:
            code = self.proc.poll()
            self.kill()
            state = f"exited with {code}" if code is not None else f"not started in {timeout}s"
            raise RuntimeError(f"moldau proxy {state}:\n{self.log_text()}") from None
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._cond:
                self.events.append(event)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool],
                 timeout: float = 10.0) -> dict[str, Any]:
        """The first status event matching ``predicate`` (waiting up to ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for event in self.events:
                    if predicate(event):
                        return event
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc is not None and self.proc.poll() is not None
                                 and not (self._reader and self._reader.is_alive())):
                    raise TimeoutError("no matching proxy event; got: "
                                       + json.dumps(self.events))
                self._cond.wait(min(left, 0.5))

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM and wait; returns the exit status (0 when it was not running).
        ``kill()`` is kill -9 (:class:`~moldau.devtools.processes.ChildProcess`)."""
        code = self.wait_stopped(timeout)
        if code is None:
            return 0
        if self._reader is not None:
            self._reader.join(5)
        return code

    def close(self) -> None:
        self.kill()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> ProxyProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.close()

    # --- what it reported -----------------------------------------------------------------

    @property
    def started(self) -> dict[str, Any]:
        return self.wait_for(lambda e: e.get("event") == "started", 0)

    @property
    def bootstrap(self) -> str:
        """The ``bootstrap.servers`` for clients of the proxy (``127.0.0.1:<port>,...``)."""
        return str(self.started["bootstrap"]["servers"])

    def routes(self) -> dict[int, dict[str, Any]]:
        """Broker routes by node id, as last reported (started, added, moved)."""
        found: dict[int, dict[str, Any]] = {}
        with self._cond:
            for event in self.events:
                if event.get("event") == "started":
                    for route in event["routes"]:
                        if route["kind"] == "broker":
                            found[route["node_id"]] = route
                elif event.get("event") in ("route_added", "route_moved") and \
                        event.get("kind") == "broker":
                    found[event["node_id"]] = event
        return found

    def port(self, node_id: int) -> int:
        """The local port that stands for broker ``node_id``."""
        return int(self.routes()[node_id]["port"])

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@contextlib.contextmanager
def proxied_broker(settings: Mapping[str, Any] | None = None,
                   proxy_args: Sequence[str] = ()) -> Iterator[tuple[BrokerProcess, ProxyProcess]]:
    """A broker that advertises an unresolvable address, and a proxy that reaches it."""
    port = free_port()
    with BrokerProcess(settings={
        **(settings or {}),
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "advertised.listeners": f"PLAINTEXT://{UNREACHABLE_HOST}:{port}",
    }) as broker, ProxyProcess(
        broker.bootstrap, address_map=f"{UNREACHABLE_HOST}:{port}=127.0.0.1:{port}",
        args=proxy_args, log_path=broker.data_dir.parent / "proxy.log",
    ) as proxy:
        yield broker, proxy


@contextlib.contextmanager
def proxied_endpoint(settings: Mapping[str, Any]) -> Iterator[Any]:
    """Compat-suite endpoint: clients talk to ``moldau proxy`` in front of a broker whose
    advertised address (``broker.invalid``) they cannot reach."""
    # The endpoint type belongs to the suite (tests/compat/endpoint.py); imported here so
    # this module stays importable without the tests on the path.
    from tests.compat.endpoint import KafkaEndpoint, restart_in_place

    with proxied_broker(settings) as (broker, proxy):
        yield KafkaEndpoint(
            bootstrap=proxy.bootstrap,
            brokers={1: ("127.0.0.1", proxy.port(1))},
            cluster_id=broker.cluster_id,
            broker=broker,
            restart=lambda: restart_in_place(broker),
            name="proxy",
            extra={"proxy": proxy},
        )
