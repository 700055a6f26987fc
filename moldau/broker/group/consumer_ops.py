"""ConsumerGroupHeartbeat and ConsumerGroupDescribe: the KIP-848 consumer protocol.

One heartbeat does everything: join (member epoch 0), leave (-1, or -2 for a static member
that will come back), report owned partitions, change the subscription. The coordinator bumps
the group epoch when something that affects the assignment changed (a member joined, left or
changed its subscription; a subscribed topic appeared or grew), recomputes the target
assignment with the server assignor, and moves the member one step towards it
(:func:`.consumer_group.reconcile`). Members are fenced when they stop heartbeating for
``group.consumer.session.timeout.ms``, or stay in revocation longer than their rebalance
timeout.

Durability, in Kafka's order: each heartbeat, leave and fence is planned on a copy of the group
(the records to write and the answer), the records are written to ``__consumer_offsets``
(Kafka's ConsumerGroupMetadata, ConsumerGroupMemberMetadata and
ConsumerGroupCurrentMemberAssignment records), then replayed into the group, then the member is
answered. A failed write leaves the group as it was and the client gets Kafka's error for the
append (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, UNKNOWN_SERVER_ERROR). The changes of one
group are planned, written and applied one at a time (:mod:`.locks`), as Kafka runs the events
of a partition one after the other. After a coordinator restart members carry on with their
partitions; the target assignment is recomputed at load (see
:meth:`.consumer_group.ConsumerGroup.replay`). While a fenced member's removal is written its
heartbeats get UNKNOWN_MEMBER_ID, as in Kafka where the removal is already applied,
uncommitted; a failed write leaves the member in place and is retried after
:data:`FENCE_RETRY_MS`, as Kafka's coordinator timers retry a failed write.
"""

from __future__ import annotations

import base64
import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ...protocol.errors import ErrorCode
from ..metadata.image import MetadataImage
from ..metadata.validation import INTERNAL_TOPICS
from .assignors import ASSIGNORS
from .classic import ClassicGroup
from .consumer_group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    is_subset,
    member_records,
    reconcile,
)
from .errors import GroupError
from .records import ConsumerGroupKey, GroupKey, Value, WritableKey
from .wire import MAX_CLASSIC_STRING, fits_classic

Records = list[tuple[WritableKey, Value | None]]

if TYPE_CHECKING:
    from .coordinator import GroupCoordinator
    from .shard import GroupShard

log = logging.getLogger(__name__)

FENCE_RETRY_MS = 500
"""Back-off before a fence whose write failed is tried again (Kafka's timer retry back-off)."""


@dataclass(slots=True)
class HeartbeatRequest:
    """The fields of a ConsumerGroupHeartbeat request (v0-1); None = unchanged."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(slots=True)
class HeartbeatResult:
    """The answer to a ConsumerGroupHeartbeat, sent once its change is written."""

    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: Assignment | None = None


@dataclass(slots=True)
class GroupChange:
    """A change of one consumer group, planned on a copy (``group``) while the group itself
    keeps its state: the records that say it, the answer to give once they are written, and
    what to do with the applied group then (timers). Kafka's CoordinatorResult."""

    group: ConsumerGroup
    records: Records = field(default_factory=list)
    result: HeartbeatResult | None = None
    after: list[Callable[[ConsumerGroup], None]] = field(default_factory=list)


