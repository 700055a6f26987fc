"""The broker process: the node's services plus the asyncio listeners and connections.

Start-up order: in cluster mode (``zookeeper.connect``) connect to ZooKeeper first
(:class:`~.zk.node.ZkBrokerNode`: chroot, cluster id); open the node
(:func:`~.startup.open_node`: log dirs, recovering logs after a crash, the metadata log
replayed into the image, the partitions it hosts, the group coordinator), bind the listeners
(port 0 picks a free port; the advertised port follows), register this broker with its
advertised endpoints (in cluster mode also as the ephemeral ``/brokers/ids/<id>``; a live
broker with the same id stops start-up), then start serving. Shutdown reverses it and leaves
a clean-shutdown marker so the next start skips recovery; a cluster broker first does a
controlled shutdown (:mod:`.controlled_shutdown`, ``controlled.shutdown.enable``).

Handlers never see this object: connections hand them :attr:`Broker.context`, the node's
:class:`~.services.NodeServices`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .config import BrokerConfig, Endpoint
from .connection import KafkaConnection
from .controlled_shutdown import controlled_shutdown
from .dispatch import load_handlers
from .memory_pool import MemoryPool
from .metadata.controller import Controller
from .metadata.image import MetadataImage
from .metadata.records import BrokerEndpoint
from .replica_manager import ReplicaManager
from .services import NodeServices
from .startup import close_node, housekeeping, open_node
from .zk.node import ZkBrokerNode

log = logging.getLogger(__name__)

# A flood of connections over max.connections is logged at most this often.
REFUSAL_LOG_INTERVAL_S = 10.0


@dataclass
class BoundListener:
    endpoint: Endpoint
    server: asyncio.base_events.Server
    port: int


class Broker:
    """A Moldau node (broker and controller in one process)."""

    def __init__(self, config: BrokerConfig, *, time_ms: Callable[[], int] | None = None) -> None:
        self.config = config
        self.node_id = config.node_id
        self.time_ms = time_ms or (lambda: int(time.time() * 1000))
        self.services: NodeServices | None = None
        self.cluster: ZkBrokerNode | None = None
        self._closed = False
        self.connections: set[KafkaConnection] = set()
        self.memory_pool = MemoryPool(config["queued.max.request.bytes"])
        self._refused = 0  # connections refused by max.connections since the last warning
        self._refused_logged = -REFUSAL_LOG_INTERVAL_S
        self._memory_waits = 0  # connections that waited for request memory, since the log
        self._memory_logged = -REFUSAL_LOG_INTERVAL_S
        self.bound: list[BoundListener] = []
        self._background: list[asyncio.Task[Any]] = []
        self._stopped = asyncio.Event()
        self._serving = False
        load_handlers()

    # --- the node's services -------------------------------------------------------------
    @property
    def context(self) -> NodeServices:
        """The node as request handlers see it (its services); set by :meth:`start`."""
        if self.services is None:
            raise RuntimeError("the broker is not started")
        return self.services

    # For tools, benchmarks and tests that inspect a running broker.
    @property
    def cluster_id(self) -> str:
        return self.services.cluster_id if self.services is not None else ""

    @property
    def image(self) -> MetadataImage:
        return self.context.image

    @property
    def controller(self) -> Controller:
        """This process's controller (active or not, in a cluster)."""
        return self.context.local_controller

    @property
    def replica_manager(self) -> ReplicaManager:
        return self.context.replica_manager

    # --- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        if self.config.cluster_mode:
            # Kafka's order: ZooKeeper first (the cluster id decides whether the log dirs
            # may be used), registration once the listeners are bound.
            self.cluster = ZkBrokerNode(self.config)
            await self.cluster.connect()
            await self.cluster.check_id_free()
        self.services = await open_node(self.config, time_ms=self.time_ms,
                                        cluster=self.cluster)
        self.spawn(housekeeping(self.services))
        await self._bind_listeners()
        await self._register()
        for bound in self.bound:
            await bound.server.start_serving()
        self._serving = True
        self.spawn(self._expire_idle_connections())
        log.info("[MoldauServer id=%s] started (cluster id %s); listening on %s",
                 self.node_id, self.cluster_id,
                 ", ".join(f"{b.endpoint.name}://{b.endpoint.host}:{b.port}"
                           for b in self.bound))

    async def _bind_listeners(self) -> None:
        loop = asyncio.get_running_loop()
        for endpoint in self.config.listeners.listeners:
            host = endpoint.host or None
            if host in ("0.0.0.0", "::"):
                host = None

            def factory(name: str = endpoint.name) -> KafkaConnection:
                return KafkaConnection(self, name)

            try:
                server = await loop.create_server(
                    factory, host=host, port=endpoint.port, reuse_address=True,
                    start_serving=False, backlog=1024,
                )
            except OSError as exc:
                raise OSError(
                    exc.errno,
                    f"Cannot bind listener {endpoint} (from listeners): {exc.strerror}. "
                    f"Is another broker using port {endpoint.port}, or is {endpoint.host!r} "
                    f"not an address of this machine?",
                ) from None
            port = server.sockets[0].getsockname()[1]
            self.bound.append(BoundListener(endpoint, server, port))

    def advertised_endpoints(self) -> list[BrokerEndpoint]:
        """Advertised listeners, with port 0 replaced by the port actually bound."""
        ports = {b.endpoint.name: b.port for b in self.bound}
        result = []
        for e in self.config.listeners.advertised:
            port = e.port or ports.get(e.name, e.port)
            result.append(BrokerEndpoint(e.name, e.host, port, e.protocol))
        return result

    async def _register(self) -> None:
        endpoints = self.advertised_endpoints()
        rack = self.config["broker.rack"]
        if self.cluster is not None:
            await self.cluster.register(endpoints, rack)
            return  # the image learns registrations from /brokers/ids
        await self.context.local_controller.register_broker(self.node_id, endpoints, rack)

    def bound_port(self, listener: str | None = None) -> int:
        for b in self.bound:
            if listener is None or b.endpoint.name == listener:
                return b.port
        raise KeyError(listener)

    # --- connection limits ---------------------------------------------------------------
    def admit(self, conn: KafkaConnection) -> bool:
        """Whether a newly accepted connection may stay (``max.connections``)."""
        limit = self.config["max.connections"]
        if len(self.connections) < limit:
            return True
        self._refused += 1
        now = time.monotonic()
        if now - self._refused_logged >= REFUSAL_LOG_INTERVAL_S:
            log.warning("closed %d new connection(s) (latest from %s:%s): max.connections=%d "
                        "connections are open; raise max.connections (and the file descriptor "
                        "limit, ulimit -n) or find the client that opens so many",
                        self._refused, conn.client_host, conn.client_port, limit)
            self._refused, self._refused_logged = 0, now
        return False

    def note_memory_wait(self) -> None:
        """A connection stops reading because request memory is used up: say so (at most
        every REFUSAL_LOG_INTERVAL_S), since all a client sees is slower answers."""
        self._memory_waits += 1
        now = time.monotonic()
        if now - self._memory_logged >= REFUSAL_LOG_INTERVAL_S:
            log.warning("request memory is used up (queued.max.request.bytes=%d, %d bytes in "
                        "requests being received or handled): %d time(s) a connection waited "
                        "before reading more; raise queued.max.request.bytes if this broker "
                        "has the memory", self.config["queued.max.request.bytes"],
                        self.memory_pool.used, self._memory_waits)
            self._memory_waits, self._memory_logged = 0, now

    def expire_idle_connections(self, now: float | None = None) -> int:
        """Close connections idle longer than ``connections.max.idle.ms``; return how many.

        Idle means no bytes read or written, and no request queued or in progress: a
        long-poll fetch or a group join that waits is not idle (Kafka's Selector expires
        by the last I/O the same way)."""
        limit_s = self.config["connections.max.idle.ms"] / 1000
        now = time.monotonic() if now is None else now
        expired = [c for c in self.connections if c.idle and now - c.last_active > limit_s]
        for conn in expired:
            log.debug("closing connection from %s:%s: idle for %d ms", conn.client_host,
                      conn.client_port, (now - conn.last_active) * 1000)
            conn.close()
        if expired:
            log.info("closed %d idle connection(s) (connections.max.idle.ms=%d)", len(expired),
                     self.config["connections.max.idle.ms"])
        return len(expired)

    async def _expire_idle_connections(self) -> None:
        # One timer for the whole broker; a connection is closed at most a quarter of the
        # limit (or 30 s) after it became idle for too long.
        interval_s = min(max(self.config["connections.max.idle.ms"] / 4000, 0.01), 30.0)
        while True:
            await asyncio.sleep(interval_s)
            try:
                self.expire_idle_connections()
            except Exception:
                log.exception("idle connection expiry failed")

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        """Run a background task that lives as long as the broker."""
        task = asyncio.ensure_future(coro)
        self._background.append(task)
        return task

    async def stop(self) -> None:
        if self._serving and self.cluster is not None and self.services is not None \
                and self.config["controlled.shutdown.enable"]:
            # Still serving meanwhile: clients keep being answered (and redirected) while
            # the controller moves leadership away.
            self._serving = False
            services = self.services
            await controlled_shutdown(
                node_id=self.node_id, image=services.image,
                listener=self.config.listeners.inter_broker_listener,
                max_retries=self.config["controlled.shutdown.max.retries"],
                backoff_ms=self.config["controlled.shutdown.retry.backoff.ms"],
                local=services.shut_down_broker)
        for bound in self.bound:
            bound.server.close()
        for conn in list(self.connections):
            conn.close()
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        if self.services is not None and not self._closed:
            self._closed = True
            if self.services.plane is not None:
                # Give up the controller (if held) and stop following ZooKeeper before the
                # logs close, so no metadata change reaches a closing replica manager.
                await self.services.plane.stop()
            await close_node(self.services)
        if self.cluster is not None:
            # Last: the registration disappears once the logs are closed cleanly.
            await self.cluster.close()
        self._stopped.set()
        log.info("[MoldauServer id=%s] shut down completed", self.node_id)

    async def wait_stopped(self) -> None:
        await self._stopped.wait()
