"""What every REST Proxy resource (v2 and v3) shares: settings, Kafka clients, the schema
registry client and the proxy's advertised address.

The Kafka clients start on first use, not with the proxy (as Confluent's proxy, which serves
while its cluster is away): a request that finds the cluster unreachable gets 50003 and the
next request tries again. Resources get the context from the app (``app[CONTEXT_KEY]``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

from aiohttp import web

from moldau.client import AdminClient, Producer, TopicInfo
from moldau.client.errors import BrokerError
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.registry.client import AsyncSchemaRegistryClient

from . import errors
from .config import RestConfig

log = logging.getLogger("moldau.rest")

T = TypeVar("T")


class _Lazy:
    """A client started on first use; a failed start is forgotten so the next use retries."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self._client: Any = None
        self._lock = asyncio.Lock()

    async def get(self) -> Any:
        if self._client is not None:
            return self._client
        async with self._lock:
            if self._client is None:
                client = self._make()
                try:
                    await client.start()
                except BaseException:
                    await _quietly(client.close())
                    raise
                self._client = client
        return self._client

    @property
    def current(self) -> Any:
        """The started client, or None while it is not (yet)."""
        return self._client

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await _quietly(client.close())


async def _quietly(awaitable: Awaitable[Any]) -> None:
    try:
        await awaitable
    except Exception as exc:  # closing: nothing left to tell the caller
        log.debug("close failed: %s", exc)


