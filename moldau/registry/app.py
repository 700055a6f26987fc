"""The schema registry assembled: store, service, HTTP API, primary; started and stopped
inside the running event loop (standalone or in the broker's).

Start-up follows Confluent's: read ``_schemas`` to its end (creating it when missing), then
serve. The primary seam (:mod:`.primary`) defaults to :class:`~.primary.SingleInstance`;
``primary_factory`` builds another one (election among several instances) once the HTTP
listeners are bound, so it can advertise this instance's address. A primary with async
``start()``/``stop()`` methods is started after the HTTP service and stopped before it.

Confluent's registry opens its port only once it is initialised (store read, first election
done). Here the listeners are bound earlier (the election needs this instance's address), so
a request that arrives before start-up has finished waits for it (at most
``kafkastore.init.timeout.ms``, then 50002) instead of meeting a registry that has no
primary yet.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Any

from aiohttp import web

from moldau.http import HttpService, MediaTypes, parse_listeners
from moldau.http.content import JSON, OCTET_STREAM
from moldau.http.server import build_app

from . import errors
from .api import add_routes
from .config import RegistryConfig
from .core import CheckFn, ParseFn, Settings
from .primary import Primary, SingleInstance
from .service import RegistryService
from .state import RegistryState
from .store import KafkaStore

log = logging.getLogger("moldau.registry")

SCHEMA_REGISTRY_V1 = "application/vnd.schemaregistry.v1+json"
SCHEMA_REGISTRY = "application/vnd.schemaregistry+json"
MEDIA_TYPES = MediaTypes(
    produces=(SCHEMA_REGISTRY_V1, SCHEMA_REGISTRY, JSON),
    consumes=(SCHEMA_REGISTRY_V1, SCHEMA_REGISTRY, JSON, OCTET_STREAM),
)


class _PrimaryHolder:
    """The app's view of the primary; the object behind it is chosen at start."""

    def __init__(self, current: Primary) -> None:
        self.current = current

    @property
    def is_primary(self) -> bool:
        return self.current.is_primary

    @property
    def primary_url(self) -> str | None:
        return self.current.primary_url

    async def forward(self, request: web.Request) -> web.StreamResponse | None:
        return await self.current.forward(request)


class SchemaRegistry:
    """One registry instance."""

    def __init__(self, config: RegistryConfig, *,
                 primary_factory: Callable[[SchemaRegistry], Primary] | None = None,
                 parse: ParseFn | None = None, check: CheckFn | None = None) -> None:
        self.config = config
        self.state = RegistryState()
        self.store = KafkaStore(config, self.state)
        self.service = RegistryService(
            self.store,
            Settings(config["schema.compatibility.level"], config["mode.mutability"]),
            parse=parse, check=check)
        self.primary = _PrimaryHolder(SingleInstance(self.store.ready))
        self._primary_factory = primary_factory
        self.started = asyncio.Event()
        self.app = build_app(MEDIA_TYPES, client_max_size=config["request.max.bytes"],
                             middlewares=[_until_started(
                                 self.started, config["kafkastore.init.timeout.ms"] / 1000)])
        add_routes(self.app, self.service, self.primary)
        self.http = HttpService(self.app, parse_listeners(config["listeners"], "listeners"),
                                name="schema registry")

    async def start(self) -> None:
        """Read the store to its end, then serve (raises when either fails; nothing stays
        running then)."""
        await self.store.start()
        try:
            await self.http.start()
            if self._primary_factory is not None:
                self.primary.current = self._primary_factory(self)
                await _call(self.primary.current, "start")
        except BaseException:
            await self.stop()
            raise
        self.started.set()
        log.info("schema registry ready on %s (store %s)", ", ".join(self.http.urls()),
                 self.store.topic)

    async def stop(self) -> None:
        """Stop the primary's election, the HTTP service and the store."""
        await _call(self.primary.current, "stop")
        await self.http.stop()
        await self.store.stop()

    @property
    def port(self) -> int:
        """The bound port of the first listener."""
        return self.http.port

    def urls(self) -> list[str]:
        return self.http.urls()


def _until_started(started: asyncio.Event, timeout_s: float) -> Any:
    """Middleware: hold requests until the registry has started (see the module docstring)."""

    @web.middleware
    async def gate(request: web.Request, handler: Any) -> web.StreamResponse:
        if not started.is_set():
            try:
                await asyncio.wait_for(started.wait(), timeout_s)
            except TimeoutError:
                raise errors.timeout(
                    "The schema registry is still starting (reading its store and electing a "
                    "primary); retry shortly") from None
        response: web.StreamResponse = await handler(request)
        return response

    return gate


async def _call(obj: Any, name: str) -> None:
    method = getattr(obj, name, None)
    if method is not None:
        result = method()
        if inspect.isawaitable(result):
            await result
