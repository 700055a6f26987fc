"""The leader's ISR manager: when a follower leaves or joins the in-sync replicas, and the
task that asks the controller for it (Kafka's ``Partition.maybeShrinkIsr`` /
``maybeExpandIsr`` with ``AlterPartitionManager``).

The rules are :func:`~.progress.is_caught_up` and :func:`~.progress.can_join_isr` (the one
place they live); this module applies them to a partition's ISR:

- :func:`to_shrink`: the ISR members that are out of sync — a follower that does not have the
  leader's whole log and has not been caught up for more than ``replica.lag.time.max.ms``;
- a follower outside the ISR may join once its log reaches the high watermark and the start
  offset of the leader's current epoch (everything committed, and everything this leader
  wrote, is on it).

:class:`IsrManager` checks every leader partition every ``replica.lag.time.max.ms / 2`` (as
Kafka's ``isr-expiration`` task) and, after a follower's fetch, whether it may join; a change
is sent as AlterPartition through the controller channel (local controller or forwarded).
Like Kafka's pending ISR state, a partition has at most one change in flight: no other is
asked for until the controller answered; meanwhile :meth:`IsrManager.maximal_isr` is the ISR
the high watermark must respect (the current one plus a replica being added — a replica being
removed still counts until the removal is committed), so a record is never acknowledged on
the strength of an ISR the controller has not accepted.

The controller's answer is handed to ``on_result``, which applies the new ISR and partition
epoch to the partition at once (as Kafka's leader does with an AlterPartition response): the
broker's image learns it only with the metadata replay (a ZooKeeper watch, a round trip
later), and until then the next change would be built on the old partition epoch and be
refused. Errors are handled as Kafka does: FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION and the
other "your view is stale" answers drop the change and ask nothing more for the partition
until the metadata brings it a new leader or partition epoch; INELIGIBLE_REPLICA and
INVALID_REQUEST drop it (nothing more is asked for the partition for 5 s: a follower in
controlled shutdown still fetches); anything else (no controller reachable, NOT_CONTROLLER
during an election, a timeout) is retried with a back-off while the partition's epochs are
still those the change was built on.
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
from .progress import FollowerProgress, can_join_isr, is_caught_up

log = logging.getLogger(__name__)

__all__ = ["IsrManager", "LeaderPartition", "to_shrink"]

#: Answers that mean the leader's view of the partition is stale: wait for the metadata.
WAIT_FOR_METADATA = frozenset({
    ErrorCode.fenced_leader_epoch, ErrorCode.invalid_update_version,
    ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_id,
    ErrorCode.unknown_topic_or_partition})
#: Answers about the change itself: drop it, the next check decides again.
DROP = frozenset({ErrorCode.ineligible_replica, ErrorCode.invalid_request})
#: Back-off between retries of a change the controller could not take (Kafka's
#: AlterPartitionManager retries too; doubled up to the maximum).
RETRY_BACKOFF_MS = 100
RETRY_BACKOFF_MAX_MS = 5000


def to_shrink(isr: Collection[int], progress_by_replica: Mapping[int, FollowerProgress],
              now_ms: int, lag_ms: int, *, leader_id: int, leader_log_end_offset: int
              ) -> list[int]:
    """The members of ``isr`` (the leader excepted) that are out of sync
    (:func:`~.progress.is_caught_up` is false), in ISR order. A member the leader has no
    progress for has never been seen fetching: it is out of sync too (a new leader first gives
    every ISR member a progress caught up "now", so this only drops replicas that truly never
    fetched)."""
    out = []
    for replica in isr:
        if replica == leader_id:
            continue
        progress = progress_by_replica.get(replica)
        if progress is None or not is_caught_up(progress,
                                                leader_log_end_offset=leader_log_end_offset,
                                                now_ms=now_ms, max_lag_ms=lag_ms):
            out.append(replica)
    return out


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
                 on_result: Callable[[IsrChangeResult], None] | None = None,
                 retry_backoff_ms: int = RETRY_BACKOFF_MS) -> None:
        self.node_id = node_id
        self.lag_ms = lag_ms
        self.send = send
        self.leaders = leaders
        self.time_ms = time_ms
        self.on_result = on_result
        self.retry_backoff_ms = retry_backoff_ms
        self.pending: dict[Key, Pending] = {}
        # Partitions whose change was refused as stale: the (leader epoch, partition epoch)
        # it was built on. Nothing more is asked until the metadata moves one of them.
        self.stale: dict[Key, tuple[int, int]] = {}
        # Partitions whose change was dropped as unfit (INELIGIBLE_REPLICA: e.g. a follower in
        # controlled shutdown still fetches): nothing more is asked before this time (ms), so
        # a follower's every fetch does not become a refused request.
        self.hold_until: dict[Key, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._runner: asyncio.Task[None] | None = None

    # --- decisions -----------------------------------------------------------------------
    def maximal_isr(self, key: Key, isr: Sequence[int]) -> Sequence[int]:
        """The ISR the high watermark must respect while a change is in flight: ``isr`` plus
        a replica being added (one being removed counts until the controller agreed); ``isr``
        itself (not a copy: this runs on every append) when none is."""
        pending = self.pending.get(key)
        if pending is None:
            return isr
        return [*isr, *(b for b in pending.added if b not in isr)]

    def _may_ask(self, partition: LeaderPartition) -> bool:
        key = (partition.topic_id, partition.partition)
        if key in self.pending:
            return False
        hold = self.hold_until.get(key)
        if hold is not None:
            if self.time_ms() < hold:
                return False
            del self.hold_until[key]
        stale = self.stale.get(key)
        if stale is None:
            return True
        if stale == (partition.leader_epoch, partition.partition_epoch):
            return False
        del self.stale[key]  # the metadata moved on: decide again
        return True

    def check_shrink(self, now_ms: int | None = None) -> list[IsrChange]:
        """Ask for the removal of out-of-sync followers of every led partition without a
        change in flight; the changes asked for."""
        now = self.time_ms() if now_ms is None else now_ms
        asked = []
        led: set[Key] = set()
        for partition in self.leaders():
            led.add((partition.topic_id, partition.partition))
            if not self._may_ask(partition):
                continue
            out = to_shrink(partition.isr, partition.followers, now, self.lag_ms(),
                            leader_id=self.node_id,
                            leader_log_end_offset=partition.log_end_offset)
            if out:
                new_isr = tuple(b for b in partition.isr if b not in out)
                log.info("ISR of %s-%d shrinks from %s to %s: replica(s) %s not caught up "
                         "within replica.lag.time.max.ms=%d", _name(partition),
                         partition.partition, list(partition.isr), list(new_isr), out,
                         self.lag_ms())
                asked.append(self._submit(partition, new_isr, (), tuple(out)))
        self._forget_unled(led)
        return asked

    def _forget_unled(self, led: set[Key]) -> None:
        """Drop what is remembered of partitions this broker no longer leads (deleted, or
        led elsewhere now): a deleted topic's entries would otherwise stay forever, and a
        partition led again later starts from a fresh decision."""
        for remembered in (self.stale, self.hold_until):
            for key in [k for k in remembered if k not in led]:
                del remembered[key]

    def check_expand(self, partition: LeaderPartition, replica: int) -> IsrChange | None:
        """After a fetch of ``replica``: ask for it to join the ISR if it may (and no change
        of the partition is in flight); the change asked for, else None."""
        progress = partition.followers.get(replica)
        if (replica in partition.isr or progress is None
                or not can_join_isr(progress, high_watermark=partition.high_watermark,
                                    leader_epoch_start_offset=partition.epoch_start_offset)
                or not self._may_ask(partition)):
            return None
        new_isr = (*partition.isr, replica)
        log.info("ISR of %s-%d expands from %s to %s: replica %d caught up to offset %d",
                 _name(partition), partition.partition, list(partition.isr), list(new_isr),
                 replica, progress.log_end_offset)
        return self._submit(partition, new_isr, (replica,), ())

    # --- sending -----------------------------------------------------------------------------
    def _submit(self, partition: LeaderPartition, new_isr: tuple[int, ...],
                added: tuple[int, ...], removed: tuple[int, ...]) -> IsrChange:
        change = IsrChange(partition.topic_id, partition.partition, partition.leader_epoch,
                           partition.partition_epoch, new_isr)
        key = (partition.topic_id, partition.partition)
        self.pending[key] = Pending(change, added, removed)
        task = asyncio.ensure_future(self._send(key, change, partition))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return change

    async def _send(self, key: Key, change: IsrChange, partition: LeaderPartition) -> None:
        where = f"{_name(partition)}-{change.partition}"
        backoff = self.retry_backoff_ms
        try:
            while True:
                try:
                    [result] = await self.send(self.node_id, [change])
                except Exception as exc:  # the channel failed: retried below
                    result = IsrChangeResult(change.topic_id, change.partition,
                                             ErrorCode.unknown_server_error, repr(exc))
                if result.error == ErrorCode.none or result.error in WAIT_FOR_METADATA \
                        or result.error in DROP:
                    break
                if (partition.leader_epoch, partition.partition_epoch) != (
                        change.leader_epoch, change.partition_epoch):
                    log.info("ISR change of %s to %s dropped: the partition moved to leader "
                             "epoch %d, partition epoch %d meanwhile", where,
                             list(change.new_isr), partition.leader_epoch,
                             partition.partition_epoch)
                    return
                log.warning("ISR change of %s to %s failed (%s %s): retrying in %d ms",
                            where, list(change.new_isr), result.error.name.upper(),
                            result.message or "", backoff)
                await asyncio.sleep(backoff / 1000)
                backoff = min(backoff * 2, RETRY_BACKOFF_MAX_MS)
        finally:
            self.pending.pop(key, None)
        if result.error in WAIT_FOR_METADATA:
            self.stale[key] = (change.leader_epoch, change.partition_epoch)
            log.info("ISR change of %s to %s refused by the controller: %s %s; waiting for "
                     "the metadata", where, list(change.new_isr), result.error.name.upper(),
                     result.message or "")
        elif result.error != ErrorCode.none:
            self.hold_until[key] = self.time_ms() + RETRY_BACKOFF_MAX_MS
            log.warning("ISR change of %s to %s refused by the controller: %s %s", where,
                        list(change.new_isr), result.error.name.upper(), result.message or "")
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


def _name(partition: LeaderPartition) -> str:
    """The topic's name for logs (the id when the partition has none)."""
    return str(getattr(partition, "topic", None) or partition.topic_id)