class RestContext:
    """Shared state of one proxy (see the module docstring)."""

    def __init__(self, config: RestConfig) -> None:
        self.config = config
        self._admin = _Lazy(lambda: AdminClient(config.client("admin")))
        self._producer = _Lazy(lambda: Producer(config.client("producer")))
        self._registry: AsyncSchemaRegistryClient | None = None
        #: scheme -> bound port of the proxy's listeners (set when the HTTP service started)
        self.bound_ports: dict[str, int] = {}
        self._warming: asyncio.Task[Any] | None = None
        #: run when the proxy starts / stops: the consumer instance manager registers here
        self.starters: list[Callable[[], Awaitable[None]]] = []
        self.closers: list[Callable[[], Awaitable[None]]] = []

    # --- Kafka ------------------------------------------------------------------------------

    async def admin(self) -> AdminClient:
        """The proxy's admin client (started on first use; 50003 when unreachable)."""
        return await self.kafka(self._admin.get())

    async def producer(self) -> Producer:
        """The proxy's producer, shared by every produce request."""
        return await self.kafka(self._producer.get())

    async def warm_up(self) -> None:
        """Start the admin client and the producer now, in the background: a failure is
        logged and the next request tries again."""
        async def start() -> None:
            for what, lazy in (("admin client", self._admin), ("producer", self._producer)):
                try:
                    await lazy.get()
                except Exception as exc:
                    log.warning("rest proxy %s not connected yet (retried on use): %s",
                                what, exc)
                    return

        self._warming = asyncio.create_task(start(), name="rest-proxy-clients")

    def started(self, which: str) -> Any:
        """The started admin client or producer (``which``); 50003 while it is not, and a
        start is begun (for resources that cannot await, such as API v3's seam)."""
        lazy = self._admin if which == "admin" else self._producer
        if lazy.current is None:
            if self._warming is None or self._warming.done():
                self._warming = asyncio.create_task(lazy.get(), name=f"rest-proxy-{which}")
                self._warming.add_done_callback(_retrieve)
            raise errors.HttpError(500, errors.KAFKA_RETRIABLE_ERROR,
                                   "Retriable Kafka error: the proxy's Kafka clients are "
                                   "connecting to bootstrap.servers; retry")
        return lazy.current

    @staticmethod
    async def kafka(operation: Awaitable[T]) -> T:
        """``await operation``, its Kafka failures answered as Confluent's codes."""
        try:
            return await operation
        except errors.KAFKA_FAILURES as exc:
            raise errors.kafka_error(exc) from exc

    async def topic(self, name: str, *, create: bool = False) -> TopicInfo:
        """Metadata of topic ``name`` (40401 when it does not exist).

        With ``create`` the Metadata request allows auto-creation, as the Java producer's
        does: a broker with ``auto.create.topics.enable`` creates the topic.
        """
        producer = await self.producer()
        cluster = producer.cluster
        known = cluster.topics.get(name)
        if known is not None and known.partitions:
            return known
        await self.kafka(self._lookup(cluster, name, create))
        info = cluster.topics.get(name)
        if info is None:
            raise errors.topic_not_found()
        if not info.partitions or any(p.leader < 0 for p in info.partitions.values()):
            timeout = producer.config["max.block.ms"]
            await self.kafka(cluster.wait_for_topics([name], timeout))
            info = cluster.topics[name]
        return info

    @staticmethod
    async def _lookup(cluster: Any, name: str, create: bool) -> None:
        conn = await cluster.any_connection()
        version = conn.versions.require(ApiKey.METADATA, 4, what="topic metadata")
        response = await conn.request(ApiKey.METADATA, {
            "topics": [{"name": name, "topic_id": None}],
            "allow_auto_topic_creation": create,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }, version=version)
        cluster.apply_metadata(response)
        cluster.add_topics([name])
        for topic in response.topics:
            code = topic.error_code
            if topic.name == name and code not in (ErrorCode.none,
                                                   ErrorCode.leader_not_available):
                if code == ErrorCode.unknown_topic_or_partition:
                    raise errors.topic_not_found()
                raise BrokerError(code, context=f"topic {name!r}")

    # --- schema registry --------------------------------------------------------------------

    def registry(self) -> AsyncSchemaRegistryClient:
        """The schema registry client of the avro, jsonschema and protobuf formats."""
        if self._registry is None:
            self._registry = AsyncSchemaRegistryClient({"url": self.config["schema.registry.url"]})
        return self._registry

    # --- addresses --------------------------------------------------------------------------

    def base_url(self, request: web.Request) -> str:
        """``scheme://authority`` clients reach this proxy at, as Confluent builds it: the
        first ``advertised.listeners`` entry of the request's scheme, else ``host.name``
        with the listener's port (when the request named a port), else the request's
        ``Host``."""
        scheme = request.scheme
        host_name = self.config["host.name"]
        explicit_port = ":" in (request.host or "").rsplit("]", 1)[-1]
        if host_name and not explicit_port and not self.config["advertised.listeners"]:
            return f"{scheme}://{host_name}"
        return self.static_base_url(scheme) or f"{scheme}://{request.host}"

    def static_base_url(self, scheme: str) -> str | None:
        """The base URL that does not depend on a request: the first ``advertised.listeners``
        entry of ``scheme``, else ``host.name`` with the bound port; None otherwise."""
        for entry in filter(None, (s.strip() for s in self.config["advertised.listeners"]
                                   .split(","))):
            parts = urlsplit(entry)
            if parts.scheme == scheme and parts.netloc:
                return f"{scheme}://{parts.netloc}"
        host_name = self.config["host.name"]
        port = self.bound_ports.get(scheme)
        if host_name:
            return f"{scheme}://{host_name}:{port}" if port else f"{scheme}://{host_name}"
        return None

    def url(self, request: web.Request, *segments: str) -> str:
        """An absolute URL below :meth:`base_url`, each segment percent-encoded."""
        path = "/".join(quote(s.strip("/"), safe="") for s in segments if s.strip("/"))
        return f"{self.base_url(request)}/{path}"

    # --- lifecycle --------------------------------------------------------------------------

    async def close(self) -> None:
        """Close consumer instances, then the clients."""
        if self._warming is not None and not self._warming.done():
            self._warming.cancel()
            await asyncio.gather(self._warming, return_exceptions=True)
        for closer in reversed(self.closers):
            await _quietly(closer())
        await self._producer.close()
        await self._admin.close()
        if self._registry is not None:
            await _quietly(self._registry.close())
            self._registry = None


def _retrieve(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("rest proxy Kafka client did not start: %s", task.exception())


class V3Seam:
    """What API v3 (``moldau.rest.v3.register_v3``) reads on every request: ``admin`` and
    ``producer`` (started clients; 50003 while they connect), ``registry`` (the schema
    registry client) and ``base_url`` (the advertised ``scheme://host:port``, None: the
    request's Host)."""

    def __init__(self, ctx: RestContext) -> None:
        self.ctx = ctx

    @property
    def admin(self) -> AdminClient:
        return self.ctx.started("admin")  # type: ignore[no-any-return]

    @property
    def producer(self) -> Producer:
        return self.ctx.started("producer")  # type: ignore[no-any-return]

    @property
    def registry(self) -> AsyncSchemaRegistryClient:
        return self.ctx.registry()

    @property
    def base_url(self) -> str | None:
        return self.ctx.static_base_url("http")


CONTEXT_KEY: web.AppKey[RestContext] = web.AppKey("moldau.rest.context", RestContext)
