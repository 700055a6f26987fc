"""KIP-848 group membership (``group.protocol=consumer``): one ConsumerGroupHeartbeat does
everything, and the broker computes the assignment (``group.remote.assignor``).

A background task heartbeats every ``heartbeat_interval`` the coordinator asks for, sending
the member's full state (epoch, subscription, owned partitions) so any answer can be acted
on. The coordinator answers with the member's epoch and the partitions it should own now:
first without the partitions it must give up, and only once the member reports them gone
with those it gains. ``poll()`` reconciles: partitions taken away are revoked (auto-commit,
``on_revoke``), new ones positioned at their committed offsets and handed to ``on_assign``,
and the next heartbeat (sent at once) acknowledges the change.

Errors: FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID mean the partitions are lost (``on_lost``)
and the member rejoins with epoch 0; UNRELEASED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR,
GROUP_MAX_SIZE_REACHED and INVALID_REGULAR_EXPRESSION are fatal. Leaving sends epoch -1
(-2 for a static member, which keeps its partitions until its session times out). If poll()
is not called within ``max.poll.interval.ms`` the member leaves and later rejoins.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.entities import to_ms
from moldau.protocol.errors import ErrorCode

from ..errors import BrokerError
from ..retry import backoff_ms, wait_event
from ..tasks import cancel_and_wait
from ..types import TopicPartition
from . import requests
from .coordinator import COORDINATOR_ERRORS
from .membership import GroupMember
from .types import CommitFailedError, RebalanceInProgressError

if TYPE_CHECKING:
    from ..consumer import Consumer

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
_LOST = frozenset({ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id})
_FATAL = {
    ErrorCode.unreleased_instance_id:
        "a consumer with the same group.instance.id is still in the group",
    ErrorCode.unsupported_assignor: "the broker has no such group.remote.assignor",
    ErrorCode.group_max_size_reached: "the group has group.consumer.max.size members",
    ErrorCode.invalid_regular_expression: "the broker cannot use the subscription pattern",
    ErrorCode.unsupported_version:
        "the broker does not serve the consumer group protocol (use group.protocol=classic)",
    ErrorCode.group_authorization_failed: "not authorized to join this group",
    ErrorCode.invalid_request: "the broker refused the heartbeat",
    ErrorCode.group_id_not_found: "the group is not a consumer-protocol group",
}


def new_member_id() -> str:
    """A client-chosen member id (KIP-1082), shaped as Kafka prints a Uuid (base64url)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class ConsumerProtocolMember(GroupMember):
    """A consumer in a KIP-848 consumer group (see module docstring)."""

    def __init__(self, consumer: Consumer) -> None:
        super().__init__(consumer)
        self.epoch = 0
        self.joined = False  # the coordinator gave this member an epoch > 0
        self.interval = self.config["heartbeat.interval.ms"] / 1000
        self.target: set[TopicPartition] | None = None  # what the coordinator assigns now
        self.lost = False
        self.leaving = False
        self.rebalances = 0
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # --- commits ----------------------------------------------------------------------------

    def commit_identity(self) -> tuple[int, str, str | None]:
        if not self.subscribed:
            return -1, "", None
        if self.joined and self.epoch > 0:
            return self.epoch, self.member_id, self.instance_id
        if self.lost or self.leaving:
            raise CommitFailedError(ErrorCode.fenced_member_epoch,
                                    context=f"commit to group {self.group_id!r}")
        raise RebalanceInProgressError(f"commit to group {self.group_id!r}")

    def can_auto_commit(self) -> bool:
        return not self.subscribed or (self.joined and self.epoch > 0)

    def on_commit_refused(self, code: int) -> None:
        if code in _LOST:
            self._lose(code, "a commit was refused")

    def request_rejoin(self, reason: str) -> None:
        self._wakeup.set()  # a changed subscription goes out with the next heartbeat

    # --- poll: reconciliation ---------------------------------------------------------------

    async def on_poll(self, consumer: Consumer) -> None:
        self.last_poll = time.monotonic()
        self.raise_pending()
        if self.subscription is None:
            self.maybe_auto_commit()
            return
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._heartbeat_loop(), name=f"moldau-cghb-{self.group_id}")
        if self.lost:
            self.lost = False
            self.target = None
            await self.revoke(set(self.owned), lost=True)
            self._wakeup.set()  # rejoin now
        target = self.target
        if target is not None and target != self.owned:
            self.rebalances += 1
            log.info("group %s: epoch %d, member %s, assigned %s", self.group_id, self.epoch,
                     self.member_id, sorted(target))
            new = target - self.owned
            committed = await self.committed(new) if new else {}
            if self.target == target:  # nothing changed while the offsets were fetched
                await self.assign_partitions(target, committed)
                self._wakeup.set()  # acknowledge at once
        if self.joined:
            self.maybe_auto_commit()
        self.raise_pending()

    def _lose(self, code: int, reason: str) -> None:
        log.warning("group %s: member %s lost its partitions (%s: %s)", self.group_id,
                    self.member_id, ErrorCode(code).name.upper(), reason)
        self.epoch = 0
        self.joined = False
        self.lost = True
        self.target = None
        self.wake_poll()

    # --- heartbeats -------------------------------------------------------------------------

    def _request(self, epoch: int, version: int) -> dict[str, Any]:
        """A full heartbeat (every field set), so any answer can be acted on."""
        assert self.subscription is not None
        owned: dict[uuid.UUID, list[int]] = {}
        for tp in sorted(self.owned):
            topic_id = self.cluster.topic_id(tp.topic)
            if topic_id is not None:
                owned.setdefault(topic_id, []).append(tp.partition)
        regex = self.subscription.regex if version >= 1 else None
        names = None if regex is not None else sorted(self.subscription.resolve(self.cluster))
        return requests.consumer_group_heartbeat(
            self.group_id, self.member_id, epoch, instance_id=self.instance_id,
            rack=self.config["client.rack"] or None,
            rebalance_ms=self.config["max.poll.interval.ms"], topics=names, regex=regex,
            assignor=self.config["group.remote.assignor"],
            owned=[] if epoch == 0 else list(owned.items()),
        )

    async def _heartbeat_loop(self) -> None:
        attempt = 0
        while True:
            await wait_event(self._wakeup, self.interval)
            self._wakeup.clear()
            if self.subscription is None or self.leaving or self.lost:
                continue
            if self.joined and time.monotonic() - self.last_poll > (
                    self.config["max.poll.interval.ms"] / 1000):
                log.warning(
                    "group %s: poll() was not called within max.poll.interval.ms=%d; leaving "
                    "the group", self.group_id, self.config["max.poll.interval.ms"])
                await self._leave()
                self.lost = True
                self.wake_poll()
                continue
            try:
                await self._heartbeat()
                attempt = 0
            except Exception as exc:
                if not getattr(exc, "retriable", False):
                    self.fail(exc)
                    return
                log.debug("group %s: heartbeat failed: %s", self.group_id, exc)
                await asyncio.sleep(backoff_ms(attempt, self.config["retry.backoff.ms"],
                                               self.config["retry.backoff.max.ms"]) / 1000)
                attempt += 1
                self._wakeup.set()

    async def _heartbeat(self) -> None:
        conn = await self.coordinator.connection()
        version = conn.versions.require(ApiKey.CONSUMER_GROUP_HEARTBEAT,
                                        what="the consumer group protocol (KIP-848)")
        if not self.joined:
            self.epoch = 0
            if version >= 1 and not self.member_id:
                self.member_id = new_member_id()
        assert self.subscription is not None
        if self.subscription.is_pattern and version < 1:
            await self.cluster.refresh(all_topics=True)
        response = await self.coordinator.request(
            ApiKey.CONSUMER_GROUP_HEARTBEAT, self._request(self.epoch, version),
            version=version)
        code = response.error_code
        if code in COORDINATOR_ERRORS:
            self.coordinator.mark_unknown()
            raise BrokerError(code, response.error_message or "", "ConsumerGroupHeartbeat")
        if code in _LOST:
            self._lose(code, response.error_message or "heartbeat")
            return
        if code:
            raise BrokerError(code, _FATAL.get(ErrorCode(code), response.error_message or ""),
                              f"ConsumerGroupHeartbeat of group {self.group_id!r}")
        if response.member_id:
            self.member_id = response.member_id
        self.epoch = response.member_epoch
        self.joined = self.epoch > 0
        interval_ms = to_ms(response.heartbeat_interval)
        if interval_ms > 0:
            self.interval = interval_ms / 1000
        if response.assignment is not None:
            target = await self._names(response.assignment.topic_partitions)
            if target != self.target:
                self.target = target
                self.wake_poll()

    async def _names(self, entries: Any) -> set[TopicPartition]:
        """Partitions of an assignment by topic id, named from metadata (refreshed if an
        id is unknown; partitions of topics still unknown are left for a later answer)."""
        names = self.cluster.topic_names
        if any(e.topic_id not in names for e in entries):
            with contextlib.suppress(Exception):
                await self.cluster.refresh(all_topics=True)
            names = self.cluster.topic_names
        out = set()
        for e in entries:
            name = names.get(e.topic_id)
            if name is None:
                log.debug("group %s: assigned topic id %s is not in the metadata yet",
                          self.group_id, e.topic_id)
                continue
            self.cluster.add_topics([name])
            out.update(TopicPartition(name, p) for p in e.partitions)
        return out

    # --- leaving ----------------------------------------------------------------------------

    async def _leave(self) -> None:
        epoch = STATIC_LEAVE_EPOCH if self.instance_id is not None else LEAVE_EPOCH
        if self.member_id and self.joined and self.coordinator.known:
            try:
                conn = await self.coordinator.connection()
                version = conn.versions.require(ApiKey.CONSUMER_GROUP_HEARTBEAT)
                body = requests.consumer_group_heartbeat(
                    self.group_id, self.member_id, epoch, instance_id=self.instance_id)
                await self.coordinator.request(
                    ApiKey.CONSUMER_GROUP_HEARTBEAT, body, version=version,
                    timeout_ms=min(self.config["request.timeout.ms"], 5000))
            except Exception as exc:
                log.debug("group %s: leaving failed: %s", self.group_id, exc)
        self.epoch = 0
        self.joined = False
        self.target = None

    async def _stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait([task])

    async def unsubscribe(self) -> None:
        await self._stop()
        await self.revoke(set(self.owned), lost=self.lost or not self.joined)
        self.leaving = True
        await self._leave()
        self.leaving = False
        self._forget_subscription()

    async def close(self, consumer: Consumer) -> None:
        if self._closed:
            return
        await self._stop()
        if self.subscription is not None:
            await self.revoke(set(self.owned), lost=self.lost or not self.joined)
            self.leaving = True
            await self._leave()
        await super().close(consumer)
