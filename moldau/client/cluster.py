"""What the client knows of the cluster, and its connections to it.

``Cluster`` bootstraps from ``bootstrap.servers``, keeps metadata (brokers by node id with
``broker.address.map`` applied, topics with ids, partition leaders), owns one connection per
broker and finds coordinators. Producer, consumer and admin share nothing else; the proxy,
REST proxy and registry can build on it the same way.

Metadata refreshes are coalesced: many callers asking at once share one Metadata request.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections.abc import Iterable
from typing import Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

from .address_map import AddressMap
from .connection import BrokerConnection
from .errors import BrokerError, KafkaConnectionError, KafkaTimeoutError, NoBrokersAvailable
from .retry import backoff_ms, call_with_retries
from .types import BrokerInfo, PartitionInfo, TopicInfo, TopicPartition

log = logging.getLogger(__name__)

_ZERO_UUID = uuid.UUID(int=0)

# FindCoordinator key types.
COORDINATOR_GROUP = 0
COORDINATOR_TRANSACTION = 1

# Errors after which the leader map is stale and metadata must be refreshed.
STALE_METADATA_ERRORS = frozenset({
    ErrorCode.not_leader_or_follower,
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.leader_not_available,
    ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch,
    ErrorCode.unknown_topic_id,
    ErrorCode.inconsistent_topic_id,
    ErrorCode.kafka_storage_error,
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_not_available,
})


class Cluster:
    """Cluster metadata plus a connection pool keyed by node id."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.bootstrap_servers: list[tuple[str, int]] = config["bootstrap.servers"]
        self.address_map: AddressMap = config["broker.address.map"]
        self.client_id: str = config["client.id"]
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.topic_names: dict[uuid.UUID, str] = {}
        self.cluster_id: str | None = None
        self.controller_id: int = -1
        self.wanted_topics: set[str] = set()
        self.last_refresh = 0.0
        self._connections: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Future[BrokerConnection]] = {}
        self._failures: dict[int, tuple[int, float]] = {}
        self._refresh: asyncio.Future[None] | None = None
        self._refresh_all: bool = False
        self._closed = False

    # --- addresses ------------------------------------------------------------------------

    def broker_info(self, node_id: int, host: str, port: int, rack: str | None) -> BrokerInfo:
        """A BrokerInfo for an advertised address, with ``broker.address.map`` applied."""
        mapped_host, mapped_port = self.address_map.apply(host, port)
        return BrokerInfo(node_id, mapped_host, mapped_port, rack, (host, port))

    # --- connections ----------------------------------------------------------------------

    def _new_connection(self, host: str, port: int, broker: BrokerInfo | None) -> BrokerConnection:
        c = self.config
        return BrokerConnection(
            host, port,
            client_id=self.client_id,
            broker=broker,
            request_timeout_ms=c["request.timeout.ms"],
            connect_timeout_ms=c["socket.connection.setup.timeout.ms"],
            software_name=c["client.software.name"],
            software_version=c["client.software.version"],
        )

    async def connection(self, node_id: int) -> BrokerConnection:
        """The open connection to broker ``node_id``, connecting if needed.

        Raises KafkaConnectionError (retriable) when the broker cannot be reached; repeated
        failures wait ``reconnect.backoff.ms`` growing to ``reconnect.backoff.max.ms``.
        """
        if self._closed:
            raise KafkaConnectionError("-", "closed", "the client is closed")
        conn = self._connections.get(node_id)
        if conn is not None and conn.connected:
            return conn
        pending = self._connecting.get(node_id)
        if pending is not None:
            return await asyncio.shield(pending)
        broker = self.brokers.get(node_id)
        if broker is None:
            raise BrokerError(
                ErrorCode.broker_not_available,
                "refresh metadata and retry",
                f"broker {node_id} is not in the cluster metadata",
            )
        future: asyncio.Future[BrokerConnection] = asyncio.get_running_loop().create_future()
        self._connecting[node_id] = future
        try:
            failures, last = self._failures.get(node_id, (0, 0.0))
            if failures:
                wait = backoff_ms(failures - 1, self.config["reconnect.backoff.ms"],
                                  self.config["reconnect.backoff.max.ms"]) / 1000
                delay = last + wait - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            conn = self._new_connection(broker.host, broker.port, broker)
            try:
                await conn.connect()
            except Exception as exc:
                self._failures[node_id] = (failures + 1, time.monotonic())
                future.set_exception(exc)
                future.exception()  # retrieved: waiters get it through shield
                raise
            self._failures.pop(node_id, None)
            old = self._connections.get(node_id)
            if old is not None:
                old.close()
            self._connections[node_id] = conn
            future.set_result(conn)
            return conn
        finally:
            self._connecting.pop(node_id, None)
            if not future.done():
                future.cancel()

    async def any_connection(self) -> BrokerConnection:
        """A connection to some broker: the least busy open one, else a new one.

        Before the first metadata (or when no known broker answers) the bootstrap servers
        are tried in order. Raises NoBrokersAvailable listing every address and its error.
        """
        open_conns = [c for c in self._connections.values() if c.connected]
        if open_conns:
            return min(open_conns, key=lambda c: c.in_flight)
        errors: list[str] = []
        retriable = not self.brokers and not self.bootstrap_servers
        node_ids = list(self.brokers)
        random.shuffle(node_ids)
        for node_id in node_ids:
            try:
                return await self.connection(node_id)
            except (KafkaConnectionError, OSError) as exc:
                errors.append(str(exc))
                retriable = retriable or getattr(exc, "retriable", True)
        for index, (host, port) in enumerate(self.bootstrap_servers):
            key = -1 - index
            conn = self._new_connection(host, port, None)
            try:
                await conn.connect()
            except (KafkaConnectionError, OSError) as exc:
                errors.append(str(exc))
                retriable = retriable or getattr(exc, "retriable", True)
                continue
            old = self._connections.get(key)
            if old is not None:
                old.close()
            self._connections[key] = conn
            return conn
        error = NoBrokersAvailable(
            "no broker could be reached: " + "; ".join(errors)
            if errors else "no broker addresses known (bootstrap.servers is empty)"
        )
        # Every address answered in another protocol (NotKafkaError): retrying cannot help.
        error.retriable = retriable
        raise error

    async def request(self, node_id: int | None, api_key: int, body: Any, **kwargs: Any) -> Any:
        """Send one request to ``node_id`` (or any broker when None) and return the answer."""
        conn = await (self.any_connection() if node_id is None else self.connection(node_id))
        return await conn.request(api_key, body, **kwargs)

    # --- metadata -------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to the cluster and load broker metadata (retrying per retry.backoff.ms)."""
        await call_with_retries(
            lambda: self.refresh(),
            timeout_ms=self.config.get("default.api.timeout.ms", 60000),
            initial_ms=self.config["retry.backoff.ms"],
            max_ms=self.config["retry.backoff.max.ms"],
            what=f"bootstrap from {self._bootstrap_text()}",
        )

    def _bootstrap_text(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.bootstrap_servers)

    def add_topics(self, topics: Iterable[str]) -> bool:
        """Track ``topics`` in future refreshes; True when any was new."""
        before = len(self.wanted_topics)
        self.wanted_topics.update(topics)
        return len(self.wanted_topics) != before

    def metadata_stale(self) -> bool:
        return time.monotonic() - self.last_refresh > self.config["metadata.max.age.ms"] / 1000

    async def refresh(self, *, all_topics: bool = False) -> None:
        """Fetch metadata for the tracked topics (or all topics); shared by concurrent callers."""
        if self._refresh is not None and (self._refresh_all or not all_topics):
            return await asyncio.shield(self._refresh)
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._refresh, self._refresh_all = future, all_topics
        try:
            await self._do_refresh(all_topics)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()
            raise
        else:
            future.set_result(None)
        finally:
            if self._refresh is future:
                self._refresh = None

    async def _do_refresh(self, all_topics: bool) -> None:
        conn = await self.any_connection()
        version = conn.versions.require(ApiKey.METADATA, 1, what="cluster metadata")
        topics: list[dict[str, Any]] | None
        if all_topics:
            topics = None
        else:
            topics = [
                {"name": name, "topic_id": None} for name in sorted(self.wanted_topics)
            ]
        response = await conn.request(ApiKey.METADATA, {
            "topics": topics,
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }, version=version)
        self.apply_metadata(response, all_topics=all_topics)

    def apply_metadata(self, response: Any, *, all_topics: bool = False) -> None:
        """Merge a Metadata response into the cache (address map applied to brokers)."""
        brokers = {
            b.node_id: self.broker_info(b.node_id, b.host, b.port, getattr(b, "rack", None))
            for b in response.brokers
        }
        if brokers:
            self.brokers = brokers
            for node_id in [n for n in self._connections if n >= 0 and n not in brokers]:
                self._connections.pop(node_id).close()
            for node_id, conn in list(self._connections.items()):
                if node_id >= 0 and conn.broker is not None and (
                    (conn.broker.host, conn.broker.port)
                    != (brokers[node_id].host, brokers[node_id].port)
                ):
                    self._connections.pop(node_id).close()
        self.cluster_id = getattr(response, "cluster_id", None)
        self.controller_id = getattr(response, "controller_id", -1)
        seen: set[str] = set()
        for t in response.topics:
            if t.name is None:
                continue
            seen.add(t.name)
            topic_id = getattr(t, "topic_id", None)
            if topic_id == _ZERO_UUID:
                topic_id = None
            if t.error_code and t.error_code != ErrorCode.leader_not_available:
                if t.error_code == ErrorCode.unknown_topic_or_partition:
                    self._forget(t.name)
                continue
            partitions = {
                p.partition_index: PartitionInfo(
                    t.name, p.partition_index, p.leader_id,
                    getattr(p, "leader_epoch", -1),
                    tuple(p.replica_nodes), tuple(p.isr_nodes),
                    tuple(getattr(p, "offline_replicas", ())), int(p.error_code),
                )
                for p in t.partitions
            }
            old = self.topics.get(t.name)
            if old is not None and old.topic_id is not None:
                self.topic_names.pop(old.topic_id, None)
            self.topics[t.name] = TopicInfo(
                t.name, topic_id, partitions, bool(getattr(t, "is_internal", False)),
                int(t.error_code),
            )
            if topic_id is not None:
                self.topic_names[topic_id] = t.name
        if all_topics:
            for name in [n for n in self.topics if n not in seen]:
                self._forget(name)
        self.last_refresh = time.monotonic()

    def _forget(self, name: str) -> None:
        old = self.topics.pop(name, None)
        if old is not None and old.topic_id is not None:
            self.topic_names.pop(old.topic_id, None)

    async def wait_for_topics(self, topics: Iterable[str], timeout_ms: int) -> None:
        """Refresh until every topic in ``topics`` has metadata with leaders.

        Raises KafkaTimeoutError naming the topics still unknown after ``timeout_ms``.
        """
        wanted = set(topics)
        self.add_topics(wanted)
        deadline = time.monotonic() + timeout_ms / 1000
        attempt = 0
        while True:
            missing = [
                t for t in wanted
                if t not in self.topics or not self.topics[t].partitions
                or any(p.leader < 0 for p in self.topics[t].partitions.values())
            ]
            if not missing:
                return
            try:
                await self.refresh()
            except Exception as exc:
                if not getattr(exc, "retriable", False):
                    raise
            missing = [t for t in wanted if t not in self.topics or not self.topics[t].partitions]
            if not missing and all(
                p.leader >= 0 for t in wanted for p in self.topics[t].partitions.values()
            ):
                return
            pause = backoff_ms(attempt, self.config["retry.backoff.ms"],
                               self.config["retry.backoff.max.ms"]) / 1000
            if time.monotonic() + pause > deadline:
                raise KafkaTimeoutError(
                    f"topic(s) {', '.join(sorted(missing)) or ', '.join(sorted(wanted))} not "
                    f"available in metadata after {timeout_ms} ms: does the topic exist? "
                    "(this client does not auto-create topics)"
                )
            await asyncio.sleep(pause)
            attempt += 1

    def partitions_for(self, topic: str) -> list[int]:
        """Partition numbers of ``topic`` from the cache (empty if unknown)."""
        info = self.topics.get(topic)
        return sorted(info.partitions) if info else []

    def partition_info(self, tp: TopicPartition) -> PartitionInfo | None:
        info = self.topics.get(tp.topic)
        return info.partitions.get(tp.partition) if info else None

    def leader_for(self, tp: TopicPartition) -> int:
        """Node id of the partition's leader, or -1 when unknown."""
        p = self.partition_info(tp)
        return p.leader if p is not None else -1

    def topic_id(self, topic: str) -> uuid.UUID | None:
        info = self.topics.get(topic)
        return info.topic_id if info else None

    # --- coordinators ---------------------------------------------------------------------

    async def find_coordinators(
        self, keys: Iterable[str], key_type: int = COORDINATOR_GROUP
    ) -> dict[str, BrokerInfo]:
        """Coordinator broker of each key (group id or transactional id).

        Uses one batched FindCoordinator v4+ request when the broker supports it, else one
        request per key. The address map applies to the answers. Errors raise BrokerError.
        """
        keys = list(dict.fromkeys(keys))
        conn = await self.any_connection()
        version = conn.versions.require(ApiKey.FIND_COORDINATOR)
        result: dict[str, BrokerInfo] = {}
        if version >= 4:
            response = await conn.request(ApiKey.FIND_COORDINATOR, {
                "key_type": key_type, "coordinator_keys": keys,
            }, version=version)
            answers = [
                (c.key, c.error_code, c.error_message, c.node_id, c.host, c.port)
                for c in response.coordinators
            ]
        else:
            answers = []
            for key in keys:
                r = await conn.request(ApiKey.FIND_COORDINATOR, {
                    "key": key, "key_type": key_type,
                }, version=version)
                answers.append((key, r.error_code, getattr(r, "error_message", None),
                                r.node_id, r.host, r.port))
        for key, code, message, node_id, host, port in answers:
            if code:
                raise BrokerError(code, message or "", f"FindCoordinator for {key!r}")
            info = self.broker_info(node_id, host, port, None)
            known = self.brokers.get(node_id)
            if known is None or (known.host, known.port) != (info.host, info.port):
                self.brokers[node_id] = info
            result[key] = info
        return result

    # --- closing --------------------------------------------------------------------------

    async def close(self) -> None:
        """Close every connection."""
        self._closed = True
        conns = list(self._connections.values())
        self._connections.clear()
        for conn in conns:
            conn.close()
        for conn in conns:
            await conn.wait_closed()
