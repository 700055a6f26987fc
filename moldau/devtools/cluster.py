"""A local cluster: a ZooKeeper (started here, or an existing one) and N ``moldau serve``
brokers, with all data under one directory.

    <base>/zookeeper/zk-1/   zoo.cfg, data/, zookeeper.log   (only when ZooKeeper is ours)
    <base>/broker-<id>/      server.properties, data/ (log.dirs), broker.log

:meth:`LocalCluster.start` starts ZooKeeper, then every broker at once, waits for each one's
start-up line and then for every registration under ``/brokers/ids`` (read with kazoo, as
``zkCli.sh ls /brokers/ids`` would). :meth:`LocalCluster.stop` stops the brokers that are
not the controller first, then the controller (each with SIGTERM, so it shuts down in a
controlled way, and kill -9 after a bound), then ZooKeeper, each by its pid.

Used by ``moldau dev-cluster`` and, through :mod:`moldau.testing.cluster`, by the tests.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .brokers import (
    LOCAL_DEFAULTS,
    BrokerNode,
    BrokerSpec,
    BrokerStartError,
    internal_topic_defaults,
)
from .processes import free_ports
from .zookeeper import ZooKeeperEnsemble

if TYPE_CHECKING:
    from kazoo.client import KazooClient

_START_ATTEMPTS = 3


class ClusterError(RuntimeError):
    """The cluster did not come up (or a wait ran out); the message says what and where."""


def plain_specs(count: int, *, base_port: int | None = None,
                settings: Mapping[str, str] | None = None) -> list[BrokerSpec]:
    """``count`` brokers with ids 1..count and one PLAINTEXT listener each, on
    ``base_port``, ``base_port + 1``, ... when given (as Kafka's quickstart uses 9092, 9093,
    9094), else on free ports."""
    return [
        BrokerSpec(broker_id=i, settings=dict(settings or {}),
                   ports={"PLAINTEXT": base_port + i - 1} if base_port is not None else {})
        for i in range(1, count + 1)
    ]


class LocalCluster:
    """ZooKeeper plus the brokers of ``specs`` (see :class:`~.brokers.BrokerSpec`).

    ``zookeeper`` is the connect string of an existing ZooKeeper (with its chroot, if any);
    without it a standalone ZooKeeper is started under ``<base>/zookeeper`` and ``chroot`` (if
    given) is appended to its address. ``base_dir`` defaults to a temporary directory removed
    by :meth:`close`. ``style`` is ``properties`` or ``env`` (see :mod:`.brokers`).
    ``isolate`` starts every child in its own session and ties it to this process's life
    (what a command run at a terminal wants: Ctrl-C reaches only the parent, which stops the
    children in order).
    """

    def __init__(
        self,
        specs: Sequence[BrokerSpec] | int = 3,
        base_dir: str | os.PathLike[str] | None = None,
        *,
        zookeeper: str | None = None,
        chroot: str = "",
        style: str = "properties",
        defaults: Mapping[str, str] = LOCAL_DEFAULTS,
        isolate: bool = False,
    ) -> None:
        self.specs = plain_specs(specs) if isinstance(specs, int) else list(specs)
        ids = [spec.broker_id for spec in self.specs]
        if len(set(ids)) != len(ids):
            raise ValueError(f"broker ids must differ, got {ids}")
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if base_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix=f"moldau-cluster-{os.getpid()}-")
            base_dir = self._tmp.name
        self.base_dir = Path(base_dir)
        self.external_zookeeper = zookeeper
        self.chroot = chroot
        self.style = style
        # offsets.topic.replication.factor follows the cluster's size unless defaults say
        self.defaults = {**internal_topic_defaults(len(self.specs)), **defaults}
        self.isolate = isolate
        self.zookeeper: ZooKeeperEnsemble | None = None
        self.brokers: dict[int, BrokerNode] = {}
        self._kazoo: KazooClient | None = None

    # -- addresses ---------------------------------------------------------------------------

    @property
    def zookeeper_connect(self) -> str:
        """``zookeeper.connect`` of every broker: host list plus chroot."""
        if self.external_zookeeper is not None:
            return self.external_zookeeper
        if self.zookeeper is None:
            raise ClusterError("ZooKeeper is not started")
        return self.zookeeper.connect(self.chroot)

    def bootstrap(self, listener: str | None = None, ids: Iterable[int] | None = None) -> str:
        """``bootstrap.servers`` over the brokers (all, or ``ids``) on one listener (each
        broker's first by default); brokers without that listener are left out."""
        chosen = [self.brokers[i] for i in (ids if ids is not None else sorted(self.brokers))]
        return ",".join(node.address(listener) for node in chosen
                        if listener is None or listener in node.spec.listeners)

    def broker(self, broker_id: int) -> BrokerNode:
        return self.brokers[broker_id]

    # -- start and stop ----------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> LocalCluster:
        """Start ZooKeeper (unless given), every broker, and wait until all are registered."""
        self.base_dir.mkdir(parents=True, exist_ok=True)
        try:
            if self.external_zookeeper is None and self.zookeeper is None:
                self.zookeeper = ZooKeeperEnsemble(
                    1, self.base_dir / "zookeeper", isolate=self.isolate).start(timeout)
            connect = self.zookeeper_connect
            self.brokers = {
                spec.broker_id: BrokerNode(spec, self.base_dir, connect, style=self.style,
                                           defaults=self.defaults, isolate=self.isolate)
                for spec in self.specs
            }
            self._start_brokers(list(self.brokers.values()), timeout)
            self.wait_registered(timeout=timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_brokers(self, nodes: list[BrokerNode], timeout: float) -> None:
        """Spawn all, then wait for each start-up line. A broker whose picked port was taken
        in between is retried on fresh ports; one whose id is still registered by an old
        session (its previous life, killed, or a ZooKeeper restarted with the sessions of
        before) is retried once that registration has expired."""
        for attempt in range(1, _START_ATTEMPTS + 1):
            free = free_ports(sum(node.ports_needed() for node in nodes))
            for node in nodes:
                node.assign_ports(free)
            started = {node.broker_id: node.spawn() for node in nodes}
            deadline = time.monotonic() + timeout
            retry: list[BrokerNode] = []
            waiting = list(nodes)
            while waiting:
                for node in list(waiting):
                    try:
                        done = node.poll_started(started[node.broker_id])
                    except BrokerStartError as exc:
                        if attempt == _START_ATTEMPTS or not self._retryable(node, exc):
                            raise
                        node.proc = None
                        retry.append(node)
                        done = True
                    if done:
                        waiting.remove(node)
                if waiting and time.monotonic() > deadline:
                    node = waiting[0]
                    raise ClusterError(
                        f"broker {node.broker_id} did not log its start-up line within "
                        f"{timeout:.0f} s (log {node.log_path}):\n{node.log_tail()}")
                time.sleep(0.05)
            if not retry:
                return
            for node in retry:
                if node.broker_id in self.registered_ids():
                    self._wait_old_registration(node)
            nodes = retry

    @staticmethod
    def _retryable(node: BrokerNode, exc: BrokerStartError) -> bool:
        if exc.id_taken:
            return True
        if exc.port_taken and any(n not in node.spec.ports for n in node.spec.listeners):
            node.forget_picked_ports()
            return True
        return False

    def _wait_old_registration(self, node: BrokerNode) -> None:
        """Wait (up to the broker's session timeout and a margin) for an old session's
        registration of this id to expire; a live broker that holds it is not waited out."""
        session_s = int(node.settings().get("zookeeper.session.timeout.ms", "18000")) / 1000
        deadline = time.monotonic() + session_s + 10
        while node.broker_id in self.registered_ids() and time.monotonic() < deadline:
            time.sleep(0.2)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the brokers (the controller last), then ZooKeeper; every process by its pid,
        SIGTERM first and kill -9 after ``timeout`` s."""
        controller = self.controller_id(retry_s=0) if self._kazoo_usable() else None
        first = [n for n in self.brokers.values() if n.broker_id != controller]
        last = [n for n in self.brokers.values() if n.broker_id == controller]
        for group in (first, last):
            for node in group:
                node.terminate()
            for node in group:
                node.wait_stopped(timeout)
        self._close_kazoo()
        if self.zookeeper is not None:
            self.zookeeper.stop()

    def close(self) -> None:
        """Stop everything and remove the temporary base directory (if this object made it)."""
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what ZooKeeper says -----------------------------------------------------------------

    def kazoo(self) -> KazooClient:
        """A started kazoo client rooted at the brokers' chroot (made on first use)."""
        if self._kazoo is None:
            from kazoo.client import KazooClient
            from kazoo.retry import KazooRetry

            # reconnect at least every second (kazoo's default backs off to a minute): after
            # a ZooKeeper restart a session survives only if its client is back in time
            client = KazooClient(hosts=self.zookeeper_connect, timeout=10.0,
                                 connection_retry=KazooRetry(max_tries=-1, delay=0.1,
                                                             backoff=2, max_delay=1.0))
            client.start(30)
            self._kazoo = client
        return self._kazoo

    def _kazoo_usable(self) -> bool:
        """Whether a connected client exists (stopping never waits to open one: the
        ZooKeeper may be the reason the start failed)."""
        return self._kazoo is not None and bool(self._kazoo.connected)

    def _close_kazoo(self) -> None:
        if self._kazoo is not None:
            self._kazoo.stop()
            self._kazoo.close()
            self._kazoo = None

    def read_json(self, path: str, retry_s: float = 60.0) -> Any:
        """The JSON data of a znode, or None when it does not exist (retried for up to
        ``retry_s`` while the client reconnects)."""
        from kazoo.exceptions import NoNodeError

        try:
            data, _stat = self._retrying(lambda: self.kazoo().get(path), retry_s)
        except NoNodeError:
            return None
        return json.loads(data) if data else None

    def registered_ids(self) -> list[int]:
        """The broker ids under ``/brokers/ids`` (sorted)."""
        from kazoo.exceptions import NoNodeError

        try:
            return sorted(int(child) for child in self._retrying(
                lambda: self.kazoo().get_children("/brokers/ids")))
        except NoNodeError:
            return []

    def _retrying(self, read: Any, timeout: float = 60.0) -> Any:
        """``read()``, retried while this client reconnects (its session may have expired
        while ZooKeeper was down: kazoo then opens a new one by itself)."""
        from kazoo.exceptions import ConnectionLoss, SessionExpiredError

        deadline = time.monotonic() + timeout
        while True:
            try:
                return read()
            except (ConnectionLoss, SessionExpiredError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def registration(self, broker_id: int) -> dict[str, Any] | None:
        """``/brokers/ids/<id>`` (endpoints, rack, ...) or None."""
        return self.read_json(f"/brokers/ids/{broker_id}")  # type: ignore[no-any-return]

    def controller_id(self, retry_s: float = 60.0) -> int | None:
        """The broker id in ``/controller``, or None when no controller is elected."""
        from kazoo.exceptions import KazooException
        from kazoo.handlers.threading import KazooTimeoutError

        try:
            data = self.read_json("/controller", retry_s)
        except (KazooException, KazooTimeoutError):
            return None  # ZooKeeper unreachable (stopping, or a test stopped it)
        return int(data["brokerid"]) if data else None

    def wait_registered(self, ids: Iterable[int] | None = None,
                        timeout: float = 120.0) -> None:
        """Wait until every broker (or ``ids``) is registered under ``/brokers/ids``."""
        wanted = set(self.brokers if ids is None else ids)
        deadline = time.monotonic() + timeout
        while True:
            missing = wanted - set(self.registered_ids())
            if not missing:
                return
            for broker_id in sorted(missing):
                node = self.brokers.get(broker_id)
                if node is not None and node.proc is not None and node.proc.poll() is not None:
                    raise ClusterError(
                        f"broker {broker_id} exited with {node.proc.returncode} before "
                        f"registering in ZooKeeper ({self.zookeeper_connect}); its log "
                        f"{node.log_path} ends:\n{node.log_tail()}")
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"broker(s) {sorted(missing)} not registered under /brokers/ids of "
                    f"{self.zookeeper_connect} after {timeout:.0f} s (registered: "
                    f"{self.registered_ids()}); see broker.log in "
                    + ", ".join(str(self.brokers[i].dir) for i in sorted(missing)
                                if i in self.brokers))
            time.sleep(0.1)

