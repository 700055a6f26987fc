"""What every kind of group membership shares: committing offsets, auto-commit, applying
an assignment to the consumer and telling the rebalance listener.

:class:`GroupMember` implements the consumer's ``GroupMembership`` seam for a consumer that
only commits (``assign()`` plus ``group.id``: "simple" commits with generation -1, the way
kcat and ``kafka-consumer-groups`` commit). The classic protocol (:mod:`.classic`) and the
KIP-848 consumer protocol (:mod:`.kip848`) subclass it with real membership.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

from ..errors import BrokerError, ClientError, KafkaTimeoutError
from ..retry import backoff_ms, call_with_retries
from ..types import TopicPartition
from .coordinator import COORDINATOR_ERRORS, CoordinatorLink
from .listener import RebalanceListener, invoke
from .offsets import (
    as_offset,
    commit_body,
    commit_errors,
    fetch_body,
    fetch_result,
    pick_version,
)
from .subscription import TopicSubscription
from .types import CommitFailedError, OffsetAndMetadata, RebalanceInProgressError

if TYPE_CHECKING:
    from ..consumer import Consumer

log = logging.getLogger(__name__)

CommitCallback = Callable[[dict[TopicPartition, OffsetAndMetadata], BaseException | None], Any]

# Commit answers that mean this member's generation/epoch is over.
MEMBERSHIP_LOST = frozenset({
    ErrorCode.unknown_member_id, ErrorCode.illegal_generation, ErrorCode.fenced_member_epoch,
})


class _RetryCommit(BrokerError):
    """A commit answer worth retrying although Kafka does not class the code retriable."""

    @property
    def retriable(self) -> bool:  # type: ignore[override]
        return True


class GroupMember:
    """Commits for ``group.id`` without membership; base of the real memberships."""

    # Class-level defaults: a membership may keep them elsewhere (the classic one keeps them
    # in its join engine and reads them through properties).
    member_id: str = ""
    lost: bool = False

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.cluster = consumer.cluster
        self.config = consumer.config
        self.group_id: str = self.config["group.id"]
        self.instance_id: str | None = self.config["group.instance.id"]
        self.coordinator = CoordinatorLink(self.cluster, self.group_id)
        self.subscription: TopicSubscription | None = None
        self.listener = RebalanceListener()
        self.owned: set[TopicPartition] = set()
        self.fatal: BaseException | None = None
        self.auto_commit: bool = self.config["enable.auto.commit"]
        self.last_poll = time.monotonic()
        self._next_auto_commit = time.monotonic() + self._auto_commit_interval
        self._committed: dict[TopicPartition, int] = {}
        self._commits: set[asyncio.Task[Any]] = set()
        self._listener_error: BaseException | None = None
        self._closed = False

    @property
    def _auto_commit_interval(self) -> float:
        return self.config["auto.commit.interval.ms"] / 1000

    @property
    def subscribed(self) -> bool:
        return self.subscription is not None

    # --- subscription ---------------------------------------------------------------------

    def subscribe(self, subscription: TopicSubscription, listener: RebalanceListener) -> None:
        """Take a new subscription; the next poll() (re)joins."""
        self.subscription = subscription
        self.listener = listener
        self.request_rejoin("the subscription changed")

    def request_rejoin(self, reason: str) -> None:
        """Make the next poll() rejoin the group (memberships override)."""

    def subscribed_topics(self) -> set[str]:
        """Topics of the subscription as last resolved (pattern matches included)."""
        if self.subscription is None:
            return set()
        return self.subscription.resolve(self.cluster)

    async def unsubscribe(self) -> None:
        """Give every partition up and leave the group (memberships override)."""
        self.subscription = None

    def _forget_subscription(self) -> None:
        """After leaving the group: no subscription, nothing owned or assigned, and the
        error of a rebalance callback (if any) raised now."""
        self.subscription = None
        self.lost = False
        self.owned = set()
        self.consumer._group_assign(set())
        self.raise_pending()

    # --- identity of commits ----------------------------------------------------------------

    def commit_identity(self) -> tuple[int, str, str | None]:
        """(generation or member epoch, member id, instance id) to commit with; raises
        RebalanceInProgressError/CommitFailedError when this member may not commit now."""
        return -1, "", None

    def can_auto_commit(self) -> bool:
        return True

    def on_commit_refused(self, code: int) -> None:
        """The coordinator refused a commit with a membership error (subclasses rejoin)."""

    # --- GroupMembership seam ---------------------------------------------------------------

    async def on_poll(self, consumer: Consumer) -> None:
        """Called by poll(): surface fatal errors, auto-commit when due."""
        self.last_poll = time.monotonic()
        self.raise_pending()
        self.maybe_auto_commit()

    def raise_pending(self) -> None:
        if self.fatal is not None:
            raise self.fatal
        if self._listener_error is not None:
            error, self._listener_error = self._listener_error, None
            raise error

    def maybe_auto_commit(self) -> None:
        if not self.auto_commit or time.monotonic() < self._next_auto_commit:
            return
        self._next_auto_commit = time.monotonic() + self._auto_commit_interval
        if not self.can_auto_commit():
            return
        offsets = {tp: o for tp, o in self.positions().items()
                   if self._committed.get(tp) != o.offset}
        if offsets:
            self.spawn_commit(offsets, None, quiet=True)

    def positions(self, partitions: Iterable[TopicPartition] | None = None
                  ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Current positions (offsets of the next records poll() returns) to commit."""
        states = self.consumer.subscription.partitions
        wanted = states.keys() if partitions is None else partitions
        out = {}
        for tp in wanted:
            state = states.get(tp)
            if state is not None and state.position is not None:
                out[tp] = OffsetAndMetadata(state.position)
        return out

    async def commit(
        self, consumer: Consumer,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None,
        asynchronous: bool = False,
        callback: CommitCallback | None = None,
    ) -> Any:
        """Commit ``offsets`` (default: current positions). Synchronous commits return the
        committed offsets or raise; asynchronous ones return the task doing it."""
        if offsets is None:
            wanted = self.positions()
        else:
            wanted = {TopicPartition(*tp): as_offset(v) for tp, v in offsets.items()}
        if asynchronous:
            return self.spawn_commit(wanted, callback)
        return await self.commit_sync(wanted)

    def spawn_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata],
                     callback: CommitCallback | None, quiet: bool = False
                     ) -> asyncio.Task[dict[TopicPartition, OffsetAndMetadata]]:
        async def run() -> dict[TopicPartition, OffsetAndMetadata]:
            error: BaseException | None = None
            try:
                # One attempt: a retry arriving after a later commit would overwrite it.
                return await self.commit_sync(offsets, retry=False)
            except Exception as exc:
                error = exc
                if quiet:
                    log.warning("group %s: auto-commit of %d partition(s) failed: %s",
                                self.group_id, len(offsets), exc)
                    return {}
                raise
            finally:
                if callback is not None:
                    try:
                        callback(dict(offsets), error)
                    except Exception:
                        log.exception("commit callback raised")

        task = asyncio.get_running_loop().create_task(run(), name="moldau-commit")
        self._commits.add(task)
        task.add_done_callback(self._commit_done)
        return task

    def _commit_done(self, task: asyncio.Task[Any]) -> None:
        self._commits.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: the caller may never await the task

    async def commit_sync(self, offsets: dict[TopicPartition, OffsetAndMetadata],
                          retry: bool = True) -> dict[TopicPartition, OffsetAndMetadata]:
        """OffsetCommit; retriable failures (the coordinator moved) are retried until
        default.api.timeout.ms unless ``retry`` is False."""
        if not offsets:
            return {}
        timeout_ms = self.config["default.api.timeout.ms"]
        deadline = time.monotonic() + timeout_ms / 1000
        attempt = 0
        pending = dict(offsets)
        while True:
            generation, member_id, instance_id = self.commit_identity()
            try:
                failed = await self._commit_once(pending, generation, member_id, instance_id)
            except Exception as exc:
                if not getattr(exc, "retriable", False) or isinstance(exc, CommitFailedError):
                    raise
                failed = {tp: exc for tp in pending}
            again: dict[TopicPartition, OffsetAndMetadata] = {}
            for tp, error in failed.items():
                if getattr(error, "retriable", False) and retry:
                    again[tp] = pending[tp]
                else:
                    raise error
            if not again:
                return offsets
            pause = backoff_ms(attempt, self.config["retry.backoff.ms"],
                               self.config["retry.backoff.max.ms"]) / 1000
            if time.monotonic() + pause > deadline:
                first = next(iter(failed.values()))
                raise KafkaTimeoutError(
                    f"commit to group {self.group_id!r} did not succeed within "
                    f"default.api.timeout.ms={timeout_ms}; last error: {first}"
                ) from first
            pending = again
            attempt += 1
            await asyncio.sleep(pause)

    async def _commit_once(self, offsets: dict[TopicPartition, OffsetAndMetadata],
                           generation: int, member_id: str, instance_id: str | None
                           ) -> dict[TopicPartition, BaseException]:
        conn = await self.coordinator.connection()
        topics = {tp.topic for tp in offsets}
        ids = {t: self.cluster.topic_id(t) for t in topics}
        version = pick_version(conn, ApiKey.OFFSET_COMMIT, topics, ids)
        response = await self.coordinator.request(
            ApiKey.OFFSET_COMMIT,
            commit_body(self.group_id, generation, member_id, instance_id, offsets, ids),
            version=version,
        )
        codes = commit_errors(response, self.cluster.topic_names)
        failed: dict[TopicPartition, BaseException] = {}
        for tp in offsets:
            code = codes.get(tp, ErrorCode.unknown_server_error)
            if not code:
                self._committed[tp] = offsets[tp].offset
                continue
            if code in COORDINATOR_ERRORS:
                self.coordinator.mark_unknown()
            if code == ErrorCode.stale_member_epoch:
                # KIP-848: the epoch moved on while the commit was in flight; the next
                # attempt carries the new one.
                failed[tp] = _RetryCommit(code, context=f"commit of {tp}")
                continue
            if code in MEMBERSHIP_LOST or code in (ErrorCode.rebalance_in_progress,
                                                   ErrorCode.fenced_instance_id):
                self.on_commit_refused(code)
                if code == ErrorCode.rebalance_in_progress:
                    raise RebalanceInProgressError(f"commit to group {self.group_id!r}")
                raise CommitFailedError(code, context=f"commit to group {self.group_id!r}")
            failed[tp] = BrokerError(code, context=f"commit of {tp} to group {self.group_id!r}")
        return failed

    async def committed(self, partitions: Iterable[TopicPartition] | None,
                        member_id: str | None = None, member_epoch: int = -1
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets of ``partitions`` (all the group has when None)."""
        wanted = None if partitions is None else sorted({TopicPartition(*tp)
                                                         for tp in partitions})
        timeout_ms = self.config["default.api.timeout.ms"]
        return await call_with_retries(
            lambda: self._fetch_once(wanted, member_id, member_epoch),
            timeout_ms=timeout_ms, initial_ms=self.config["retry.backoff.ms"],
            max_ms=self.config["retry.backoff.max.ms"],
            what=f"OffsetFetch for group {self.group_id!r}",
            limit=f"default.api.timeout.ms={timeout_ms}")

    async def _fetch_once(self, partitions: list[TopicPartition] | None,
                          member_id: str | None, member_epoch: int
                          ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        if partitions == []:
            return {}
        conn = await self.coordinator.connection()
        topics = {tp.topic for tp in partitions or ()}
        ids = {t: self.cluster.topic_id(t) for t in topics}
        version = pick_version(conn, ApiKey.OFFSET_FETCH, topics, ids)
        response = await self.coordinator.request(ApiKey.OFFSET_FETCH, fetch_body(
            self.group_id, partitions, ids, member_id=member_id, member_epoch=member_epoch,
            require_stable=True,
        ), version=version)
        group_error, values = fetch_result(response, version, self.cluster.topic_names)
        self.coordinator.check(group_error, "OffsetFetch")
        out: dict[TopicPartition, OffsetAndMetadata | None] = {}
        for tp, value in values.items():
            if isinstance(value, int):
                self.coordinator.check(value, f"OffsetFetch of {tp}")
            else:
                out[tp] = value
        for tp in partitions or ():
            out.setdefault(tp, None)
        return out

    async def flush_commits(self, timeout: float) -> None:
        """Wait for asynchronous commits in flight (close() does, as Java's does)."""
        pending = [t for t in self._commits if not t.done()]
        if pending:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await asyncio.gather(*pending, return_exceptions=True)

    # --- assignment changes -----------------------------------------------------------------

    async def revoke(self, partitions: set[TopicPartition], *, lost: bool = False) -> None:
        """Give partitions up: commit them (auto-commit, unless lost), tell the listener,
        then stop reading them."""
        partitions = partitions & self.owned
        if not partitions:
            return
        if not lost and self.auto_commit:
            offsets = self.positions(partitions)
            try:
                await self.commit_sync(offsets)
            except Exception as exc:
                log.warning("group %s: commit of revoked partitions failed: %s",
                            self.group_id, exc)
        self._remember_listener_error(await invoke(
            self.listener, "lost" if lost else "revoked", partitions))
        self.owned -= partitions
        self.consumer._group_assign(self.owned)

    async def assign_partitions(self, assignment: set[TopicPartition],
                                committed: Mapping[TopicPartition, OffsetAndMetadata | None]
                                ) -> set[TopicPartition]:
        """Read ``assignment`` from now on: revoke what it lacks, position what is new at
        its committed offset (else auto.offset.reset), then tell the listener. Returns the
        partitions that were revoked."""
        revoked = self.owned - assignment
        if revoked:
            await self.revoke(revoked)
        added = assignment - self.owned
        self.owned = set(assignment)
        self.consumer._group_assign(self.owned)
        states = self.consumer.subscription.partitions
        for tp in added:
            value = committed.get(tp)
            if value is not None and tp in states:
                states[tp].seek(value.offset)
        self._remember_listener_error(await invoke(self.listener, "assigned", added))
        return revoked

    def _remember_listener_error(self, error: BaseException | None) -> None:
        if error is not None and self._listener_error is None:
            self._listener_error = error

    def wake_poll(self) -> None:
        """Make a waiting poll() run its group work now (a rebalance finished or began)."""
        self.consumer.fetcher.data_ready.set()

    # --- lifecycle --------------------------------------------------------------------------

    async def close(self, consumer: Consumer) -> None:
        """Commit (auto-commit), wait for async commits, close the coordinator link."""
        if self._closed:
            return
        self._closed = True
        if self.auto_commit and self.can_auto_commit():
            try:
                await self.commit_sync(self.positions())
            except Exception as exc:
                log.warning("group %s: final auto-commit failed: %s", self.group_id, exc)
        await self.flush_commits(self.config["request.timeout.ms"] / 1000)
        self.coordinator.close()

    def fail(self, error: BaseException) -> None:
        """A fatal error: every later poll() raises it."""
        if self.fatal is None:
            self.fatal = error if isinstance(error, ClientError) else ClientError(str(error))
        self.wake_poll()
