"""``moldau proxy``: a Kafka-protocol proxy that rewrites the broker addresses clients see.

For clients that cannot be changed (no ``broker.address.map``) and brokers whose advertised
addresses they cannot reach (NAT, Docker, cloud-internal names): the proxy listens on one
local port per upstream broker plus a bootstrap port, forwards every request byte for byte
and rewrites only the broker addresses in Metadata, FindCoordinator, DescribeCluster and
KIP-951 node endpoints so that clients come back to the proxy.

Imports only :mod:`moldau.protocol` and :mod:`moldau.client`.
"""

from .rewrite import needs_rewrite, rewrite_response
from .routes import PortPlan, Route, RouteTable
from .server import ProxyConfig, ProxyError, ProxyServer

__all__ = [
    "PortPlan", "ProxyConfig", "ProxyError", "ProxyServer", "Route", "RouteTable",
    "needs_rewrite", "rewrite_response",
]
