"""The join engine of classic groups, for any protocol type (Java's AbstractCoordinator).

A classic group member goes round JoinGroup -> (leader: assign) -> SyncGroup -> Heartbeat
-> ... -> LeaveGroup whatever it coordinates: a consumer's partitions (protocol type
``consumer``, :mod:`.classic`), a schema registry's primary (``sr``,
:mod:`moldau.registry.election`), Connect-like workers. :class:`GroupEngine` runs those
requests and their error rules; a :class:`GroupProtocol` plugs in what differs:

- ``protocol_type`` and the (name, metadata bytes) protocols the member offers
  (:meth:`GroupProtocol.metadata`, asked before every JoinGroup);
- the leader's assignment: every member's metadata -> assignment bytes per member
  (:meth:`GroupProtocol.assign`);
- ``fatal_hints``: what to tell the user about answers after which joining cannot go on.

Who drives the engine decides when callbacks run. The consumer drives it from ``poll()``
(revocation and assignment callbacks run inside ``poll()``); :mod:`.background` drives it
from a task of its own and calls ``on_assigned`` / ``on_revoked`` / ``on_lost``.

Error rules (as the Java client): MEMBER_ID_REQUIRED joins again with the id the group gave
(KIP-394); UNKNOWN_MEMBER_ID forgets the member id, ILLEGAL_GENERATION the generation, both
rejoin at once, as REBALANCE_IN_PROGRESS does; coordinator errors look the coordinator up
again and rejoin after a backoff; retriable errors back off (``retry.backoff.ms`` doubling
to ``retry.backoff.max.ms``); anything else is fatal. Heartbeats: REBALANCE_IN_PROGRESS asks
the driver to rejoin, UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION mean the membership is lost,
FENCED_INSTANCE_ID is fatal.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

from ..errors import BrokerError
from ..retry import backoff_ms, wait_event
from . import requests
from .coordinator import COORDINATOR_ERRORS, CoordinatorLink

log = logging.getLogger(__name__)

T = TypeVar("T")

# JoinGroup/SyncGroup answers after which a member cannot go on, and what to do about them.
FATAL_JOIN: dict[int, str] = {
    ErrorCode.fenced_instance_id:
        "another member with the same group.instance.id joined; give each member its own "
        "group.instance.id",
    ErrorCode.inconsistent_group_protocol:
        "the group's members have no protocol in common, or the group uses another "
        "protocol type",
    ErrorCode.invalid_session_timeout:
        "session.timeout.ms is outside the broker's group.min.session.timeout.ms and "
        "group.max.session.timeout.ms",
    ErrorCode.group_max_size_reached: "the group has group.max.size members already",
    ErrorCode.group_authorization_failed: "not authorized to join this group",
    ErrorCode.invalid_group_id: "the group id is not valid",
    ErrorCode.unsupported_version: "the broker refused the request version",
}


class State(enum.Enum):
    """Where a member is: not in the group, (re)joining, or holding an assignment."""

    UNJOINED = "unjoined"
    JOINING = "joining"
    STABLE = "stable"


class Rejoin(Exception):
    """Join again: at once, or after a backoff when ``pause`` is set."""

    def __init__(self, reason: str, pause: bool = False) -> None:
        super().__init__(reason)
        self.pause = pause


@dataclass(frozen=True, slots=True)
class JoinedMember:
    """One member as the leader sees it in the JoinGroup answer."""

    member_id: str
    instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class Joined:
    """The outcome of one JoinGroup + SyncGroup round."""

    generation: int
    member_id: str
    protocol: str
    leader_id: str
    assignment: bytes

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.member_id == self.leader_id


class GroupProtocol(Protocol):
    """What a group's members exchange; the engine does the rest."""

    protocol_type: str
    fatal_hints: Mapping[int, str]

    async def metadata(self) -> list[tuple[str, bytes]]:
        """The (protocol name, metadata) pairs this member offers, in preference order."""
        ...

    async def assign(self, protocol: str, members: Sequence[JoinedMember]
                     ) -> Mapping[str, bytes]:
        """Leader only: assignment bytes per member id, for every member (in send order)."""
        ...


@dataclass(frozen=True, slots=True)
class JoinSettings:
    """Timeouts and identity of a member.

    ``poll_timeout_ms``: leave the group when the driver has not polled for this long
    (the consumer's ``max.poll.interval.ms``); None for drivers without a poll loop.
    ``expire_locally``: when no heartbeat was answered for ``session_timeout_ms`` the
    coordinator has most likely expelled the member; treat the membership as lost rather
    than keep acting on it (what a primary election needs; the consumer keeps its
    partitions until the coordinator says otherwise, as the Java client does).
    """

    session_timeout_ms: int
    rebalance_timeout_ms: int
    heartbeat_interval_ms: int
    request_timeout_ms: int = 30000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    instance_id: str | None = None
    poll_timeout_ms: int | None = None
    expire_locally: bool = False


def _noop(*_args: Any) -> None:
    return None


