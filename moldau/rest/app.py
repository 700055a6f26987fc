"""The REST Proxy assembled: one aiohttp app serving Confluent's API v2 and v3, started and
stopped inside the running event loop (``moldau rest-proxy`` or the broker's loop).

:func:`build_app` makes the app: JSON error bodies for everything (:mod:`moldau.http`), the
proxy's content negotiation (:mod:`.media`), the request size limit, then the routes of
``register_v2(app, ctx)`` (:mod:`.v2`, with the shared :class:`~.context.RestContext`) and
``register_v3(app, seam)`` (:mod:`.v3`, with a :class:`~.context.V3Seam`: attributes
``admin``, ``producer``, ``registry``, ``base_url``). Every route accepts a trailing slash
(:func:`.routing.route`).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import Any

from aiohttp import web

from moldau.http import HttpService, parse_listeners
from moldau.http.errors import DEFAULT_TYPE_KEY, MAX_SIZE_KEY, error_middleware

from .config import RestConfig
from .context import CONTEXT_KEY, RestContext, V3Seam
from .media import V2, negotiation_middleware
from .routing import route as route

log = logging.getLogger("moldau.rest")


def _register_v3(app: web.Application, ctx: RestContext) -> None:
    """``moldau.rest.v3.register_v3`` when that package is present."""
    try:
        module = importlib.import_module("moldau.rest.v3")
    except ModuleNotFoundError as exc:
        if exc.name != "moldau.rest.v3":
            raise
        log.info("API v3 is not available in this build")
        return
    register: Callable[[web.Application, Any], Any] = module.register_v3
    register(app, V3Seam(ctx))


def build_app(ctx: RestContext) -> web.Application:
    """The proxy's aiohttp application (see the module docstring)."""
    limit = ctx.config["request.max.bytes"]
    app = web.Application(middlewares=[error_middleware, negotiation_middleware()],
                          client_max_size=limit)
    app[CONTEXT_KEY] = ctx
    app[DEFAULT_TYPE_KEY] = V2
    app[MAX_SIZE_KEY] = limit
    if ctx.config["api.v2.enable"]:
        from .v2 import register_v2

        register_v2(app, ctx)
    if ctx.config["api.v3.enable"]:
        _register_v3(app, ctx)
    return app


class RestProxy:
    """One REST Proxy: its context, app and HTTP listeners."""

    def __init__(self, config: RestConfig) -> None:
        self.config = config
        self.ctx = RestContext(config)
        self.app = build_app(self.ctx)
        self.http = HttpService(self.app, parse_listeners(config["listeners"], "listeners"),
                                name="rest proxy")

    async def start(self) -> None:
        """Bind the listeners and start the context's background work (consumer instance
        expiry). OSError naming the listener when one cannot be bound; nothing stays running
        then."""
        try:
            await self.http.start()
            for listener, port in self.http.bound:
                self.ctx.bound_ports.setdefault(listener.scheme, port)
            for starter in self.ctx.starters:
                await starter()
            await self.ctx.warm_up()
        except BaseException:
            await self.stop()
            raise
        log.info("rest proxy ready on %s (Kafka %s)", ", ".join(self.http.urls()),
                 self.config["bootstrap.servers"])

    async def stop(self) -> None:
        """Stop serving, close consumer instances and the Kafka clients."""
        await self.http.stop()
        await self.ctx.close()

    @property
    def port(self) -> int:
        """The bound port of the first listener."""
        return self.http.port

    def urls(self) -> list[str]:
        return self.http.urls()
