"""One TCP connection to one broker: :class:`BrokerConnection`.

The connection itself (framing, pipelining, version negotiation, timeouts) is
:mod:`moldau.wire.connection`, shared with the broker's own outbound connections; the client
adds what only a client can say about a broker's address: that ``broker.address.map`` can
rewrite it.
"""

from __future__ import annotations

from moldau.wire.connection import MAX_RESPONSE_FRAME
from moldau.wire.connection import BrokerConnection as WireConnection

from .types import BrokerInfo

__all__ = ["MAX_RESPONSE_FRAME", "BrokerConnection"]

_ADDRESS_HINT = (
    "; this address came from the cluster's metadata: if clients cannot reach it, fix the "
    "broker's advertised.listeners or set broker.address.map on the client "
    "(e.g. broker.address.map=INTERNAL:PORT=REACHABLE:PORT)"
)


class BrokerConnection(WireConnection):
    """A connection to one broker address. Create, ``await connect()``, then ``request()``.
    ``broker`` is the broker the address belongs to, when it came from cluster metadata."""

    broker: BrokerInfo | None

    def __init__(self, host: str, port: int, *, client_id: str | None = "moldau",
                 broker: BrokerInfo | None = None, request_timeout_ms: int = 30000,
                 connect_timeout_ms: int = 10000, software_name: str = "moldau-python",
                 software_version: str = "0.1.0") -> None:
        super().__init__(host, port, client_id=client_id, broker=broker,
                         request_timeout_ms=request_timeout_ms,
                         connect_timeout_ms=connect_timeout_ms, software_name=software_name,
                         software_version=software_version, address_hint=_ADDRESS_HINT)
