"""The proxy server: listeners, broker discovery, address resolution, shutdown.

At start the proxy asks the upstream cluster for Metadata (through the bootstrap addresses,
with the address map applied, as any Moldau client would), opens one listening port per
broker, and reports the mapping. A bootstrap server whose address is a broker's (after the
address map) is served by that broker's port; any other bootstrap address (an alias, a load
balancer) gets a port of its own that forwards to it. From then on every Metadata,
FindCoordinator, DescribeCluster (and KIP-951 node endpoint) answer that passes through
updates the route table: a new node id gets a new port before the answer reaches the client,
a changed address redirects new connections.

Listening sockets are bound synchronously (the kernel queues connections in the backlog
until asyncio serves them), so a rewritten answer never names a port that is not listening.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from moldau.client.address_map import AddressMap
from moldau.client.cluster import Cluster
from moldau.client.config import parse_config

from .relay import ClientSide
from .rewrite import BROKER
from .routes import Change, PortPlan, Route, RouteTable, format_address

log = logging.getLogger("moldau.proxy")

_BACKLOG = 512
# Repeated identical connection failures are logged at most this often.
_REPEAT_LOG_S = 30.0


def _fixed_target(address: tuple[str, int],
                  what: str) -> Callable[[], list[tuple[tuple[str, int], str]]]:
    return lambda: [(address, what)]


class ProxyError(Exception):
    """The proxy cannot start (bad settings, no bootstrap server answers, port in use)."""


@dataclass
class ProxyConfig:
    """Settings of ``moldau proxy`` (see :mod:`moldau.cli.proxy` for the flags)."""

    bootstrap_servers: list[tuple[str, int]]
    listen_host: str = "127.0.0.1"
    advertised_host: str | None = None
    ports: PortPlan = field(default_factory=PortPlan)
    address_map: AddressMap = field(default_factory=AddressMap)
    connect_timeout_ms: int = 10000
    startup_timeout_ms: int = 30000

    def __post_init__(self) -> None:
        if not self.bootstrap_servers:
            raise ProxyError("--bootstrap-server is required: HOST:PORT[,HOST:PORT...]")
        if self.advertised_host is None:
            if self.listen_host in ("0.0.0.0", "::", ""):
                raise ProxyError(
                    f"--listen-host {self.listen_host or '(empty)'} listens on every "
                    "interface, which is no address a client can connect to: also give "
                    "--advertised-host HOST (the name or IP clients use to reach the proxy)"
                )
            self.advertised_host = self.listen_host
        elif self.advertised_host in ("0.0.0.0", "::"):
            raise ProxyError(
                f"--advertised-host {self.advertised_host} is not an address a client can "
                "connect to; give the proxy's host name or IP as clients see it"
            )


class ProxyServer:
    """A running proxy. ``await start()``, then ``await stop()`` (or ``serve_until``)."""

    def __init__(self, config: ProxyConfig,
                 on_event: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.config = config
        self.on_event = on_event or (lambda event: None)
        self.routes = RouteTable(config.address_map)
        self.connections: set[ClientSide] = set()
        self.bootstrap: list[dict[str, Any]] = []  # port, upstream, node_id (None: separate)
        self._servers: list[asyncio.AbstractServer] = []
        self._pending: set[asyncio.Task[None]] = set()
        self._warned: set[object] = set()
        self._last_failure: dict[tuple[str, str], float] = {}
        self._stopped = False

    @property
    def advertised_host(self) -> str:
        assert self.config.advertised_host is not None
        return self.config.advertised_host

    # --- start ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Discover the brokers, bind every listener, report the mapping.

        Raises ProxyError when no bootstrap server answers within ``startup_timeout_ms`` or
        a port cannot be bound.
        """
        brokers = await self._discover()
        for node_id, host, port in brokers:
            route, _ = self.routes.observe(BROKER, node_id, host, port)
            self._open_listener(route)
            if route.port < 0:
                await self.stop()
                raise ProxyError(f"cannot listen for {route.name}: {route.error}")
        await asyncio.gather(*self._pending)
        await self._open_bootstrap_listeners()
        for route in self.routes.sorted():
            log.info("port %d -> %s", route.port, route.describe())
        for entry in self.bootstrap:
            if entry["node_id"] is None:
                log.info("port %d -> bootstrap server %s", entry["port"], entry["upstream"])
        log.info("clients bootstrap from %s", self.bootstrap_servers)
        self.on_event({"event": "started", **self.status()})

    async def _open_bootstrap_listeners(self) -> None:
        """A port per bootstrap server: the broker's own when the address is a broker's
        (so clients see their bootstrap address among the brokers), else a separate one."""
        separate = 0
        for host, port in self.config.bootstrap_servers:
            route = self.routes.by_upstream(host, port)
            if route is not None:
                entry = {"port": route.port, "upstream": format_address(host, port),
                         "node_id": route.node_id}
            else:
                wanted = self.config.ports.bootstrap_port(separate)
                separate += 1
                try:
                    sock = self._bind(wanted)
                except OSError as exc:
                    await self.stop()
                    raise ProxyError(
                        f"cannot listen on {format_address(self.config.listen_host, wanted)} "
                        f"for bootstrap server {format_address(host, port)}: "
                        f"{exc.strerror or exc}"
                    ) from None
                what = f"bootstrap server {format_address(host, port)}"
                await self._serve(sock, what, _fixed_target((host, port), what))
                entry = {"port": sock.getsockname()[1], "upstream": format_address(host, port),
                         "node_id": None}
            if all(e["port"] != entry["port"] for e in self.bootstrap):
                self.bootstrap.append(entry)

    @property
    def bootstrap_servers(self) -> str:
        """The ``bootstrap.servers`` value clients of the proxy use."""
        return ",".join(format_address(self.advertised_host, e["port"]) for e in self.bootstrap)

    async def _discover(self) -> list[tuple[int, str, int]]:
        cfg = parse_config("admin", {
            "bootstrap.servers": [format_address(*a) for a in self.config.bootstrap_servers],
            "broker.address.map": self.config.address_map,
            "client.id": "moldau-proxy",
            "default.api.timeout.ms": self.config.startup_timeout_ms,
            "socket.connection.setup.timeout.ms": self.config.connect_timeout_ms,
            "request.timeout.ms": self.config.connect_timeout_ms,
        })
        cluster = Cluster(cfg)
        log.info("discovering the cluster from %s", ", ".join(
            format_address(*a) for a in self.config.bootstrap_servers))
        try:
            await cluster.start()
        except Exception as exc:
            raise ProxyError(
                "cannot fetch metadata from the upstream cluster at "
                f"{', '.join(format_address(*a) for a in self.config.bootstrap_servers)}: "
                f"{exc}"
            ) from None
        finally:
            await cluster.close()
        return [
            (b.node_id, *(b.advertised or (b.host, b.port)))
            for b in sorted(cluster.brokers.values(), key=lambda b: b.node_id)
        ]

    def status(self) -> dict[str, Any]:
        """The current mapping as a JSON-ready dict."""
        return {
            "listen_host": self.config.listen_host,
            "advertised_host": self.advertised_host,
            "bootstrap": {"servers": self.bootstrap_servers, "listeners": self.bootstrap},
            "routes": [r.to_json() for r in self.routes.sorted()],
        }

    # --- listeners ------------------------------------------------------------------------

    def _bind(self, port: int) -> socket.socket:
        host = self.config.listen_host
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
        family, kind, proto, _name, address = infos[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(_BACKLOG)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        return sock

    async def _serve(self, sock: socket.socket, listener: str,
                     targets: Callable[[], list[tuple[tuple[str, int], str]]]) -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: ClientSide(self, listener, targets), sock=sock)
        if self._stopped:
            server.close()
            return
        self._servers.append(server)

    def _open_listener(self, route: Route) -> None:
        """Bind the route's port now; start serving it on the next loop iteration."""
        try:
            wanted = self.config.ports.port_for(route.kind, route.node_id)
            sock = self._bind(wanted)
        except (OSError, ValueError) as exc:
            route.port = -1
            route.error = (
                f"cannot listen on {format_address(self.config.listen_host, wanted)}: "
                f"{getattr(exc, 'strerror', None) or exc}"
                if isinstance(exc, OSError) else str(exc)
            )
            log.error("%s: %s; clients are given its own address", route.describe(),
                      route.error)
            self.on_event({"event": "listener_error", **route.to_json()})
            return
        route.port = sock.getsockname()[1]
        task = asyncio.get_running_loop().create_task(
            self._serve(sock, route.name, lambda: self._node_targets(route)))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    def _node_targets(self, route: Route) -> list[tuple[tuple[str, int], str]]:
        return [(route.upstream, route.describe())]

    # --- what relays call -----------------------------------------------------------------

    def resolve(self, kind: str, node_id: int, host: str, port: int) -> tuple[str, int] | None:
        """The proxy address to give clients for a node the cluster advertises (learning it)."""
        route, change = self.routes.observe(kind, node_id, host, port)
        if change is Change.NEW:
            self._open_listener(route)
            if route.port > 0:
                log.info("new %s: port %d -> %s", route.name, route.port, route.describe())
                self.on_event({"event": "route_added", **route.to_json()})
        elif change is Change.MOVED:
            log.info("%s moved: port %d -> %s (new connections)", route.name, route.port,
                     route.describe())
            self.on_event({"event": "route_moved", **route.to_json()})
        if route.port <= 0:
            return None
        return self.advertised_host, route.port

    def report_unreachable(self, listener: str, peer: str, failures: list[str]) -> None:
        """Log that a client's connection was closed because its broker is unreachable."""
        reason = "; ".join(failures) or "no upstream address known"
        key = (listener, reason)
        now = time.monotonic()
        if now - self._last_failure.get(key, -_REPEAT_LOG_S) < _REPEAT_LOG_S:
            return
        self._last_failure[key] = now
        hint = ""
        if not listener.startswith("bootstrap"):
            hint = (" (the proxy connects to the address the cluster advertises for this node;"
                    " if the proxy cannot reach it, map it with --address-map "
                    "ADVERTISED=REACHABLE)")
        log.error("closed client %s on %s's port: cannot connect to %s%s", peer, listener,
                  reason, hint)

    def warn_once(self, key: object, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning("%s", message)

    # --- stop -----------------------------------------------------------------------------

    async def stop(self) -> None:
        """Stop listening and close every proxied connection."""
        self._stopped = True
        for task in list(self._pending):
            task.cancel()
        for server in self._servers:
            server.close()
        for conn in list(self.connections):
            conn.abort()
        self._servers.clear()
        await asyncio.sleep(0)
