"""The leader's ISR manager: when a follower leaves or joins the in-sync replicas, and the
task that asks the controller for it (Kafka's ``Partition.maybeShrinkIsr`` /
``maybeExpandIsr`` with ``AlterPartitionManager``).

The decisions are pure functions over what the leader knows of each follower (any object
with ``log_end_offset`` and ``last_caught_up_time_ms``, as
:class:`~moldau.broker.replication.progress.ReplicaProgress` has):

- :func:`to_shrink`: the ISR members that are out of sync — a follower that does not have the
  leader's whole log and has not been caught up for more than ``replica.lag.time.max.ms``;
- :func:`may_join`: a follower outside the ISR may join once its log reaches the high
  watermark and the start offset of the leader's current epoch (everything committed, and
  everything this leader wrote, is on it).

:class:`IsrManager` checks every leader partition every ``replica.lag.time.max.ms / 2`` (as
Kafka's ``isr-expiration`` task) and, after a follower's fetch, whether it may join; a change
is sent as AlterPartition through the controller channel (local controller or forwarded).
Like Kafka's pending ISR state, a partition has at most one change in flight: no other is
asked for until the controller answered; meanwhile :meth:`IsrManager.maximal_isr` is the ISR
the high watermark must respect (the current one plus a replica being added — a replica being
removed still counts until the removal is committed), so a record is never acknowledged on
the strength of an ISR the controller has not accepted. A refused change is dropped: the
leader learns the partition's current state from the metadata (a new leader or partition
epoch) and decides again at the next check.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ...protocol.errors import ErrorCode
from ..metadata.isr_change import IsrChange, IsrChangeResult

log = logging.getLogger(__name__)

__all__ = ["FollowerProgress", "IsrManager", "LeaderPartition", "may_join", "to_shrink"]


class FollowerProgress(Protocol):
    """What the ISR decisions read of a follower's progress."""

    @property
    def log_end_offset(self) -> int: ...

    @property
    def last_caught_up_time_ms(self) -> int: ...


def to_shrink(isr: Collection[int], progress_by_replica: Mapping[int, FollowerProgress],
              now_ms: int, lag_ms: int, *, leader_id: int, leader_log_end_offset: int
              ) -> list[int]:
    """The members of ``isr`` (the leader excepted) that are out of sync, in ISR order: not
    at the leader's log end offset and not caught up within ``lag_ms``. A member the leader
    has no progress for has never been seen fetching: it is out of sync too (a new leader
    first gives every ISR member a progress caught up "now", so this only drops replicas that
    truly never fetched)."""
    out = []
    for replica in isr:
        if replica == leader_id:
            continue
        progress = progress_by_replica.get(replica)
        if progress is None or (progress.log_end_offset != leader_log_end_offset
                                and now_ms - progress.last_caught_up_time_ms > lag_ms):
            out.append(replica)
    return out


def may_join(progress: FollowerProgress, high_watermark: int, epoch_start_offset: int) -> bool:
    """Whether a follower outside the ISR may join it: its log end offset is known and reaches
    both the high watermark and the start offset of the leader's epoch."""
    end = progress.log_end_offset
    return end >= 0 and end >= high_watermark and end >= epoch_start_offset


class LeaderPartition(Protocol):
    """A partition this broker leads, as the ISR manager reads it."""

    @property
    def topic_id(self) -> uuid.UUID: ...

    @property
    def partition(self) -> int: ...

    @property
    def leader_epoch(self) -> int: ...

    @property
    def partition_epoch(self) -> int: ...

    @property
    def isr(self) -> Sequence[int]: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def epoch_start_offset(self) -> int: ...

    @property
    def followers(self) -> Mapping[int, FollowerProgress]: ...


Key = tuple[uuid.UUID, int]
SendChanges = Callable[[int, Sequence[IsrChange]], Awaitable[list[IsrChangeResult]]]


@dataclass(frozen=True)
class Pending:
    """The one ISR change in flight for a partition."""

    change: IsrChange
    added: tuple[int, ...]
    removed: tuple[int, ...]


