"""The core's primary seam (:class:`~.primary.Primary`) for several registry instances: the
Kafka-group election (:mod:`.election`) says who the primary is, :mod:`.forwarding` sends
writes there.

Wiring (what :func:`elected_primary` does for a :class:`~.app.SchemaRegistry` whose HTTP
listeners are bound): this instance's identity is its first bound listener with ``host.name``
and ``leader.eligibility``; the group is ``schema.registry.group.id``; the Kafka connection
uses the store's client settings; a newly elected primary runs the store's ``sync()``
(read ``_schemas`` to its end) before it acts as primary, so it allocates ids only after
seeing every id its predecessor wrote. The ``kafkagroup.*``, ``leader.*.timeout.ms`` and
``inter.instance.headers.whitelist`` settings (:mod:`.config`, Confluent's defaults) shape the
election and the forwarding.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .election import Identity, PrimaryElection
from .forwarding import Forwarder

if TYPE_CHECKING:
    from .app import SchemaRegistry

#: How long start() waits for the first primary after the first election (its catch-up is
#: one read of ``_schemas`` to its end: milliseconds).
READY_WAIT_S = 10.0


class ElectedPrimary:
    """:class:`~.primary.Primary` backed by an election and a forwarder."""

    def __init__(self, election: PrimaryElection, forwarder: Forwarder) -> None:
        self.election = election
        self.forwarder = forwarder

    @property
    def is_primary(self) -> bool:
        return self.election.is_primary

    @property
    def primary_url(self) -> str | None:
        """The primary's URL while another instance is primary (the seam's meaning)."""
        return None if self.election.is_primary else self.election.primary_url

    async def forward(self, request: web.Request) -> web.StreamResponse | None:
        """The primary's answer; None when this instance is the primary by now (RegistryError
        50003/50004 when forwarding fails or no primary is elected in time)."""
        return await self.forwarder.forward(request)

    async def start(self) -> None:
        """Join the election; returns once the first election completed and the primary is
        known (a newly elected primary has read ``_schemas`` to its end: without this wait
        the registry said "ready" and answered a first write with 50004). A primary still
        unknown after :data:`READY_WAIT_S` (no eligible instance) is no error: writes answer
        50004 until there is one."""
        await self.election.start()
        await self.election.wait_for_primary(READY_WAIT_S)

    async def stop(self) -> None:
        await self.election.stop()
        await self.forwarder.close()


def elected_primary(registry: SchemaRegistry, overrides: Mapping[str, Any] | None = None
                    ) -> ElectedPrimary:
    """The ``primary_factory`` of :class:`~.app.SchemaRegistry` for several instances
    (``overrides``: parsed values that replace the config's, e.g. shorter ``kafkagroup.*``
    timeouts in tests)."""
    config = registry.config
    values = {**config.values, **(overrides or {})}
    identity = Identity.for_listener(registry.urls()[0],
                                     host_name=values.get("host.name") or None,
                                     eligible=bool(values["leader.eligibility"]))
    election = PrimaryElection(
        config.client, identity, group_id=values["schema.registry.group.id"],
        catch_up=registry.store.sync,
        session_timeout_ms=int(values["kafkagroup.session.timeout.ms"]),
        heartbeat_interval_ms=int(values["kafkagroup.heartbeat.interval.ms"]),
        rebalance_timeout_ms=int(values["kafkagroup.rebalance.timeout.ms"]),
        init_timeout_ms=int(values["kafkastore.init.timeout.ms"]))
    whitelist = str(values["inter.instance.headers.whitelist"])
    forwarder = Forwarder(
        election,
        connect_timeout_ms=int(values["leader.connect.timeout.ms"]),
        read_timeout_ms=int(values["leader.read.timeout.ms"]),
        headers_whitelist=[h.strip() for h in whitelist.split(",") if h.strip()])
    return ElectedPrimary(election, forwarder)


def elected_primary_factory(overrides: Mapping[str, Any] | None = None
                            ) -> Callable[[SchemaRegistry], ElectedPrimary]:
    """:func:`elected_primary` with ``overrides`` bound, as ``primary_factory``."""
    return lambda registry: elected_primary(registry, overrides)
