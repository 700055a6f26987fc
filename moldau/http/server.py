"""HTTP listeners and the service lifecycle.

``listeners`` is a comma-separated list of ``http://HOST:PORT`` (Confluent's key and syntax;
an empty host or ``0.0.0.0`` binds every interface, ``[::1]`` an IPv6 address, port 0 a
free port chosen by the OS). :func:`parse_listeners` names the key and the bad entry in its
error. :class:`HttpService` binds its sockets itself, so the ports it reports are the ones
bound (tests pass port 0), and starts and stops inside the running event loop: standalone
(``moldau schema-registry``) or in the broker's loop (``moldau serve``).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from aiohttp import web

from .content import MediaTypes, install, negotiation_middleware
from .errors import MAX_SIZE_KEY, error_middleware

log = logging.getLogger("moldau.http")

SCHEMES = ("http",)


class ListenerError(ValueError):
    """A listener entry that is not ``http://HOST:PORT``; the message names the key."""


@dataclass(frozen=True)
class Listener:
    """One ``scheme://host:port`` listener (host "" = every interface)."""

    scheme: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def _parse_one(key: str, item: str) -> Listener:
    scheme, sep, rest = item.partition("://")
    example = "e.g. http://0.0.0.0:8081 or http://localhost:8081"
    if not sep:
        raise ListenerError(f"{key}: {item!r} is not scheme://host:port ({example})")
    scheme = scheme.strip().lower()
    if scheme not in SCHEMES:
        raise ListenerError(
            f"{key}: {item!r} uses scheme {scheme!r}; only {', '.join(SCHEMES)} is served "
            f"({example})")
    rest = rest.rstrip("/")
    if rest.startswith("["):
        host, _, tail = rest[1:].partition("]")
        port_text = tail[1:] if tail.startswith(":") else ""
    else:
        host, _, port_text = rest.rpartition(":")
    if not port_text.isdigit() or not 0 <= int(port_text) < 65536 or "/" in host:
        raise ListenerError(
            f"{key}: {item!r} has no valid port (0-65535; 0 picks a free one) ({example})")
    return Listener(scheme, host, int(port_text))


def parse_listeners(value: str | Iterable[str], key: str = "listeners") -> list[Listener]:
    """``http://HOST:PORT[,...]`` (or a list of entries) to listeners; ListenerError naming
    ``key`` and the offending entry otherwise."""
    items = value.split(",") if isinstance(value, str) else list(value)
    listeners = [_parse_one(key, item.strip()) for item in items if item.strip()]
    if not listeners:
        raise ListenerError(f"{key} is empty; give at least one http://HOST:PORT")
    return listeners


def build_app(media_types: MediaTypes, *, client_max_size: int,
              middlewares: Sequence[object] = ()) -> web.Application:
    """An aiohttp application with the JSON error body, content negotiation for
    ``media_types`` and a request body limit of ``client_max_size`` bytes (413 above it)."""
    app = web.Application(
        middlewares=[error_middleware, negotiation_middleware(media_types), *middlewares],
        client_max_size=client_max_size,
    )
    install(app, media_types)
    app[MAX_SIZE_KEY] = client_max_size
    return app


def _bind(listener: Listener) -> socket.socket:
    host = listener.host
    if host in ("", "::") and socket.has_dualstack_ipv6():
        return socket.create_server(("::", listener.port), family=socket.AF_INET6,
                                    dualstack_ipv6=True, backlog=1024)
    if host in ("", "0.0.0.0"):
        return socket.create_server(("0.0.0.0", listener.port), backlog=1024)
    infos = socket.getaddrinfo(host, listener.port, type=socket.SOCK_STREAM)
    family, _, _, _, address = infos[0]
    return socket.create_server(address[:2], family=family, backlog=1024)


class HttpService:
    """Serves ``app`` on ``listeners`` inside the running event loop."""

    def __init__(self, app: web.Application, listeners: Sequence[Listener], *,
                 name: str = "http", shutdown_timeout: float = 5.0) -> None:
        self.app = app
        self.listeners = list(listeners)
        self.name = name
        self.shutdown_timeout = shutdown_timeout
        self.bound: list[tuple[Listener, int]] = []
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        """Bind every listener (OSError naming the listener when one cannot be bound) and
        start serving."""
        sockets: list[tuple[Listener, socket.socket]] = []
        try:
            for listener in self.listeners:
                try:
                    sock = _bind(listener)
                except OSError as exc:
                    raise OSError(exc.errno, f"{self.name}: cannot bind {listener}: "
                                  f"{exc.strerror or exc}") from exc
                sockets.append((listener, sock))
        except OSError:
            for _, sock in sockets:
                sock.close()
            raise
        runner = web.AppRunner(self.app, access_log=None, handle_signals=False,
                               shutdown_timeout=self.shutdown_timeout)
        await runner.setup()
        self._runner = runner
        for listener, sock in sockets:
            site = web.SockSite(runner, sock)
            await site.start()
            self.bound.append((listener, sock.getsockname()[1]))
        log.info("%s listening on %s", self.name, ", ".join(self.urls()))

    def urls(self) -> list[str]:
        """``scheme://host:port`` of every bound listener, with the bound port."""
        return [str(Listener(lst.scheme, lst.host or "0.0.0.0", port))
                for lst, port in self.bound]

    @property
    def port(self) -> int:
        """The bound port of the first listener."""
        if not self.bound:
            raise RuntimeError(f"{self.name} is not started")
        return self.bound[0][1]

    async def stop(self) -> None:
        """Stop accepting, finish or cancel requests in flight, close the sockets."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        self.bound = []
