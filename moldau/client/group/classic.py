"""Classic group membership: JoinGroup/SyncGroup rebalances, heartbeats, LeaveGroup.

How a member goes round (driven from ``poll()``, as in the Java client):

1. *Prepare*: with the eager protocol every owned partition is revoked first (auto-commit,
   ``on_revoke``); with the cooperative one (only ``cooperative-sticky`` configured) the
   member keeps reading its partitions through the rebalance. Partitions declared lost
   (session expired, fenced, ``max.poll.interval.ms`` passed) go to ``on_lost`` instead.
2. *Join* runs in a background task on the generic join engine (:mod:`.engine`, protocol
   type ``consumer``): FindCoordinator, JoinGroup (a first join without a
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
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from moldau.protocol.errors import ErrorCode

from ..errors import BrokerError, ConfigError
from ..tasks import cancel_and_wait
from ..types import TopicPartition
from .assignors import is_cooperative, make_assignors
from .consumer_protocol import (
    PROTOCOL_TYPE,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from .engine import FATAL_JOIN, GroupEngine, Joined, JoinedMember, JoinSettings, State
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

# The engine's fatal answers, worded for consumers.
_FATAL_JOIN = {
    **FATAL_JOIN,
    ErrorCode.fenced_instance_id:
        "another consumer with the same group.instance.id joined; give each consumer "
        "its own group.instance.id",
    ErrorCode.inconsistent_group_protocol:
        "the group's members have no assignor in common (partition.assignment.strategy), "
        "or the group uses another protocol type",
}

__all__ = ["ClassicMember", "JoinResult", "State"]


@dataclass
class JoinResult:
    generation: int
    member_id: str
    protocol: str
    leader: str
    assignment: set[TopicPartition]
    committed: dict[TopicPartition, OffsetAndMetadata | None]


class ClassicMember(GroupMember):
    """A consumer in a classic group (see module docstring); the group protocol of the
    join engine (``protocol_type``, :meth:`metadata`, :meth:`assign`)."""

    protocol_type = PROTOCOL_TYPE
    fatal_hints: Mapping[int, str] = _FATAL_JOIN

    def __init__(self, consumer: Consumer) -> None:
        super().__init__(consumer)
        c = self.config
        self.assignors = make_assignors(c["partition.assignment.strategy"])
        self.cooperative = is_cooperative(self.assignors)
        if c["heartbeat.interval.ms"] >= c["session.timeout.ms"]:
            raise ConfigError(
                f"heartbeat.interval.ms={c['heartbeat.interval.ms']} must be lower than "
                f"session.timeout.ms={c['session.timeout.ms']} (a third of it is usual)")
        self.engine = GroupEngine(self.coordinator, self, JoinSettings(
            session_timeout_ms=c["session.timeout.ms"],
            rebalance_timeout_ms=c["max.poll.interval.ms"],
            heartbeat_interval_ms=c["heartbeat.interval.ms"],
            request_timeout_ms=c["request.timeout.ms"],
            retry_backoff_ms=c["retry.backoff.ms"],
            retry_backoff_max_ms=c["retry.backoff.max.ms"],
            instance_id=self.instance_id,
            poll_timeout_ms=c["max.poll.interval.ms"],
        ), wake=self.wake_poll, on_fatal=self.fail, last_poll=lambda: self.last_poll)
        self.previous: set[TopicPartition] = set()  # last assignment (sticky user data)
        self.joined_topics: set[str] = set()
        self.assigned_counts: dict[str, int] | None = None  # leader: partitions it assigned
        self.rebalances = 0
        self._join_task: asyncio.Task[JoinResult] | None = None
        self._tasks: list[asyncio.Task[None]] = []

    # --- the engine's state, as the consumer reads it ---------------------------------------

    @property
    def member_id(self) -> str:
        return self.engine.member_id

    @member_id.setter
    def member_id(self, value: str) -> None:
        self.engine.member_id = value

    @property
    def lost(self) -> bool:
        return self.engine.lost

    @lost.setter
    def lost(self, value: bool) -> None:
        self.engine.lost = value

    @property
    def generation(self) -> int:
        return self.engine.generation

    @property
    def state(self) -> State:
        return self.engine.state

    @property
    def protocol(self) -> str | None:
        return self.engine.protocol_name

    @property
    def leader_id(self) -> str:
        return self.engine.leader_id

    @property
    def rejoin_needed(self) -> bool:
        return self.engine.rejoin_needed

    @property
    def is_leader(self) -> bool:
        return self.engine.is_leader

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
            self.engine.lose(code, "a commit was refused")

    # --- subscription changes ---------------------------------------------------------------

    def request_rejoin(self, reason: str) -> None:
        self.engine.request_rejoin(reason)

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
            self.engine.begin_join()
            self._join_task = asyncio.get_running_loop().create_task(
                self.engine.join(self._positions), name=f"moldau-join-{self.group_id}")
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
        # membership lost and asks for a rejoin: that is the join about to start, not another
        # (begin_join clears both).

    async def _complete(self, result: JoinResult) -> None:
        """Step 3: apply the assignment the rebalance produced."""
        self.engine.complete()
        self.rebalances += 1
        log.info("group %s: generation %d, member %s%s, assigned %s", self.group_id,
                 result.generation, result.member_id, " (leader)" if self.is_leader else "",
                 sorted(result.assignment))
        revoked = await self.assign_partitions(result.assignment, result.committed)
        self.previous = set(result.assignment)
        self.engine.heartbeat_now()
        if revoked and self.cooperative:
            self.request_rejoin(f"cooperative rebalance: {len(revoked)} partition(s) revoked")

    # --- the group protocol: what the engine asks a consumer --------------------------------

    async def metadata(self) -> list[tuple[str, bytes]]:
        """Resolve the subscription and offer it once per assignor (preference order)."""
        assert self.subscription is not None
        if self.subscription.is_pattern:
            await self.cluster.refresh(all_topics=True)
        topics = sorted(self.subscription.resolve(self.cluster))
        self.joined_topics = set(topics)
        self.cluster.add_topics(topics)
        owned = sorted(self.owned) if self.cooperative else []
        rack = self.config["client.rack"] or None
        return [(a.name, encode_subscription(
            topics, owned=owned, generation=self.generation, rack=rack,
            user_data=a.user_data(sorted(self.previous), self.generation),
        )) for a in self.assignors]

    async def assign(self, protocol: str, members: Sequence[JoinedMember]
                     ) -> dict[str, bytes]:
        """Leader: run the chosen assignor over every member's subscription."""
        assignor = next((a for a in self.assignors if a.name == protocol), None)
        if assignor is None:
            raise BrokerError(ErrorCode.inconsistent_group_protocol,
                              f"the coordinator chose assignor {protocol!r}, which this "
                              "member does not have", f"group {self.group_id!r}")
        subs: list[MemberSubscription] = []
        for m in members:
            try:
                subs.append(decode_subscription(m.member_id, m.metadata, m.instance_id))
            except ValueError as exc:
                log.warning("group %s: member %s sent a subscription we cannot read (%s); "
                            "it gets no partitions", self.group_id, m.member_id, exc)
                subs.append(MemberSubscription(m.member_id, (), instance_id=m.instance_id))
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
        return {s.member_id: encode_assignment(result.get(s.member_id, [])) for s in subs}

    async def _positions(self, joined: Joined) -> JoinResult:
        """After SyncGroup (still in the join task): decode the assignment and find where
        new partitions start."""
        try:
            partitions, _user_data = decode_assignment(joined.assignment)
        except ValueError as exc:
            raise BrokerError(ErrorCode.inconsistent_group_protocol, str(exc),
                              f"SyncGroup for group {self.group_id!r}") from None
        assignment = set(partitions)
        new = assignment - self.owned
        committed = await self.committed(new) if new else {}
        return JoinResult(joined.generation, joined.member_id, joined.protocol,
                          joined.leader_id, assignment, committed)

    # --- background: heartbeats and metadata ------------------------------------------------

    def _start_background(self) -> None:
        if not self._tasks:
            loop = asyncio.get_running_loop()
            self._tasks = [
                loop.create_task(self.engine.heartbeat_loop(),
                                 name=f"moldau-hb-{self.group_id}"),
                loop.create_task(self._metadata_loop(), name=f"moldau-md-{self.group_id}"),
            ]

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
        await self.engine.leave("the consumer unsubscribed")
        self.engine.rejoin_needed = True
        self._forget_subscription()

    async def close(self, consumer: Consumer) -> None:
        if self._closed:
            return
        await self._stop_tasks()
        if self.subscription is not None:
            stable = self.state is State.STABLE and not self.lost
            await self.revoke(set(self.owned), lost=not stable)
            await self.engine.leave("the consumer is closing")
        await super().close(consumer)
