"""A classic group member that runs on its own, without a poll loop.

The consumer drives the join engine from ``poll()``; a service that only needs to be in a
group (the schema registry's primary election, Connect-like workers) lets
:class:`BackgroundMember` drive it from a task of its own, as the schema registry's Java
elector drives its AbstractCoordinator from a thread:

    revoke (``on_revoked``, or ``on_lost`` when the membership was lost) -> join ->
    ``on_assigned(joined)`` -> heartbeat until the engine asks for a rejoin -> revoke ...

Heartbeats run in a second task. Errors the engine cannot recover from (an inconsistent
protocol, an unauthorized group) are logged and the join is tried again after
``retry.backoff.max.ms``: a service keeps trying, as Confluent's elector does, instead of
ending up alive but out of the group. ``expire_locally`` is on by default: a member whose
heartbeats go unanswered for a session timeout treats itself as out of the group.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any, Protocol

from moldau.protocol.errors import ErrorCode

from ..cluster import Cluster
from ..tasks import cancel_and_wait
from .coordinator import CoordinatorLink
from .engine import GroupEngine, GroupProtocol, Joined, JoinSettings, State

log = logging.getLogger(__name__)


class BackgroundProtocol(GroupProtocol, Protocol):
    """A group protocol that also hears about assignments (callbacks may be coroutines)."""

    def on_assigned(self, joined: Joined) -> Any:
        """A rebalance completed: ``joined.assignment`` is this member's."""
        ...

    def on_revoked(self) -> Any:
        """A rebalance begins: stop acting on the last assignment."""
        ...

    def on_lost(self) -> Any:
        """The membership was lost (expelled, session expired): the assignment is gone."""
        ...


async def _call(what: str, fn: Any, *args: Any) -> None:
    try:
        result = fn(*args)
        if inspect.isawaitable(result):
            await result
    except Exception:
        log.exception("group callback %s raised", what)


class BackgroundMember:
    """Keeps one member in a classic group through a :class:`GroupEngine` (see module
    docstring). ``cluster`` is the caller's; :meth:`stop` leaves the group but does not
    close it."""

    def __init__(self, cluster: Cluster, group_id: str, protocol: BackgroundProtocol,
                 settings: JoinSettings) -> None:
        self.cluster = cluster
        self.protocol = protocol
        self.coordinator = CoordinatorLink(cluster, group_id)
        self._wake = asyncio.Event()
        self.engine = GroupEngine(self.coordinator, protocol, settings,
                                  wake=self._wake.set, on_fatal=self._on_fatal)
        self.group_id = group_id
        self.joins = 0
        self.last_error: BaseException | None = None
        self._assigned = False
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def member_id(self) -> str:
        return self.engine.member_id

    @property
    def generation(self) -> int:
        return self.engine.generation

    @property
    def stable(self) -> bool:
        return self.engine.state is State.STABLE

    async def start(self) -> None:
        """Start joining (returns at once; ``on_assigned`` tells when it worked)."""
        if self._tasks:
            return
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._run(), name=f"moldau-member-{self.group_id}"),
            loop.create_task(self.engine.heartbeat_loop(), name=f"moldau-hb-{self.group_id}"),
        ]

    async def stop(self) -> None:
        """Stop: revoke (``on_revoked``), leave the group, close the coordinator link."""
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)
        if self._assigned:
            self._assigned = False
            await _call("on_revoked", self.protocol.on_revoked)
        await self.engine.leave("the member is stopping")
        self.coordinator.close()

    def request_rejoin(self, reason: str) -> None:
        """Rejoin now (e.g. the member's metadata changed)."""
        self.engine.request_rejoin(reason)

    def _on_fatal(self, error: BaseException) -> None:
        """A heartbeat answered FENCED_INSTANCE_ID (static membership): out of the group."""
        log.error("group %s: %s", self.group_id, error)
        self.last_error = error
        self.engine.lose(ErrorCode.fenced_instance_id, str(error))

    async def _run(self) -> None:
        engine = self.engine
        s = engine.settings
        while True:
            self._wake.clear()
            if not (engine.rejoin_needed or engine.state is State.UNJOINED):
                await self._wake.wait()
                continue
            if self._assigned:
                self._assigned = False
                if engine.lost:
                    await _call("on_lost", self.protocol.on_lost)
                else:
                    await _call("on_revoked", self.protocol.on_revoked)
            engine.begin_join()
            try:
                joined: Joined = await engine.join()
            except Exception as exc:
                self.last_error = exc
                log.error("group %s: joining failed: %s; trying again in %d ms",
                          self.group_id, exc, s.retry_backoff_max_ms)
                engine.state = State.UNJOINED
                await asyncio.sleep(s.retry_backoff_max_ms / 1000)
                continue
            self.joins += 1
            self.last_error = None
            engine.complete()
            self._assigned = True
            log.info("group %s: generation %d, member %s%s", self.group_id,
                     joined.generation, joined.member_id,
                     " (group leader)" if joined.is_leader else "")
            await _call("on_assigned", self.protocol.on_assigned, joined)
            engine.heartbeat_now()
