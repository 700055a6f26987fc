"""Secondaries forward writes to the primary over HTTP, as Confluent's instances do.

A write (register, delete a version or subject, config and mode changes) that reaches an
instance which is not the primary is sent on to the primary's URL with its method, raw path
and query, body and the headers Confluent passes on (``Content-Type``, ``Accept``,
``Authorization``, ``X-Request-ID`` and ``inter.instance.headers.whitelist``); the
primary's answer (status, body, content type) goes back unchanged, errors included.

When no primary is known (a rebalance is running, no instance is eligible) the forwarder
raises :class:`~.errors.RegistryError` 50004 (HTTP 500) with Confluent's message for the
operation ("Leader not known.", "Failed to update compatibility level", ...), after waiting
up to ``unknown_primary_wait_ms`` for an election to finish. When the primary cannot be
reached or does not answer within ``leader.connect.timeout.ms`` / ``leader.read.timeout.ms``
it raises 50003 ("Error while forwarding register schema request to the leader").

A forwarded request carries ``X-Moldau-Forwarded`` with its hop count; an instance that is
not the primary either refuses to pass on a request that was already forwarded
:data:`MAX_HOPS` times (50003), so instances that briefly disagree about the primary cannot
bounce a request between each other.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import aiohttp
from aiohttp import web
from yarl import URL

from . import errors

log = logging.getLogger(__name__)

FORWARDED_HEADER = "X-Moldau-Forwarded"
MAX_HOPS = 2
# Always passed on (Confluent's RequestHeaderBuilder and inter.instance.headers.whitelist doc).
PASSED_HEADERS = ("Content-Type", "Accept", "Authorization", "X-Request-ID")


@dataclass(frozen=True, slots=True)
class Operation:
    """Confluent's answers for one kind of write when it cannot be forwarded."""

    unknown_leader: str
    forwarding_failed: str


OPERATIONS: dict[str, Operation] = {
    "register": Operation(
        "Leader not known.", "Error while forwarding register schema request to the leader"),
    "delete_version": Operation(
        "Leader not known.",
        "Error while forwarding delete schema version request to the leader"),
    "delete_subject": Operation(
        "Leader not known.", "Error while forwarding delete subject request to the leader"),
    "update_config": Operation(
        "Failed to update compatibility level",
        "Error while forwarding update config request to the leader"),
    "delete_config": Operation(
        "Failed to delete compatibility level",
        "Error while forwarding delete config request to the leader"),
    "update_mode": Operation(
        "Failed to update mode", "Error while forwarding update mode request to the leader"),
    "delete_mode": Operation(
        "Failed to delete mode", "Error while forwarding delete mode request to the leader"),
    "write": Operation("Leader not known.", "Error while forwarding the request to the leader"),
}

# (method, path pattern) of Confluent's writes -> operation (paths may carry a context prefix
# such as /contexts/.ctx/ in front).
_WRITES = (
    ("POST", re.compile(r"/subjects/[^/]+/versions/?$"), "register"),
    ("DELETE", re.compile(r"/subjects/[^/]+/versions/[^/]+/?$"), "delete_version"),
    ("DELETE", re.compile(r"/subjects/[^/]+/?$"), "delete_subject"),
    ("PUT", re.compile(r"/config(/[^/]+)?/?$"), "update_config"),
    ("DELETE", re.compile(r"/config(/[^/]+)?/?$"), "delete_config"),
    ("PUT", re.compile(r"/mode(/[^/]+)?/?$"), "update_mode"),
    ("DELETE", re.compile(r"/mode(/[^/]+)?/?$"), "delete_mode"),
)


def operation_for(method: str, raw_path: str) -> str:
    """The :data:`OPERATIONS` key of a write request ("write" when it is none of them)."""
    path = raw_path.split("?", 1)[0]
    for verb, pattern, operation in _WRITES:
        if method.upper() == verb and pattern.search(path):
            return operation
    return "write"


class PrimaryView(Protocol):
    """What the forwarder needs of the election (:class:`.election.PrimaryElection`)."""

    @property
    def is_primary(self) -> bool: ...

    @property
    def primary_url(self) -> str | None: ...

    async def wait_for_primary(self, timeout: float) -> str | None: ...


class Forwarder:
    """Sends writes to the primary (see module docstring). One aiohttp client session,
    opened on first use; :meth:`close` it on shutdown."""

    def __init__(self, election: PrimaryView, *, connect_timeout_ms: int = 60000,
                 read_timeout_ms: int = 60000, unknown_primary_wait_ms: int = 5000,
                 headers_whitelist: Iterable[str] = ()) -> None:
        """Timeouts are Confluent's ``leader.connect.timeout.ms`` and
        ``leader.read.timeout.ms``; ``headers_whitelist`` is
        ``inter.instance.headers.whitelist``."""
        self.election = election
        self.timeout = aiohttp.ClientTimeout(total=None, connect=connect_timeout_ms / 1000,
                                             sock_read=read_timeout_ms / 1000)
        self.unknown_primary_wait = unknown_primary_wait_ms / 1000
        self.headers = tuple(dict.fromkeys([*PASSED_HEADERS, *headers_whitelist]))
        self._session: aiohttp.ClientSession | None = None

    async def forward(self, request: web.Request, body: bytes | None = None, *,
                      operation: str | None = None) -> web.StreamResponse | None:
        """The primary's answer to ``request`` (``body``: its bytes when the caller has
        read them already); None when this instance is the primary (by now): the caller
        performs the write itself. Raises RegistryError 50003/50004 (see module docstring);
        ``operation`` (an :data:`OPERATIONS` key) picks the messages, by default from the
        method and path."""
        op = OPERATIONS[operation or operation_for(request.method, request.raw_path)]
        if self.election.is_primary:
            return None
        hops = _hops(request)
        if hops >= MAX_HOPS:
            log.warning("not forwarding %s %s again: it was forwarded %d times already "
                        "(the instances disagree about the primary)", request.method,
                        request.raw_path, hops)
            raise errors.forwarding_failed(op.forwarding_failed)
        url = self.election.primary_url
        if url is None:
            url = await self.election.wait_for_primary(self.unknown_primary_wait)
            if self.election.is_primary:
                return None
        if url is None:
            raise errors.unknown_leader(op.unknown_leader)
        if body is None:
            body = await request.read()
        target = URL(url.rstrip("/") + request.raw_path, encoded=True)
        headers = {name: request.headers[name] for name in self.headers
                   if request.headers.get(name, "").strip()}
        headers[FORWARDED_HEADER] = str(hops + 1)
        try:
            async with self._client().request(request.method, target, data=body or None,
                                              headers=headers) as answer:
                payload = await answer.read()
                content_type = answer.headers.get("Content-Type")
                status = answer.status
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            log.warning("forwarding %s %s to the primary %s failed: %r", request.method,
                        request.raw_path, url, exc)
            raise errors.forwarding_failed(op.forwarding_failed) from exc
        response = web.Response(status=status, body=payload)
        if content_type:
            response.headers["Content-Type"] = content_type
        return response

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self.timeout)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _hops(request: web.Request) -> int:
    try:
        return max(0, int(request.headers.get(FORWARDED_HEADER, "0")))
    except ValueError:
        return 0