def new_member_id() -> str:
    """A member id as Kafka's ``Uuid.randomUuid().toString()`` prints one (base64url)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def validate_heartbeat(req: HeartbeatRequest, version: int, assignors: tuple[str, ...]) -> None:
    """Kafka's request checks; raises GroupError with INVALID_REQUEST and a reason."""

    def invalid(message: str) -> GroupError:
        return GroupError(ErrorCode.invalid_request, message)

    if not req.group_id:
        raise invalid("GroupId can't be empty.")
    # The member id is part of the member's record keys and, like the instance id, shown by
    # DescribeGroups v0-4: both must fit a classic string (only a flexible request can
    # carry longer ones; Kafka's write of the member's record would fail).
    for what, value in (("MemberId", req.member_id), ("InstanceId", req.instance_id)):
        if value is not None and len(value) > MAX_CLASSIC_STRING // 4 \
                and not fits_classic(value):
            raise invalid(f"{what} is {len(value.encode())} bytes long; at most "
                          f"{MAX_CLASSIC_STRING} can be stored.")
    if req.instance_id is not None and not req.instance_id:
        raise invalid("InstanceId can't be empty.")
    if req.rack_id is not None and not req.rack_id:
        raise invalid("RackId can't be empty.")
    if req.member_epoch == 0:
        if version >= 1 and not req.member_id:
            raise invalid("MemberId can't be empty.")
        if req.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if req.owned is None or any(req.owned.values()):
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first "
                          "request.")
    elif req.member_epoch > 0 or req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
        if not req.member_id:
            raise invalid("MemberId can't be empty.")
        if req.member_epoch == STATIC_LEAVE_EPOCH and req.instance_id is None:
            raise invalid("InstanceId can't be null when leaving with epoch -2.")
    else:
        raise invalid(f"MemberEpoch {req.member_epoch} is invalid.")
    if req.server_assignor is not None and req.server_assignor not in assignors:
        raise GroupError(ErrorCode.unsupported_assignor,
                         f"ServerAssignor {req.server_assignor} is not supported. Supported "
                         f"assignors: {', '.join(assignors)}.")
    if req.subscribed_topic_regex is not None:
        if version < 1:
            raise invalid("SubscribedTopicRegex needs ConsumerGroupHeartbeat v1.")
        try:
            re.compile(req.subscribed_topic_regex)
        except re.error as exc:
            raise GroupError(ErrorCode.invalid_regular_expression,
                             f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a "
                             f"valid regular expression: {exc}.") from exc