class IsrManager:
    """Shrinks and expands the ISR of the partitions this broker leads (see the module)."""

    def __init__(self, *, node_id: int, lag_ms: Callable[[], int], send: SendChanges,
                 leaders: Callable[[], Iterable[LeaderPartition]],
                 time_ms: Callable[[], int],
                 on_result: Callable[[IsrChangeResult], None] | None = None) -> None:
        self.node_id = node_id
        self.lag_ms = lag_ms
        self.send = send
        self.leaders = leaders
        self.time_ms = time_ms
        self.on_result = on_result
        self.pending: dict[Key, Pending] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._runner: asyncio.Task[None] | None = None

    # --- decisions -----------------------------------------------------------------------
    def maximal_isr(self, key: Key, isr: Sequence[int]) -> list[int]:
        """The ISR the high watermark must respect while a change is in flight: ``isr`` plus
        a replica being added (one being removed counts until the controller agreed)."""
        pending = self.pending.get(key)
        if pending is None:
            return list(isr)
        return [*isr, *(b for b in pending.added if b not in isr)]

    def check_shrink(self, now_ms: int | None = None) -> list[IsrChange]:
        """Ask for the removal of out-of-sync followers of every led partition without a
        change in flight; the changes asked for."""
        now = self.time_ms() if now_ms is None else now_ms
        asked = []
        for partition in self.leaders():
            key = (partition.topic_id, partition.partition)
            if key in self.pending:
                continue
            out = to_shrink(partition.isr, partition.followers, now, self.lag_ms(),
                            leader_id=self.node_id,
                            leader_log_end_offset=partition.log_end_offset)
            if out:
                new_isr = tuple(b for b in partition.isr if b not in out)
                log.info("ISR of %s-%d shrinks from %s to %s: replica(s) %s not caught up "
                         "within replica.lag.time.max.ms=%d", partition.topic_id,
                         partition.partition, list(partition.isr), list(new_isr), out,
                         self.lag_ms())
                asked.append(self._submit(partition, new_isr, (), tuple(out)))
        return asked

    def check_expand(self, partition: LeaderPartition, replica: int) -> IsrChange | None:
        """After a fetch of ``replica``: ask for it to join the ISR if it may (and no change
        of the partition is in flight); the change asked for, else None."""
        key = (partition.topic_id, partition.partition)
        progress = partition.followers.get(replica)
        if (key in self.pending or replica in partition.isr or progress is None
                or not may_join(progress, partition.high_watermark,
                                partition.epoch_start_offset)):
            return None
        new_isr = (*partition.isr, replica)
        log.info("ISR of %s-%d expands from %s to %s: replica %d caught up to offset %d",
                 partition.topic_id, partition.partition, list(partition.isr), list(new_isr),
                 replica, progress.log_end_offset)
        return self._submit(partition, new_isr, (replica,), ())

    # --- sending -----------------------------------------------------------------------------
    def _submit(self, partition: LeaderPartition, new_isr: tuple[int, ...],
                added: tuple[int, ...], removed: tuple[int, ...]) -> IsrChange:
        change = IsrChange(partition.topic_id, partition.partition, partition.leader_epoch,
                           partition.partition_epoch, new_isr)
        key = (partition.topic_id, partition.partition)
        self.pending[key] = Pending(change, added, removed)
        task = asyncio.ensure_future(self._send(key, change))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return change

    async def _send(self, key: Key, change: IsrChange) -> None:
        try:
            [result] = await self.send(self.node_id, [change])
        except Exception as exc:  # the channel failed: decide again at the next check
            log.warning("ISR change of %s-%d to %s failed: %r", change.topic_id,
                        change.partition, list(change.new_isr), exc)
            return
        finally:
            self.pending.pop(key, None)
        if result.error != ErrorCode.none:
            log.info("ISR change of %s-%d to %s refused by the controller: %s %s",
                     change.topic_id, change.partition, list(change.new_isr),
                     result.error.name.upper(), result.message or "")
        if self.on_result is not None:
            self.on_result(result)

    async def drain(self) -> None:
        """Wait for every change in flight to be answered (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # --- the periodic check ------------------------------------------------------------------
    def start(self) -> None:
        """Check for out-of-sync followers every ``replica.lag.time.max.ms / 2``."""
        if self._runner is None:
            self._runner = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(max(self.lag_ms(), 2) / 2000)
            try:
                self.check_shrink()
            except Exception:
                log.exception("the ISR check failed")

    async def stop(self) -> None:
        """Stop the periodic check and cancel changes in flight."""
        tasks = [t for t in (self._runner, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._runner = None
        self.pending.clear()
