"""Which local port stands for which upstream broker, and where that broker really is.

A :class:`Route` ties one upstream node (a broker, or a controller from DescribeCluster with
``endpoint_type`` 2) to one listening port of the proxy. The table learns nodes from the
responses that pass through (and from the proxy's own start-up Metadata request): a node id
seen for the first time gets a new route, a node whose advertised address changed keeps its
port and gets a new upstream address. ``broker.address.map`` turns the advertised address
into the one the proxy connects to.

Pure bookkeeping: binding the listening sockets is the server's business.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from moldau.client.address_map import AddressMap

from .rewrite import BROKER


def format_address(host: str, port: int) -> str:
    """``host:port``, with brackets around IPv6 literals."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Change(Enum):
    """What :meth:`RouteTable.observe` found."""

    NEW = "new"
    MOVED = "moved"
    SAME = "same"


@dataclass
class Route:
    """One upstream node and the proxy port that stands for it.

    ``advertised`` is the address the cluster gives for the node, ``upstream`` the address the
    proxy connects to (``advertised`` after the address map), ``port`` the proxy's listening
    port (0 until the listener is bound; -1 when binding failed).
    """

    kind: str
    node_id: int
    advertised: tuple[str, int]
    upstream: tuple[str, int]
    port: int = 0
    error: str | None = None

    @property
    def name(self) -> str:
        """``broker 1`` or ``controller 3000``."""
        return f"{self.kind} {self.node_id}"

    def describe(self) -> str:
        """``broker 1 at 10.0.0.5:9092`` (plus ``via HOST:PORT`` when the address map applies)."""
        text = f"{self.name} at {format_address(*self.advertised)}"
        if self.upstream != self.advertised:
            text += f" (via {format_address(*self.upstream)})"
        return text

    def to_json(self) -> dict[str, object]:
        """The route as a JSON-ready dict (for ``--json`` status lines)."""
        return {
            "kind": self.kind,
            "node_id": self.node_id,
            "port": self.port,
            "advertised": format_address(*self.advertised),
            "upstream": format_address(*self.upstream),
            **({"error": self.error} if self.error else {}),
        }


@dataclass
class PortPlan:
    """How listening ports are chosen.

    ``explicit`` pins broker ids to ports; otherwise, with ``base`` set, broker ``n`` listens
    on ``base + n``; otherwise the OS picks a free port (0). Controllers get free ports.
    ``bootstrap`` lists ports for bootstrap servers that are not also a broker's address (an
    alias, a load balancer), in order; those not listed get free ports.
    """

    base: int | None = None
    explicit: dict[int, int] = field(default_factory=dict)
    bootstrap: list[int] = field(default_factory=list)

    def port_for(self, kind: str, node_id: int) -> int:
        """The port to bind for a node (0: any free port)."""
        if kind == BROKER and node_id in self.explicit:
            return self.explicit[node_id]
        if kind == BROKER and self.base is not None:
            port = self.base + node_id
            if not 0 < port < 65536:
                raise ValueError(
                    f"--port-base {self.base} gives broker {node_id} port {port}, outside "
                    "1-65535; choose a lower --port-base or pin it with --broker-port "
                    f"{node_id}=PORT"
                )
            return port
        return 0

    def bootstrap_port(self, index: int) -> int:
        """The port of the ``index``-th separate bootstrap listener (0: a free one)."""
        return self.bootstrap[index] if index < len(self.bootstrap) else 0


class RouteTable:
    """Routes by ``(kind, node_id)``, fed by every address the proxy sees."""

    def __init__(self, address_map: AddressMap | None = None) -> None:
        self.address_map = address_map or AddressMap()
        self.routes: dict[tuple[str, int], Route] = {}

    def get(self, kind: str, node_id: int) -> Route | None:
        return self.routes.get((kind, node_id))

    def observe(self, kind: str, node_id: int, host: str, port: int) -> tuple[Route, Change]:
        """Record that the cluster advertises node ``node_id`` at ``host:port``.

        Returns the route and whether it is new, moved (the advertised address changed: the
        port stays, the upstream address follows) or the same as before.
        """
        upstream = self.address_map.apply(host, port)
        key = (kind, node_id)
        route = self.routes.get(key)
        if route is None:
            route = Route(kind, node_id, (host, port), upstream)
            self.routes[key] = route
            return route, Change.NEW
        if route.advertised == (host, port) and route.upstream == upstream:
            return route, Change.SAME
        route.advertised = (host, port)
        route.upstream = upstream
        return route, Change.MOVED

    def by_upstream(self, host: str, port: int) -> Route | None:
        """The bound broker route whose upstream address is ``host:port``, if any."""
        for route in self.routes.values():
            if route.kind == BROKER and route.port > 0 and \
                    (route.upstream[0].lower(), route.upstream[1]) == (host.lower(), port):
                return route
        return None

    def by_port(self) -> dict[int, Route]:
        """Bound routes by local port."""
        return {r.port: r for r in self.routes.values() if r.port > 0}

    def sorted(self) -> list[Route]:
        """Routes, brokers first, by node id."""
        return sorted(self.routes.values(), key=lambda r: (r.kind != BROKER, r.node_id))
