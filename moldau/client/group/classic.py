"""Classic group membership: JoinGroup/SyncGroup rebalances, heartbeats, LeaveGroup.

How a member goes round (driven from ``poll()``, as in the Java client):

1. *Prepare*: with the eager protocol every owned partition is revoked first (auto-commit,
   ``on_revoke``); with the cooperative one (only ``cooperative-sticky`` configured) the
   member keeps reading its partitions through the rebalance. Partitions declared lost
   (session expired, fenced, ``max.poll.interval.ms`` passed) go to ``on_lost`` instead.
2. *Join* runs in a background task: FindCoordinator, JoinGroup (a first join without a
   member id gets MEMBER_ID_REQUIRED and the id to use, KIP-394; ``group.instance.id`` makes
   the member static, KIP-345), the leader computes the assignment with the assignor the
   coordinator chose, SyncGroup hands it out, OffsetFetch finds where new partitions start.
3. *Complete* (next ``poll()``): the assignment is applied (cooperative: partitions taken
   away are revoked and the member rejoins at once for the second phase), ``on_assign``.
4. *Stable*: a heartbeat task answers for the member every ``heartbeat.interval.ms``;
   REBALANCE_IN_PROGRESS makes the next ``poll()`` rejoin, UNKNOWN_MEMBER_ID and
   ILLEGAL_GENERATION mean the partitions are lost, FENCED_INSTANCE_ID is fatal. If ``poll()``
   is not called within ``max.poll.interval.ms`` the member leaves (LeaveGroup; static
   members stay until their session times out). A metadata watcher rejoins when a pattern
   matches new topics, or (leader) when subscribed topics gain partitions or appear.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

from ..errors import BrokerError, ConfigError
from ..retry import backoff_ms, wait_event
from ..tasks import cancel_and_wait
from ..types import TopicPartition
from . import requests
from .assignors import is_cooperative, make_assignors
from .consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from .coordinator import COORDINATOR_ERRORS
from .membership import GroupMember
from .types import (
    CommitFailedError,
    MemberSubscription,
    OffsetAndMetadata,
    RebalanceInProgressError,
)

if TYPE_CHECKING:
    from ..consumer import Consumer

log = logging.getLogger(__name__)

# JoinGroup/SyncGroup answers after which the member cannot go on: the application must act.
_FATAL_JOIN = {
    ErrorCode.fenced_instance_id:
        "another consumer with the same group.instance.id joined; give each consumer "
        "its own group.instance.id",
    ErrorCode.inconsistent_group_protocol:
        "the group's members have no assignor in common (partition.assignment.strategy), "
        "or the group uses another protocol type",
    ErrorCode.invalid_session_timeout:
        "session.timeout.ms is outside the broker's group.min.session.timeout.ms and "
        "group.max.session.timeout.ms",
    ErrorCode.group_max_size_reached: "the group has group.max.size members already",
    ErrorCode.group_authorization_failed: "not authorized to join this group",
    ErrorCode.invalid_group_id: "the group id is not valid",
    ErrorCode.unsupported_version: "the broker refused the request version",
}


class State(enum.Enum):
    UNJOINED = "unjoined"
    JOINING = "joining"
    STABLE = "stable"


class _Rejoin(Exception):
    """Join again (immediately when ``pause`` is 0)."""

    def __init__(self, reason: str, pause: bool = False) -> None:
        super().__init__(reason)
        self.pause = pause


@dataclass
class JoinResult:
    generation: int
    member_id: str
    protocol: str
    leader: str
    assignment: set[TopicPartition]
    committed: dict[TopicPartition, OffsetAndMetadata | None]


class ClassicMember(GroupMember):
    """A consumer in a classic group (see module docstring)."""

    def __init__(self, consumer: Consumer) -> None:
        super().__init__(consumer)
        c = self.config
        self.assignors = make_assignors(c["partition.assignment.strategy"])
        self.cooperative = is_cooperative(self.assignors)
        self.session_timeout_ms: int = c["session.timeout.ms"]
        self.rebalance_timeout_ms: int = c["max.poll.interval.ms"]
        self.heartbeat_interval: float = c["heartbeat.interval.ms"] / 1000
        if c["heartbeat.interval.ms"] >= self.session_timeout_ms:
            raise ConfigError(
                f"heartbeat.interval.ms={c['heartbeat.interval.ms']} must be lower than "
                f"session.timeout.ms={self.session_timeout_ms} (a third of it is usual)")
        self.state = State.UNJOINED
        self.generation = -1
        self.protocol: str | None = None
        self.leader_id = ""
        self.rejoin_needed = True
        self.lost = False
        self.previous: set[TopicPartition] = set()  # last assignment (sticky user data)
        self.joined_topics: set[str] = set()
        self.assigned_counts: dict[str, int] | None = None  # leader: partitions it assigned
        self.rebalances = 0
        self._join_task: asyncio.Task[JoinResult] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._hb_wakeup = asyncio.Event()

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.leader_id == self.member_id

    # --- commit identity --------------------------------------------------------------------

    def commit_identity(self) -> tuple[int, str, str | None]:
        if not self.subscribed:
            return -1, "", None
        if self.state is State.STABLE:
            return self.generation, self.member_id, self.instance_id
        if self.state is State.JOINING:
            raise RebalanceInProgressError(f"commit to group {self.group_id!r}")
        raise CommitFailedError(ErrorCode.illegal_generation,
                                context=f"commit to group {self.group_id!r}")

    def can_auto_commit(self) -> bool:
        return not self.subscribed or self.state is State.STABLE

    def on_commit_refused(self, code: int) -> None:
        if code == ErrorCode.rebalance_in_progress:
            self.request_rejoin("a commit found the group rebalancing")
        elif code == ErrorCode.fenced_instance_id:
            self.fail(BrokerError(code, _FATAL_JOIN[ErrorCode.fenced_instance_id],
                                  f"group {self.group_id!r}"))
        elif self.state is State.STABLE:
            self._lose(code, "a commit was refused")

    # --- subscription changes ---------------------------------------------------------------

    def request_rejoin(self, reason: str) -> None:
        if not self.rejoin_needed:
            log.info("group %s: rejoining: %s", self.group_id, reason)
        self.rejoin_needed = True
        self.wake_poll()

    def _lose(self, code: int, reason: str) -> None:
        """The coordinator no longer counts this member: partitions are lost, rejoin."""
        log.warning("group %s: member %s lost its membership (%s: %s)", self.group_id,
                    self.member_id, ErrorCode(code).name.upper(), reason)
        if code == ErrorCode.unknown_member_id:
            self.member_id = ""
        self.generation = -1
        self.state = State.UNJOINED
        self.lost = True
        self.request_rejoin(reason)

    # --- poll -------------------------------------------------------------------------------

    async def on_poll(self, consumer: Consumer) -> None:
        self.last_poll = time.monotonic()
        self.raise_pending()
        if self.subscription is None:
            self.maybe_auto_commit()
            return
        self._start_background()
        task = self._join_task
        if task is not None and task.done():
            self._join_task = None
            try:
                result = task.result()
            except asyncio.CancelledError:
                result = None
            except Exception as exc:
                self.fail(exc)
                raise self.fatal from exc  # type: ignore[misc]
            if result is not None:
                await self._complete(result)
        if self._join_task is None and (self.rejoin_needed or self.state is State.UNJOINED):
            await self._prepare()
            self.state = State.JOINING
            self._join_task = asyncio.get_running_loop().create_task(
                self._join_loop(), name=f"moldau-join-{self.group_id}")
            self._join_task.add_done_callback(lambda _t: self.wake_poll())
        if self.state is State.STABLE:
            self.maybe_auto_commit()
        self.raise_pending()

    async def _prepare(self) -> None:
        """Step 1 of a rebalance (see module docstring)."""
        if self.lost:
            self.lost = False
            await self.revoke(set(self.owned), lost=True)
        elif not self.cooperative:
            await self.revoke(set(self.owned))
        else:
            if self.auto_commit and self.owned and self.state is State.STABLE:
                try:
                    await self.commit_sync(self.positions(self.owned))
                except Exception as exc:
                    log.warning("group %s: commit before rejoining failed: %s",
                                self.group_id, exc)
            assert self.subscription is not None
            gone = {tp for tp in self.owned if not self.subscription.matches(tp.topic)}
            await self.revoke(gone)
        # A commit refused above (some brokers refuse them once a rebalance began) marks the
        # membership lost and asks for a rejoin: that is the join about to start, not another.
        self.rejoin_needed = False
        self.lost = False

    async def _complete(self, result: JoinResult) -> None:
        """Step 3: apply the assignment the rebalance produced."""
        self.state = State.STABLE
        self.rebalances += 1
        log.info("group %s: generation %d, member %s%s, assigned %s", self.group_id,
                 result.generation, result.member_id, " (leader)" if self.is_leader else "",
                 sorted(result.assignment))
        revoked = await self.assign_partitions(result.assignment, result.committed)
        self.previous = set(result.assignment)
        self._hb_wakeup.set()
        if revoked and self.cooperative:
            self.request_rejoin(f"cooperative rebalance: {len(revoked)} partition(s) revoked")

    # --- join -------------------------------------------------------------------------------

    async def _join_loop(self) -> JoinResult:
        attempt = 0
        while True:
            try:
                return await self._join_once()
            except _Rejoin as again:
                log.debug("group %s: joining again: %s", self.group_id, again)
                if not again.pause:
                    continue
                error: BaseException = again
            except Exception as exc:
                if not getattr(exc, "retriable", False):
                    raise
                error = exc
            pause = backoff_ms(attempt, self.config["retry.backoff.ms"],
                               self.config["retry.backoff.max.ms"]) / 1000
            log.debug("group %s: join failed (%s), retrying in %.2fs", self.group_id, error,
                      pause)
            attempt += 1
            await asyncio.sleep(pause)

    def _metadata(self, topics: list[str]) -> list[tuple[str, bytes]]:
        owned = sorted(self.owned) if self.cooperative else []
        rack = self.config["client.rack"] or None
        return [(a.name, encode_subscription(
            topics, owned=owned, generation=self.generation, rack=rack,
            user_data=a.user_data(sorted(self.previous), self.generation),
        )) for a in self.assignors]

    def _check(self, code: int, what: str) -> None:
        """Turn a JoinGroup/SyncGroup error into a rejoin, a retry or a fatal error."""
        if not code:
            return
        if code == ErrorCode.unknown_member_id:
            self.member_id = ""
            self.generation = -1
            raise _Rejoin(f"{what}: UNKNOWN_MEMBER_ID")
        if code == ErrorCode.illegal_generation:
            self.generation = -1
            raise _Rejoin(f"{what}: ILLEGAL_GENERATION")
        if code == ErrorCode.rebalance_in_progress:
            raise _Rejoin(f"{what}: REBALANCE_IN_PROGRESS")
        if code in COORDINATOR_ERRORS:
            self.coordinator.mark_unknown()
            raise _Rejoin(f"{what}: {ErrorCode(code).name.upper()}", pause=True)
        hint = _FATAL_JOIN.get(ErrorCode(code), "")
        raise BrokerError(code, hint, f"{what} for group {self.group_id!r}")

    async def _join_once(self) -> JoinResult:
        assert self.subscription is not None
        if self.subscription.is_pattern:
            await self.cluster.refresh(all_topics=True)
        topics = sorted(self.subscription.resolve(self.cluster))
        self.joined_topics = set(topics)
        self.cluster.add_topics(topics)
        wait_ms = max(self.config["request.timeout.ms"], self.rebalance_timeout_ms + 5000)
        if self.instance_id is not None:
            conn = await self.coordinator.connection()
            conn.versions.require(ApiKey.JOIN_GROUP, 5,
                                  what="static membership (group.instance.id)")
        response = await self.coordinator.request(ApiKey.JOIN_GROUP, requests.join_group(
            self.group_id, self.member_id, self.instance_id, self.session_timeout_ms,
            self.rebalance_timeout_ms, self._metadata(topics),
        ), timeout_ms=wait_ms)
        if response.error_code == ErrorCode.member_id_required:
            self.member_id = response.member_id
            raise _Rejoin("MEMBER_ID_REQUIRED: joining with the member id the group gave")
        self._check(response.error_code, "JoinGroup")
        self.generation = response.generation_id
        self.member_id = response.member_id
        self.protocol = response.protocol_name
        self.leader_id = response.leader
        assignments: list[tuple[str, bytes]] = []
        if self.is_leader:
            assignments = await self._lead(response.protocol_name, response.members)
        sync = await self.coordinator.request(ApiKey.SYNC_GROUP, requests.sync_group(
            self.group_id, self.generation, self.member_id, self.instance_id, self.protocol,
            assignments,
        ), timeout_ms=wait_ms)
        self._check(sync.error_code, "SyncGroup")
        try:
            partitions, _user_data = decode_assignment(sync.assignment)
        except ValueError as exc:
            raise BrokerError(ErrorCode.inconsistent_group_protocol, str(exc),
                              f"SyncGroup for group {self.group_id!r}") from None
        assignment = set(partitions)
        new = assignment - self.owned
        committed = await self.committed(new) if new else {}
        return JoinResult(self.generation, self.member_id, self.protocol or "",
                          self.leader_id, assignment, committed)

    async def _lead(self, protocol: str, members: Any) -> list[tuple[str, bytes]]:
        """Run the chosen assignor over every member's subscription."""
        assignor = next((a for a in self.assignors if a.name == protocol), None)
        if assignor is None:
            raise BrokerError(ErrorCode.inconsistent_group_protocol,
                              f"the coordinator chose assignor {protocol!r}, which this "
                              "member does not have", f"group {self.group_id!r}")
        subs: list[MemberSubscription] = []
        for m in members:
            instance = getattr(m, "group_instance_id", None)
            try:
                subs.append(decode_subscription(m.member_id, m.metadata, instance))
            except ValueError as exc:
                log.warning("group %s: member %s sent a subscription we cannot read (%s); "
                            "it gets no partitions", self.group_id, m.member_id, exc)
                subs.append(MemberSubscription(m.member_id, (), instance_id=instance))
        wanted = sorted({t for s in subs for t in s.topics})
        self.cluster.add_topics(wanted)
        try:
            await self.cluster.refresh()
        except Exception as exc:
            log.warning("group %s: metadata refresh before assigning failed: %s",
                        self.group_id, exc)
        counts = {t: len(self.cluster.topics[t].partitions) for t in wanted
                  if t in self.cluster.topics and self.cluster.topics[t].partitions}
        self.assigned_counts = counts
        result = assignor.assign(counts, subs)
        log.debug("group %s: leader assigned %s", self.group_id,
                  {m: sorted(tps) for m, tps in result.items()})
        return [(s.member_id, encode_assignment(result.get(s.member_id, []))) for s in subs]

    # --- background: heartbeats and metadata ------------------------------------------------

    def _start_background(self) -> None:
        if not self._tasks:
            loop = asyncio.get_running_loop()
            self._tasks = [
                loop.create_task(self._heartbeat_loop(), name=f"moldau-hb-{self.group_id}"),
                loop.create_task(self._metadata_loop(), name=f"moldau-md-{self.group_id}"),
            ]

    async def _heartbeat_loop(self) -> None:
        last_ok = time.monotonic()
        while True:
            await wait_event(self._hb_wakeup, self.heartbeat_interval)
            self._hb_wakeup.clear()
            if self.state is not State.STABLE or self._join_task is not None:
                last_ok = time.monotonic()
                continue
            if time.monotonic() - self.last_poll > self.rebalance_timeout_ms / 1000:
                log.warning(
                    "group %s: poll() was not called within max.poll.interval.ms=%d; "
                    "leaving the group (processing records takes too long: raise "
                    "max.poll.interval.ms or lower max.poll.records)",
                    self.group_id, self.rebalance_timeout_ms)
                await self._leave("consumer poll timeout expired")
                self.lost = True
                self.request_rejoin("poll timeout expired")
                continue
            try:
                response = await self.coordinator.request(ApiKey.HEARTBEAT, requests.heartbeat(
                    self.group_id, self.generation, self.member_id, self.instance_id))
            except Exception as exc:
                log.debug("group %s: heartbeat failed: %s", self.group_id, exc)
                if time.monotonic() - last_ok > self.session_timeout_ms / 1000:
                    self.coordinator.mark_unknown()
                await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)
                self._hb_wakeup.set()
                continue
            if self.state is not State.STABLE or self._join_task is not None:
                continue  # the answer is about a generation that has ended
            code = response.error_code
            if not code:
                last_ok = time.monotonic()
            elif code == ErrorCode.rebalance_in_progress:
                last_ok = time.monotonic()
                self.request_rejoin("the coordinator started a rebalance")
            elif code in (ErrorCode.unknown_member_id, ErrorCode.illegal_generation):
                self._lose(code, "heartbeat")
            elif code == ErrorCode.fenced_instance_id:
                self.fail(BrokerError(code, _FATAL_JOIN[ErrorCode.fenced_instance_id],
                                      f"heartbeat of group {self.group_id!r}"))
            elif code in COORDINATOR_ERRORS:
                self.coordinator.mark_unknown()
            else:
                log.warning("group %s: heartbeat answered %s", self.group_id,
                            ErrorCode(code).name.upper())

    async def _metadata_loop(self) -> None:
        interval = self.config["metadata.max.age.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            if self.subscription is None or self.state is not State.STABLE:
                continue
            try:
                await self.cluster.refresh(all_topics=self.subscription.is_pattern)
            except Exception as exc:
                log.debug("group %s: metadata refresh failed: %s", self.group_id, exc)
                continue
            topics = self.subscription.resolve(self.cluster)
            if topics != self.joined_topics:
                self.request_rejoin(f"subscribed topics changed to {sorted(topics)}")
            elif self.is_leader and self.assigned_counts is not None:
                counts = {t: len(self.cluster.topics[t].partitions)
                          for t in self.assigned_counts.keys() | self.joined_topics
                          if t in self.cluster.topics and self.cluster.topics[t].partitions}
                if counts != self.assigned_counts:
                    self.request_rejoin("partitions of subscribed topics changed")

    # --- leaving ----------------------------------------------------------------------------

    async def _leave(self, reason: str) -> None:
        """LeaveGroup (dynamic members only: a static member's partitions wait for it
        until its session times out, KIP-345), then forget the generation."""
        if self.instance_id is None and self.member_id and self.coordinator.known:
            try:
                response = await self.coordinator.request(
                    ApiKey.LEAVE_GROUP, requests.leave_group(self.group_id, self.member_id, reason),
                    timeout_ms=min(self.config["request.timeout.ms"], 5000))
                if response.error_code:
                    log.debug("group %s: LeaveGroup answered %s", self.group_id,
                              ErrorCode(response.error_code).name.upper())
            except Exception as exc:
                log.debug("group %s: LeaveGroup failed: %s", self.group_id, exc)
        if self.instance_id is None:
            self.member_id = ""
        self.generation = -1
        self.state = State.UNJOINED

    async def _stop_tasks(self) -> None:
        tasks = [self._join_task, *self._tasks]
        self._join_task, self._tasks = None, []
        await cancel_and_wait(tasks)

    async def unsubscribe(self) -> None:
        """Give every partition up, leave the group and stop."""
        await self._stop_tasks()
        if self.state is State.STABLE:
            await self.revoke(set(self.owned), lost=self.lost)
        elif self.owned:
            await self.revoke(set(self.owned), lost=True)
        await self._leave("the consumer unsubscribed")
        self.rejoin_needed = True
        self._forget_subscription()

    async def close(self, consumer: Consumer) -> None:
        if self._closed:
            return
        await self._stop_tasks()
        if self.subscription is not None:
            stable = self.state is State.STABLE and not self.lost
            await self.revoke(set(self.owned), lost=not stable)
            await self._leave("the consumer is closing")
        await super().close(consumer)