class ConsumerProtocol:
    """KIP-848 consumer groups over the coordinator's shards."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator
        self.config = coordinator.config
        self.timer = coordinator.timer
        # (group id, member id) of members whose removal is being written.
        self.fencing: set[tuple[str, str]] = set()

    # --- metadata ------------------------------------------------------------------------
    def topic_names(self) -> dict[uuid.UUID, str]:
        return {t.topic_id: name for name, t in self.coordinator.image().topics_by_name.items()}

    def _refresh_regex(self, group: ConsumerGroup, image: MetadataImage) -> None:
        regexes = group.regexes()
        if group.regex_version == image.offset and regexes <= set(group.resolved_regex):
            return
        names = [n for n in image.topics_by_name if n not in INTERNAL_TOPICS]
        resolved = {}
        for regex in regexes:
            pattern = re.compile(regex)
            resolved[regex] = {n for n in names if pattern.fullmatch(n)}
        group.resolved_regex = resolved
        group.regex_version = image.offset

    @staticmethod
    def _fingerprint(group: ConsumerGroup,
                     image: MetadataImage) -> tuple[tuple[str, uuid.UUID, int], ...]:
        result = []
        for name in sorted(group.subscribed_topic_names()):
            topic = image.topics_by_name.get(name)
            if topic is not None:
                result.append((name, topic.topic_id, len(topic.partitions)))
        return tuple(result)

    def _compute_target(self, group: ConsumerGroup, image: MetadataImage) -> None:
        subscriptions: dict[str, set[uuid.UUID]] = {}
        counts: dict[uuid.UUID, int] = {}
        for member in group.members.values():
            ids = set()
            for name in group.member_topic_names(member):
                topic = image.topics_by_name.get(name)
                if topic is not None:
                    ids.add(topic.topic_id)
                    counts[topic.topic_id] = len(topic.partitions)
            subscriptions[member.member_id] = ids
        assignor = group.preferred_assignor(self.config.consumer_assignors[0])
        group.target = ASSIGNORS[assignor](subscriptions, counts, group.target)
        group.assignment_epoch = group.group_epoch

    # --- groups --------------------------------------------------------------------------
    def _staged(self, shard: GroupShard, group_id: str,
                create: bool) -> tuple[ConsumerGroup, ClassicGroup | None]:
        """A copy of the group to plan a change on (a new group when joining one that does not
        exist), and the empty classic group it replaces, if any."""
        group = shard.groups.get(group_id)
        if isinstance(group, ClassicGroup):
            if not create or not self.coordinator.is_idle(group):
                raise GroupError(ErrorCode.group_id_not_found,
                                 f"Group {group_id} is not a consumer group.")
            # An empty classic group (e.g. only committed offsets) becomes a consumer group.
            return ConsumerGroup(group_id, self.timer.now_ms()), group
        if group is None:
            if not create:
                # Kafka answers GROUP_ID_NOT_FOUND, which librdkafka treats as fatal; a lost
                # member should rejoin instead, so this says the member is unknown.
                raise GroupError(ErrorCode.unknown_member_id,
                                 f"group {group_id} has no such member")
            return ConsumerGroup(group_id, self.timer.now_ms()), None
        return group.copy(), None

    async def delete_empty(self, shard: GroupShard, group: ConsumerGroup) -> None:
        """Write the tombstone of an empty consumer group, then forget it: a classic JoinGroup
        takes over its id (Kafka's maybeDeleteEmptyConsumerGroup). Raises GroupError if the
        write fails; does nothing if the group changed meanwhile."""
        group_id = group.group_id
        async with self.coordinator.locks.hold(group_id):
            if shard.groups.get(group_id) is not group or not group.is_empty:
                return
            await self.coordinator.write(shard, [(ConsumerGroupKey(group_id), None)])
            self.coordinator.remove_group(shard, group)

    # --- changes -------------------------------------------------------------------------
    async def _write_and_apply(self, shard: GroupShard, change: GroupChange) -> None:
        """Write a planned change, then apply it: Kafka's CoordinatorRuntime order (records,
        replay, answer). The caller holds the group's lock. A failed write raises GroupError
        and leaves the group as it was."""
        if change.records:
            await self.coordinator.write(shard, change.records)
        group_id = change.group.group_id
        live = shard.groups.get(group_id)
        if not isinstance(live, ConsumerGroup):
            if isinstance(live, ClassicGroup):
                self.coordinator.classic.shutdown_group(live, ErrorCode.not_coordinator)
            live = ConsumerGroup(group_id, change.group.state_timestamp)
            shard.groups[group_id] = live
        live.replay_written(change.records, change.group)
        for step in change.after:
            step(live)

    # --- heartbeat -----------------------------------------------------------------------
    async def heartbeat(self, shard: GroupShard, req: HeartbeatRequest,
                        version: int) -> HeartbeatResult:
        """Handle a ConsumerGroupHeartbeat: plan the change on a copy of the group, write its
        records, apply them, answer. Raises GroupError for error answers, including a failed
        write (the group is then unchanged)."""
        if "consumer" not in self.config.rebalance_protocols:
            raise GroupError(ErrorCode.unsupported_version,
                             "the consumer group protocol is disabled "
                             "(group.coordinator.rebalance.protocols)")
        if req.member_epoch == 0 and not req.member_id:
            req.member_id = new_member_id()
        validate_heartbeat(req, version, self.config.consumer_assignors)
        return await self.coordinator.run(self._heartbeat(shard, req))

    async def _heartbeat(self, shard: GroupShard, req: HeartbeatRequest) -> HeartbeatResult:
        async with self.coordinator.locks.hold(req.group_id):
            self.coordinator.check_loaded(shard)
            if (req.group_id, req.member_id) in self.fencing:
                raise GroupError(ErrorCode.unknown_member_id,
                                 f"member {req.member_id} is being removed from group "
                                 f"{req.group_id}; join again")
            if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                change = self._plan_leave(shard, req)
            else:
                change = self._plan_heartbeat(shard, req)
            await self._write_and_apply(shard, change)
        assert change.result is not None
        return change.result

    def _plan_heartbeat(self, shard: GroupShard, req: HeartbeatRequest) -> GroupChange:
        group, replaced = self._staged(shard, req.group_id, create=req.member_epoch == 0)
        change = GroupChange(group)
        if replaced is not None:
            # Kafka deletes the classic group's record when a consumer group takes its id.
            change.records.append((GroupKey(req.group_id), None))
        image = self.coordinator.image()
        now = self.timer.now_ms()
        if req.member_epoch == 0:
            member = self._joining_member(change, req)
            previous = None
        else:
            found = group.members.get(req.member_id)
            if found is None:
                raise GroupError(ErrorCode.unknown_member_id,
                                 f"member {req.member_id} is not in group {req.group_id}")
            self._check_epoch(found, req)
            member = previous = found
        updated = self._with_request(member, req)
        bump = previous is None or (
            set(updated.subscribed_topic_names) != set(previous.subscribed_topic_names)
            or updated.subscribed_topic_regex != previous.subscribed_topic_regex
            or updated.server_assignor != previous.server_assignor)
        group.put_member(updated)
        self._refresh_regex(group, image)
        fingerprint = self._fingerprint(group, image)
        if bump or fingerprint != group.subscription_fingerprint:
            group.subscription_fingerprint = fingerprint
            group.bump_epoch(now)
            group.epoch_dirty = True
        if group.epoch_dirty:
            change.records.append(group.epoch_record())
        if group.group_epoch > group.assignment_epoch:
            self._compute_target(group, image)
        target = group.target.get(updated.member_id, {})
        reconciled = reconcile(updated, group.assignment_epoch, target, req.owned,
                               group.partition_epoch)
        if reconciled is not updated:
            group.put_member(reconciled)
        change.records += member_records(group.group_id, previous, reconciled)
        member_id = reconciled.member_id
        change.after.append(lambda live: self._arm_timers(shard, live, live.members[member_id]))
        full = req.member_epoch == 0 or (
            req.rebalance_timeout_ms != -1 and req.owned is not None
            and (req.subscribed_topic_names is not None
                 or req.subscribed_topic_regex is not None))
        send = full or previous is None or previous.assigned != reconciled.assigned
        change.result = HeartbeatResult(reconciled.member_id, reconciled.member_epoch,
                                        self.config.consumer_heartbeat_interval_ms,
                                        reconciled.assigned if send else None)
        return change

    def _joining_member(self, change: GroupChange, req: HeartbeatRequest) -> ConsumerMember:
        group = change.group
        if req.instance_id is not None:
            existing_id = group.static_members.get(req.instance_id)
            if existing_id is not None:
                existing = group.members[existing_id]
                if existing_id != req.member_id and existing.member_epoch != STATIC_LEAVE_EPOCH:
                    raise GroupError(ErrorCode.unreleased_instance_id,
                                     f"Static member {existing_id} with instance id "
                                     f"{req.instance_id} is still in the group")
                # The instance is back: it takes over the old member's partitions.
                self._forget_member(change, existing_id)
                if existing_id != req.member_id:
                    change.records += member_records(group.group_id, existing, None)
                return replace(existing, member_id=req.member_id, member_epoch=0,
                               state=MemberState.STABLE, pending_revocation={})
        if req.member_id in group.members:
            # The member lost its state (e.g. fenced and rejoining): start it afresh.
            self._forget_member(change, req.member_id)
        if len(group.members) >= self.config.consumer_max_size:
            raise GroupError(ErrorCode.group_max_size_reached,
                             f"The consumer group has reached its maximum capacity of "
                             f"{self.config.consumer_max_size} members.")
        return ConsumerMember(req.member_id)

    def _forget_member(self, change: GroupChange, member_id: str) -> ConsumerMember | None:
        """Take a member out of the planned group; its timers stop once the change is
        applied."""
        change.after.append(lambda live: self._cancel_timers(live, member_id))
        return change.group.remove_member(member_id)

    @staticmethod
    def _check_epoch(member: ConsumerMember, req: HeartbeatRequest) -> None:
        epoch = req.member_epoch
        if epoch > member.member_epoch:
            raise GroupError(ErrorCode.fenced_member_epoch,
                             f"The consumer group member has a greater member epoch ({epoch}) "
                             f"than the one known by the group coordinator "
                             f"({member.member_epoch}).")
        if epoch < member.member_epoch and (
                epoch != member.previous_member_epoch or req.owned is None
                or not is_subset(req.owned, member.assigned)):
            raise GroupError(ErrorCode.fenced_member_epoch,
                             f"The consumer group member has a smaller member epoch ({epoch}) "
                             f"than the one known by the group coordinator "
                             f"({member.member_epoch}).")

    @staticmethod
    def _with_request(member: ConsumerMember, req: HeartbeatRequest) -> ConsumerMember:
        changes: dict[str, Any] = {"client_id": req.client_id or member.client_id,
                                   "client_host": req.client_host or member.client_host}
        if req.instance_id is not None:
            changes["instance_id"] = req.instance_id
        if req.rack_id is not None:
            changes["rack_id"] = req.rack_id
        if req.rebalance_timeout_ms != -1:
            changes["rebalance_timeout_ms"] = req.rebalance_timeout_ms
        if req.subscribed_topic_names is not None:
            changes["subscribed_topic_names"] = sorted(set(req.subscribed_topic_names))
        if req.subscribed_topic_regex is not None:
            changes["subscribed_topic_regex"] = req.subscribed_topic_regex or None
        if req.server_assignor is not None:
            changes["server_assignor"] = req.server_assignor
        return replace(member, **changes)

    def _plan_leave(self, shard: GroupShard, req: HeartbeatRequest) -> GroupChange:
        live = shard.groups.get(req.group_id)
        if not isinstance(live, ConsumerGroup):
            raise GroupError(ErrorCode.group_id_not_found,
                             f"Group {req.group_id} not found.")
        change = GroupChange(live.copy())
        group = change.group
        member = group.members.get(req.member_id)
        if member is None and req.instance_id is not None:
            static_id = group.static_members.get(req.instance_id)
            member = group.members.get(static_id or "")
        if member is None:
            raise GroupError(ErrorCode.unknown_member_id,
                             f"member {req.member_id} is not in group {req.group_id}")
        member_id = member.member_id
        if req.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # A static member leaving for a while keeps its partitions until its session
            # times out or the same instance joins again.
            left = replace(member, member_epoch=STATIC_LEAVE_EPOCH)
            group.put_member(left)
            change.after.append(
                lambda live: self.timer.cancel(("cg-rebalance", live.group_id, member_id)))
            log.info("[GroupId %s] Static member %s left the group temporarily",
                     group.group_id, member_id)
            change.records = member_records(group.group_id, member, left)
        else:
            log.info("[GroupId %s] Member %s left the consumer group", group.group_id,
                     member_id)
            self._remove(change, member_id)
        change.result = HeartbeatResult(req.member_id, req.member_epoch, 0, None)
        return change

    def _remove(self, change: GroupChange, member_id: str) -> None:
        """Plan a member's removal: its tombstones and the group's next epoch."""
        group = change.group
        member = self._forget_member(change, member_id)
        if member is None:
            return
        group.bump_epoch(self.timer.now_ms())
        change.records += [*member_records(group.group_id, member, None), group.epoch_record()]

    # --- timers --------------------------------------------------------------------------
    def _arm_timers(self, shard: GroupShard, group: ConsumerGroup,
                    member: ConsumerMember) -> None:
        member_id = member.member_id
        self.timer.schedule(("cg-session", group.group_id, member_id),
                            self.config.consumer_session_timeout_ms,
                            lambda: self._fence(shard, group, member_id, "session timeout"))
        rebalance_key = ("cg-rebalance", group.group_id, member_id)
        if member.state == MemberState.UNREVOKED_PARTITIONS:
            if not self.timer.is_scheduled(rebalance_key):
                epoch = member.member_epoch
                self.timer.schedule(rebalance_key, member.rebalance_timeout_ms,
                                    lambda: self._revocation_expired(shard, group, member_id,
                                                                     epoch))
        else:
            self.timer.cancel(rebalance_key)

    def _cancel_timers(self, group: ConsumerGroup, member_id: str) -> None:
        self.timer.cancel(("cg-session", group.group_id, member_id))
        self.timer.cancel(("cg-rebalance", group.group_id, member_id))

    def _fence(self, shard: GroupShard, group: ConsumerGroup, member_id: str, reason: str,
               still: Callable[[ConsumerMember], bool] | None = None) -> None:
        key = (group.group_id, member_id)
        if (shard.groups.get(group.group_id) is not group or member_id not in group.members
                or key in self.fencing):
            return
        log.info("[GroupId %s] Member %s fenced from the group because of %s",
                 group.group_id, member_id, reason)
        self.fencing.add(key)
        self.coordinator.spawn(self._write_fence(shard, group, member_id, reason, still))

    async def _write_fence(self, shard: GroupShard, group: ConsumerGroup, member_id: str,
                           reason: str, still: Callable[[ConsumerMember], bool] | None) -> None:
        """Write a fenced member's removal (its tombstones and the next group epoch), then
        apply it; on failure the group is unchanged and the fence is retried. ``still`` says
        whether the reason to fence holds once the group's lock is held."""
        try:
            async with self.coordinator.locks.hold(group.group_id):
                member = group.members.get(member_id)
                if (shard.groups.get(group.group_id) is not group or member is None
                        or (still is not None and not still(member))):
                    return  # replaced meanwhile (a static member's instance came back)
                change = GroupChange(group.copy())
                self._remove(change, member_id)
                try:
                    await self._write_and_apply(shard, change)
                except GroupError as exc:
                    self._fence_failed(shard, group, member_id, reason, still, exc)
        finally:
            self.fencing.discard((group.group_id, member_id))

    def _fence_failed(self, shard: GroupShard, group: ConsumerGroup, member_id: str,
                      reason: str, still: Callable[[ConsumerMember], bool] | None,
                      exc: GroupError) -> None:
        if not self.coordinator.serves(group):
            # The shard moved: the next coordinator loads the group from the log.
            log.info("[GroupId %s] Fencing member %s abandoned: %s", group.group_id,
                     member_id, exc)
            return
        log.warning("[GroupId %s] Could not write the removal of member %s (%s: %s); "
                    "retrying in %d ms", group.group_id, member_id, exc.code.name, exc,
                    FENCE_RETRY_MS)
        self.timer.schedule(("cg-session", group.group_id, member_id), FENCE_RETRY_MS,
                            lambda: self._fence(shard, group, member_id, reason, still))

    def _revocation_expired(self, shard: GroupShard, group: ConsumerGroup, member_id: str,
                            epoch: int) -> None:
        def still(member: ConsumerMember) -> bool:
            return member.state == MemberState.UNREVOKED_PARTITIONS and \
                member.member_epoch == epoch

        member = group.members.get(member_id)
        if member is not None and still(member):
            self._fence(shard, group, member_id, "rebalance timeout (partitions not revoked)",
                        still)

    # --- lifecycle -----------------------------------------------------------------------
    def start_loaded(self, shard: GroupShard, group: ConsumerGroup) -> None:
        """Arm the session timers of the members of a group just loaded from the log."""
        for member in group.members.values():
            self._arm_timers(shard, group, member)

    def shutdown_group(self, group: ConsumerGroup) -> None:
        for member_id in list(group.members):
            self._cancel_timers(group, member_id)

    # --- describe ------------------------------------------------------------------------
    def describe(self, shard: GroupShard, group_id: str) -> dict[str, Any]:
        """One ConsumerGroupDescribe entry (raises GroupError for unknown groups)."""
        group = shard.groups.get(group_id)
        if not isinstance(group, ConsumerGroup):
            raise GroupError(ErrorCode.group_id_not_found,
                             f"Group {group_id} not found." if group is None
                             else f"Group {group_id} is not a consumer group.")
        names = self.topic_names()

        def partitions(assignment: Assignment) -> dict[str, Any]:
            return {"topic_partitions": [
                {"topic_id": t, "topic_name": names.get(t, ""), "partitions": sorted(p)}
                for t, p in sorted(assignment.items(), key=lambda i: names.get(i[0], ""))
                if p]}

        members = []
        for m in group.members.values():
            members.append({
                "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                "member_epoch": m.member_epoch, "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "subscribed_topic_regex": m.subscribed_topic_regex,
                "assignment": partitions(m.assigned),
                "target_assignment": partitions(group.target.get(m.member_id, {})),
                "member_type": 1,
            })
        return {"error_code": ErrorCode.none, "group_id": group_id,
                "group_state": group.state_name(), "group_epoch": group.group_epoch,
                "assignment_epoch": group.assignment_epoch,
                "assignor_name": group.preferred_assignor(self.config.consumer_assignors[0]),
                "members": members}
