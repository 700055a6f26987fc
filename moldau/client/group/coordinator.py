"""The group coordinator as a member sees it: found with FindCoordinator, reached over a
connection of its own.

The connection is separate from the one fetches use, as in the Java client and librdkafka:
brokers answer a connection's requests in order, and a JoinGroup can wait for a whole
rebalance; on a shared connection it would hold back every fetch from that broker.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from moldau.protocol.errors import ErrorCode

from ..cluster import Cluster
from ..connection import BrokerConnection
from ..errors import BrokerError, KafkaConnectionError, KafkaTimeoutError
from ..types import BrokerInfo

log = logging.getLogger(__name__)

# Answers that mean "the coordinator moved or is not ready": look it up again and retry.
COORDINATOR_ERRORS = frozenset({
    ErrorCode.coordinator_not_available, ErrorCode.not_coordinator,
    ErrorCode.coordinator_load_in_progress,
})


class CoordinatorLink:
    """Finds a group's (or, with ``key_type`` 1, a transactional id's) coordinator and
    keeps a dedicated connection to it."""

    def __init__(self, cluster: Cluster, group_id: str, key_type: int = 0) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.key_type = key_type
        self.broker: BrokerInfo | None = None
        self._conn: BrokerConnection | None = None
        self._lookup: asyncio.Future[BrokerConnection] | None = None

    @property
    def known(self) -> bool:
        return self._conn is not None and self._conn.connected

    async def connection(self) -> BrokerConnection:
        """The open coordinator connection; looks the coordinator up when needed.

        Raises BrokerError (e.g. COORDINATOR_NOT_AVAILABLE, retriable) or
        KafkaConnectionError; callers retry with backoff.
        """
        if self._conn is not None and self._conn.connected:
            return self._conn
        if self._lookup is not None:
            return await asyncio.shield(self._lookup)
        future: asyncio.Future[BrokerConnection] = asyncio.get_running_loop().create_future()
        self._lookup = future
        try:
            found = await self.cluster.find_coordinators([self.group_id], self.key_type)
            broker = found[self.group_id]
            c = self.cluster.config
            conn = BrokerConnection(
                broker.host, broker.port, client_id=self.cluster.client_id, broker=broker,
                request_timeout_ms=c["request.timeout.ms"],
                connect_timeout_ms=c["socket.connection.setup.timeout.ms"],
                software_name=c["client.software.name"],
                software_version=c["client.software.version"],
            )
            await conn.connect()
            self.mark_unknown()
            self.broker, self._conn = broker, conn
            log.debug("group %s: coordinator is %s", self.group_id, broker.describe())
            future.set_result(conn)
            return conn
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()
            raise
        finally:
            self._lookup = None

    def mark_unknown(self) -> None:
        """Forget the coordinator (it moved, failed or the connection broke)."""
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        self.broker = None

    async def request(self, api_key: int, body: Any, *, timeout_ms: int | None = None,
                      version: int | None = None) -> Any:
        """Send one request to the coordinator; a lost connection or timeout forgets it."""
        conn = await self.connection()
        try:
            return await conn.request(api_key, body, timeout_ms=timeout_ms, version=version)
        except (KafkaConnectionError, KafkaTimeoutError):
            self.mark_unknown()
            raise

    def check(self, code: int, what: str) -> None:
        """Raise BrokerError for a non-zero code; coordinator errors forget the coordinator."""
        if not code:
            return
        if code in COORDINATOR_ERRORS:
            self.mark_unknown()
        kind = "transactional id" if self.key_type == 1 else "group"
        raise BrokerError(code, context=f"{what} for {kind} {self.group_id!r}")

    def close(self) -> None:
        self.mark_unknown()