class GroupEngine:
    """JoinGroup/SyncGroup/Heartbeat/LeaveGroup of one member of one classic group."""

    def __init__(self, coordinator: CoordinatorLink, protocol: GroupProtocol,
                 settings: JoinSettings, *, wake: Callable[[], None] = _noop,
                 on_fatal: Callable[[BaseException], None] = _noop,
                 last_poll: Callable[[], float] | None = None) -> None:
        self.coordinator = coordinator
        self.group_id = coordinator.group_id
        self.protocol = protocol
        self.settings = settings
        self.instance_id = settings.instance_id
        self.member_id = ""
        self.generation = -1
        self.protocol_name: str | None = None
        self.leader_id = ""
        self.state = State.UNJOINED
        self.rejoin_needed = True
        self.lost = False
        self._wake = wake
        self._on_fatal = on_fatal
        self._last_poll = last_poll
        self._hb_wakeup = asyncio.Event()

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.leader_id == self.member_id

    # --- state changes the driver and the heartbeats share ----------------------------------

    def request_rejoin(self, reason: str) -> None:
        """Rejoin at the driver's next chance (and wake it)."""
        if not self.rejoin_needed:
            log.info("group %s: rejoining: %s", self.group_id, reason)
        self.rejoin_needed = True
        self._wake()

    def lose(self, code: int, reason: str) -> None:
        """The coordinator no longer counts this member: what it held is lost, rejoin."""
        log.warning("group %s: member %s lost its membership (%s: %s)", self.group_id,
                    self.member_id, ErrorCode(code).name.upper(), reason)
        if code == ErrorCode.unknown_member_id:
            self.member_id = ""
        self.generation = -1
        self.state = State.UNJOINED
        self.lost = True
        self.request_rejoin(reason)

    def fail(self, code: int, what: str) -> None:
        """A fatal answer: hand a BrokerError with its hint to the driver."""
        hint = self.protocol.fatal_hints.get(code, FATAL_JOIN.get(code, ""))
        self._on_fatal(BrokerError(code, hint, f"{what} of group {self.group_id!r}"))

    def begin_join(self) -> None:
        """The driver starts a join: the pending rejoin and any loss are being handled."""
        self.rejoin_needed = False
        self.lost = False
        self.state = State.JOINING

    def complete(self) -> None:
        """The driver is applying the assignment: heartbeats go on for this generation."""
        self.state = State.STABLE

    def heartbeat_now(self) -> None:
        """Send the next heartbeat at once (after an assignment was applied)."""
        self._hb_wakeup.set()

    # --- join -------------------------------------------------------------------------------

    async def join(self, finish: Callable[[Joined], Awaitable[T]] | None = None) -> Any:
        """Join until it works: JoinGroup + SyncGroup, then ``finish(joined)`` if given
        (its errors count as the join's: retriable ones back off and join again). Returns
        what ``finish`` returned, else the :class:`Joined`. Fatal errors raise."""
        attempt = 0
        s = self.settings
        while True:
            try:
                joined = await self.join_once()
                return joined if finish is None else await finish(joined)
            except Rejoin as again:
                log.debug("group %s: joining again: %s", self.group_id, again)
                if not again.pause:
                    continue
                error: BaseException = again
            except Exception as exc:
                if not getattr(exc, "retriable", False):
                    raise
                error = exc
            pause = backoff_ms(attempt, s.retry_backoff_ms, s.retry_backoff_max_ms) / 1000
            log.debug("group %s: join failed (%s), retrying in %.2fs", self.group_id, error,
                      pause)
            attempt += 1
            await asyncio.sleep(pause)

    def check(self, code: int, what: str) -> None:
        """Turn a JoinGroup/SyncGroup error into a rejoin, a retry or a fatal error."""
        if not code:
            return
        if code == ErrorCode.unknown_member_id:
            self.member_id = ""
            self.generation = -1
            raise Rejoin(f"{what}: UNKNOWN_MEMBER_ID")
        if code == ErrorCode.illegal_generation:
            self.generation = -1
            raise Rejoin(f"{what}: ILLEGAL_GENERATION")
        if code == ErrorCode.rebalance_in_progress:
            raise Rejoin(f"{what}: REBALANCE_IN_PROGRESS")
        if code in COORDINATOR_ERRORS:
            self.coordinator.mark_unknown()
            raise Rejoin(f"{what}: {ErrorCode(code).name.upper()}", pause=True)
        hint = self.protocol.fatal_hints.get(code, FATAL_JOIN.get(code, ""))
        raise BrokerError(code, hint, f"{what} for group {self.group_id!r}")

    async def join_once(self) -> Joined:
        """One JoinGroup (+ the leader's assignment) + SyncGroup."""
        s = self.settings
        protocols = await self.protocol.metadata()
        wait_ms = max(s.request_timeout_ms, s.rebalance_timeout_ms + 5000)
        if self.instance_id is not None:
            conn = await self.coordinator.connection()
            conn.versions.require(ApiKey.JOIN_GROUP, 5,
                                  what="static membership (group.instance.id)")
        response = await self.coordinator.request(ApiKey.JOIN_GROUP, requests.join_group(
            self.group_id, self.member_id, self.instance_id, s.session_timeout_ms,
            s.rebalance_timeout_ms, protocols, protocol_type=self.protocol.protocol_type,
        ), timeout_ms=wait_ms)
        if response.error_code == ErrorCode.member_id_required:
            self.member_id = response.member_id
            raise Rejoin("MEMBER_ID_REQUIRED: joining with the member id the group gave")
        self.check(response.error_code, "JoinGroup")
        self.generation = response.generation_id
        self.member_id = response.member_id
        self.protocol_name = response.protocol_name
        self.leader_id = response.leader
        assignments: list[tuple[str, bytes]] = []
        if self.is_leader:
            members = [JoinedMember(m.member_id, getattr(m, "group_instance_id", None),
                                    bytes(m.metadata)) for m in response.members]
            result = await self.protocol.assign(response.protocol_name or "", members)
            assignments = list(result.items())
        sync = await self.coordinator.request(ApiKey.SYNC_GROUP, requests.sync_group(
            self.group_id, self.generation, self.member_id, self.instance_id,
            self.protocol_name, assignments, protocol_type=self.protocol.protocol_type,
        ), timeout_ms=wait_ms)
        self.check(sync.error_code, "SyncGroup")
        return Joined(self.generation, self.member_id, self.protocol_name or "",
                      self.leader_id, bytes(sync.assignment))

    # --- heartbeats -------------------------------------------------------------------------

    async def heartbeat_loop(self) -> None:
        """Answer for the member every ``heartbeat_interval_ms`` while it is stable; runs
        until cancelled."""
        s = self.settings
        interval = s.heartbeat_interval_ms / 1000
        last_ok = time.monotonic()
        while True:
            await wait_event(self._hb_wakeup, interval)
            self._hb_wakeup.clear()
            if self.state is not State.STABLE:
                last_ok = time.monotonic()
                continue
            if self._poll_expired():
                log.warning(
                    "group %s: poll() was not called within max.poll.interval.ms=%d; "
                    "leaving the group (processing records takes too long: raise "
                    "max.poll.interval.ms or lower max.poll.records)",
                    self.group_id, s.poll_timeout_ms)
                await self.leave("consumer poll timeout expired")
                self.lost = True
                self.request_rejoin("poll timeout expired")
                continue
            try:
                response = await self.coordinator.request(ApiKey.HEARTBEAT, requests.heartbeat(
                    self.group_id, self.generation, self.member_id, self.instance_id))
            except Exception as exc:
                log.debug("group %s: heartbeat failed: %s", self.group_id, exc)
                if time.monotonic() - last_ok > s.session_timeout_ms / 1000:
                    self.coordinator.mark_unknown()
                    if s.expire_locally:
                        self.lose(ErrorCode.unknown_member_id,
                                  f"no heartbeat answered within session.timeout.ms="
                                  f"{s.session_timeout_ms}")
                        continue
                await asyncio.sleep(s.retry_backoff_ms / 1000)
                self._hb_wakeup.set()
                continue
            if self.state is not State.STABLE:
                continue  # the answer is about a generation that has ended
            self._heartbeat_answer(response.error_code)
            if not response.error_code or response.error_code == ErrorCode.rebalance_in_progress:
                last_ok = time.monotonic()

    def _poll_expired(self) -> bool:
        limit = self.settings.poll_timeout_ms
        if limit is None or self._last_poll is None:
            return False
        return time.monotonic() - self._last_poll() > limit / 1000

    def _heartbeat_answer(self, code: int) -> None:
        if not code:
            return
        if code == ErrorCode.rebalance_in_progress:
            self.request_rejoin("the coordinator started a rebalance")
        elif code in (ErrorCode.unknown_member_id, ErrorCode.illegal_generation):
            self.lose(code, "heartbeat")
        elif code == ErrorCode.fenced_instance_id:
            self.fail(code, "heartbeat")
        elif code in COORDINATOR_ERRORS:
            self.coordinator.mark_unknown()
        else:
            log.warning("group %s: heartbeat answered %s", self.group_id,
                        ErrorCode(code).name.upper())

    # --- leaving ----------------------------------------------------------------------------

    async def leave(self, reason: str) -> None:
        """LeaveGroup (dynamic members only: a static member's assignment waits for it
        until its session times out, KIP-345), then forget the generation."""
        if self.instance_id is None and self.member_id and self.coordinator.known:
            try:
                response = await self.coordinator.request(
                    ApiKey.LEAVE_GROUP, requests.leave_group(self.group_id, self.member_id, reason),
                    timeout_ms=min(self.settings.request_timeout_ms, 5000))
                if response.error_code:
                    log.debug("group %s: LeaveGroup answered %s", self.group_id,
                              ErrorCode(response.error_code).name.upper())
            except Exception as exc:
                log.debug("group %s: LeaveGroup failed: %s", self.group_id, exc)
        if self.instance_id is None:
            self.member_id = ""
        self.generation = -1
        self.state = State.UNJOINED
