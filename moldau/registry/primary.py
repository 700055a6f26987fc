"""The seam between the registry and primary election.

Only the primary writes to ``_schemas`` and allocates ids (Confluent's rule: ids are
allocated after the primary read the topic to its end). The API asks a :class:`Primary`
before every write:

- ``is_primary`` true: the service validates, writes and waits for its own records;
- else ``await forward(request)``: sends the request unchanged to the primary and its answer
  is returned to the client as it is. While no primary is known it waits a little for one
  (an election under way: at start-up, or after the primary left); None when THIS instance
  became the primary meanwhile (the write is then made here); 50004 "Leader not known."
  (Confluent's ``UnknownLeaderException``) when none is elected in time.

:class:`SingleInstance` is the default of one registry on its own: primary as soon as its
store has read the topic to its end. Election through a Kafka group (several instances,
``moldau.registry.election``) provides another implementation of the same protocol.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from aiohttp import web


@runtime_checkable
class Primary(Protocol):
    """Whether this instance is the primary, where the primary is, and forwarding to it."""

    @property
    def is_primary(self) -> bool:
        """True while this instance may write (and has read ``_schemas`` to its end)."""
        ...

    @property
    def primary_url(self) -> str | None:
        """``http://host:port`` of the primary when another instance is; None when unknown
        (or this one is the primary)."""
        ...

    async def forward(self, request: web.Request) -> web.StreamResponse | None:
        """Send ``request`` (method, path, query, body, content headers) to the primary and
        return its answer; None when this instance is the primary by now; a RegistryError
        50003 when forwarding fails, 50004 when no primary is known in time."""
        ...


class SingleInstance:
    """One registry on its own: the primary once its store is ready."""

    def __init__(self, ready: object) -> None:
        """``ready`` is an object with ``is_set()`` (the store's ready event)."""
        self._ready = ready

    @property
    def is_primary(self) -> bool:
        return bool(self._ready.is_set())  # type: ignore[attr-defined]

    @property
    def primary_url(self) -> str | None:
        return None

    async def forward(self, request: web.Request) -> web.StreamResponse | None:
        from .errors import unknown_leader

        raise unknown_leader("this registry has not read its store to the end yet")
