"""Connections from this broker to the other brokers of its cluster: :class:`PeerConnections`.

Every outbound request a broker makes to another broker for a purpose of its own (transaction
markers, transaction verification) goes through one :mod:`moldau.wire` connection per
(peer, purpose), opened lazily to the peer's endpoint on ``inter.broker.listener.name`` as the
metadata image registers it, with the client id ``broker-<id>-to-<purpose>`` (the peer's logs
then say who asked and why). One connection per purpose keeps a slow purpose (WriteTxnMarkers
waits for the ISR, up to ``request.timeout.ms``) from delaying another's answers, which would
otherwise queue behind it on the peer's in-order connection.

A connection that failed is replaced at the next :meth:`PeerConnections.get`; callers drop a
connection whose request failed with :meth:`~PeerConnections.drop` (a request that times out
already closes it). :meth:`~PeerConnections.sync` closes the connections of brokers that left
the image (unregistered), and :meth:`~PeerConnections.close` closes all at node stop.

The replica fetchers keep their own connection (one per fetcher, with fetch-sized timeouts and
their own backoff) but find their leader with :func:`peer_endpoint` too; the forwarding
controller channel follows the active controller rather than a broker id, and keeps its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..protocol.errors import ErrorCode, KafkaError
from ..wire.connection import BrokerConnection
from .metadata.image import MetadataImage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PeerBroker:
    """Another broker as this broker reaches it (a :mod:`moldau.wire` peer)."""

    node_id: int
    host: str
    port: int
    listener: str
    #: what the broker is to this one, for messages ("broker", "leader broker", ...)
    role: str = "broker"

    def describe(self) -> str:
        return f"{self.role} {self.node_id} at {self.host}:{self.port} (listener " \
               f"{self.listener})"


def peer_endpoint(image: MetadataImage, broker_id: int, listener: str, *,
                  role: str = "broker") -> PeerBroker:
    """Where ``broker_id`` listens on ``listener`` according to ``image``; KafkaError
    BROKER_NOT_AVAILABLE when it is not registered or has no endpoint there."""
    registration = image.brokers.get(broker_id)
    if registration is None:
        raise KafkaError(ErrorCode.broker_not_available,
                         f"broker {broker_id} is not registered in the cluster metadata")
    endpoint = registration.endpoint(listener)
    if endpoint is None:
        raise KafkaError(ErrorCode.broker_not_available,
                         f"broker {broker_id} has no registered endpoint on "
                         f"inter.broker.listener.name={listener}")
    return PeerBroker(broker_id, endpoint.host, endpoint.port, listener, role)


Connect = Callable[[PeerBroker, str], Awaitable[BrokerConnection]]


class PeerConnections:
    """One lazily opened connection per (peer broker, purpose)."""

    def __init__(self, *, node_id: int, image: MetadataImage, listener: str,
                 request_timeout_ms: int = 30_000, connect_timeout_ms: int = 10_000,
                 connect: Connect | None = None) -> None:
        self.node_id = node_id
        self.image = image
        self.listener = listener
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self._connect = connect or self._open
        self._conns: dict[tuple[int, str], tuple[PeerBroker, BrokerConnection]] = {}
        self._locks: dict[tuple[int, str], asyncio.Lock] = {}
        self._closed = False

    def client_id(self, purpose: str) -> str:
        """The client id this broker's connections for ``purpose`` introduce themselves with."""
        return f"broker-{self.node_id}-to-{purpose}"

    async def get(self, broker_id: int, purpose: str) -> BrokerConnection:
        """The open connection to ``broker_id`` for ``purpose``, opened (or re-opened after a
        failure, or after the broker moved to another address) if need be. Raises KafkaError
        BROKER_NOT_AVAILABLE when the image has no endpoint for it, and
        :class:`~moldau.wire.errors.ClientError` when it cannot be reached."""
        if self._closed:
            raise KafkaError(ErrorCode.broker_not_available,
                             "the broker is shutting down: no new peer connections")
        if broker_id == self.node_id:
            raise ValueError(f"broker {broker_id} asked for a connection to itself")
        key = (broker_id, purpose)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            peer = peer_endpoint(self.image, broker_id, self.listener)
            held = self._conns.get(key)
            if held is not None:
                if held[0] == peer and held[1].connected:
                    return held[1]
                self.drop(broker_id, purpose)
            conn = await self._connect(peer, self.client_id(purpose))
            if self._closed:
                conn.close()
                raise KafkaError(ErrorCode.broker_not_available,
                                 "the broker is shutting down: no new peer connections")
            self._conns[key] = (peer, conn)
            return conn

    def drop(self, broker_id: int, purpose: str) -> None:
        """Close the connection for (``broker_id``, ``purpose``), if any (after a failed
        request: the next :meth:`get` opens a new one)."""
        held = self._conns.pop((broker_id, purpose), None)
        if held is not None:
            held[1].close()

    def sync(self) -> None:
        """Close the connections of brokers no longer registered in the image."""
        for broker_id, purpose in list(self._conns):
            if broker_id not in self.image.brokers:
                log.info("closing the %s connection to broker %d: it left the cluster",
                         purpose, broker_id)
                self.drop(broker_id, purpose)

    def close(self) -> None:
        """Close every connection (node stop); later :meth:`get` calls fail."""
        self._closed = True
        for broker_id, purpose in list(self._conns):
            self.drop(broker_id, purpose)

    async def _open(self, peer: PeerBroker, client_id: str) -> BrokerConnection:
        conn = BrokerConnection(peer.host, peer.port, client_id=client_id, broker=peer,
                                request_timeout_ms=self.request_timeout_ms,
                                connect_timeout_ms=self.connect_timeout_ms,
                                software_name="moldau-broker")
        await conn.connect()
        return conn
