"""Route registration shared by API v2 and v3: every path also with a trailing slash."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def route(app: web.Application, method: str, path: str, handler: Handler) -> None:
    """Serve ``method path`` and ``method path/`` (Confluent's proxy accepts both)."""
    pattern = path.rstrip("/") + "{_slash:/?}" if path != "/" else "/"
    app.router.add_route(method, pattern, handler)
