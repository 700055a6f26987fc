"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup for classic groups (Kafka's rebalance
protocol, including KIP-394 member ids and KIP-345 static membership).

A rebalance: the first join of an empty group waits ``group.initial.rebalance.delay.ms``
(extended while new members keep arriving, up to the rebalance timeout); later rebalances wait
until every known member has rejoined or the rebalance timeout passes, then drop the members
that did not rejoin. The join answers go out together; the leader's SyncGroup assignment is
written to ``__consumer_offsets`` and then handed to every member. Members that stop
heartbeating for their session timeout are removed, which starts a new rebalance.

JoinGroup and SyncGroup answers are futures parked on the member until the group is ready; the
request's connection waits on them (the broker's connection parks async handlers).

This module validates the requests and updates the members; the rebalance itself (its phases,
timers, member removal and the group's record) is :class:`~.classic_rebalance.ClassicRebalance`.

Durability, as in Kafka's classic coordinator: a group is persisted only as GroupMetadata
snapshots, so the bookkeeping of a rebalance (members joining, leaving or timing out, the next
generation until its SyncGroup) lives in memory and a restart returns to the last written
generation. What is written is written first and applied then: the leader's assignment (the
group turns Stable once it is written), the empty generation of a group nobody rejoined (see
:meth:`.ClassicRebalance._enter_empty_generation`), a static member's new member id in a stable
group (:meth:`ClassicProtocol._rejoin_stable`), and the tombstone of an empty consumer group
whose id a JoinGroup takes.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ...protocol.errors import ErrorCode
from .classic import ClassicGroup, ClassicMember, ClassicState, JoinResult, SyncResult, complete
from .classic_rebalance import ClassicRebalance
from .errors import GroupError
from .records import GroupKey, GroupValue
from .wire import MAX_CLASSIC_STRING, fits_classic

if TYPE_CHECKING:
    from .coordinator import GroupCoordinator
    from .shard import GroupShard

log = logging.getLogger(__name__)

# Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a new member that never completes its join.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

S = ClassicState


@dataclass(slots=True)
class JoinRequest:
    """The fields of a JoinGroup request the coordinator uses (any version)."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    client_id: str
    client_host: str
    require_known_member_id: bool
    reason: str | None = None


def new_member_id(prefix: str) -> str:
    """Kafka's member id, ``<client id or instance id>-<random UUID>``, with the prefix cut
    so the id fits the 32,767 bytes of a classic string: JoinGroup v0-5 and the group's
    record carry it as one (a client id may itself be that long, and with Kafka's uncut id
    the response could not be encoded)."""
    suffix = f"-{uuid.uuid4()}"
    room = MAX_CLASSIC_STRING - len(suffix)
    if len(prefix) > room // 4 and not fits_classic(prefix + suffix):
        prefix = prefix.encode("utf-8")[:room].decode("utf-8", "ignore")
    return prefix + suffix


def _unstorable(req: JoinRequest) -> str | None:
    """What of a JoinGroup the group's record (classic strings) could not hold, if any;
    only flexible versions (v6+) can send such strings."""
    fields = [("group instance id", req.group_instance_id), ("protocol type", req.protocol_type)]
    fields += [("protocol name", name) for name, _ in req.protocols]
    for what, value in fields:
        if value is not None and len(value) > MAX_CLASSIC_STRING // 4 \
                and not fits_classic(value):
            return (f"the {what} is {len(value.encode())} bytes long; a group's record holds "
                    f"at most {MAX_CLASSIC_STRING}")
    return None


JoinAnswer = JoinResult | asyncio.Future[JoinResult]
SyncAnswer = SyncResult | asyncio.Future[SyncResult]


class ClassicProtocol:
    """The classic rebalance protocol over the groups of the coordinator's shards."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator
        self.timer = coordinator.timer
        self.config = coordinator.config
        self.rebalance = ClassicRebalance(coordinator)

    # --- helpers -----------------------------------------------------------------------
    def _now(self) -> int:
        return self.timer.now_ms()

    def _future(self) -> asyncio.Future[Any]:
        return asyncio.get_running_loop().create_future()

    @staticmethod
    def _validate_instance(group: ClassicGroup, member_id: str, instance_id: str | None) -> None:
        """KIP-345: a static instance id must belong to this member id."""
        if instance_id is None:
            return
        mapped = group.static_member_id(instance_id)
        if mapped is not None and mapped != member_id:
            raise GroupError(ErrorCode.fenced_instance_id,
                             f"instance {instance_id} is now member {mapped}")

    def _known_member(self, group: ClassicGroup, member_id: str,
                      instance_id: str | None) -> ClassicMember:
        self._validate_instance(group, member_id, instance_id)
        member = group.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.unknown_member_id,
                             f"member {member_id} is not in group {group.group_id}")
        return member

    def classic_group(self, shard: GroupShard, group_id: str) -> ClassicGroup | None:
        group = shard.groups.get(group_id)
        if group is None:
            return None
        if not isinstance(group, ClassicGroup):
            raise GroupError(ErrorCode.unknown_member_id,
                             f"group {group_id} uses the consumer protocol (KIP-848)")
        return group

    # --- JoinGroup -----------------------------------------------------------------------
    def join(self, shard: GroupShard, req: JoinRequest) -> JoinAnswer:
        """Handle a JoinGroup; returns the answer or a future of it."""
        if not req.group_id:
            return JoinResult(error=ErrorCode.invalid_group_id, member_id=req.member_id)
        if not (self.config.min_session_timeout_ms <= req.session_timeout_ms
                <= self.config.max_session_timeout_ms):
            return JoinResult(error=ErrorCode.invalid_session_timeout, member_id=req.member_id)
        unstorable = _unstorable(req)
        if unstorable is not None:
            log.info("JoinGroup of group %s refused with INVALID_REQUEST: %s", req.group_id,
                     unstorable)
            return JoinResult(error=ErrorCode.invalid_request, member_id=req.member_id)
        if self.coordinator.locks.busy(req.group_id):
            # A change of this group is being written: join the group it leaves behind.
            return self._join_after(self.coordinator.locks.idle(req.group_id), req)
        existing = shard.groups.get(req.group_id)
        if existing is not None and not isinstance(existing, ClassicGroup):
            if not existing.is_empty:
                return JoinResult(error=ErrorCode.inconsistent_group_protocol,
                                  member_id=req.member_id)
            # An empty consumer-protocol group converts to classic (as Kafka allows) once its
            # tombstone is written.
            return self._join_after(self.coordinator.consumer.delete_empty(shard, existing), req)
        if existing is None:
            if req.member_id:
                return JoinResult(error=ErrorCode.unknown_member_id, member_id=req.member_id)
            # In memory only until its first generation is written at SyncGroup (or its empty
            # one when nobody stays), like the member bookkeeping of every rebalance: Kafka's
            # classic coordinator persists a group only as GroupMetadata snapshots.
            existing = ClassicGroup(req.group_id, self._now())
            shard.groups[req.group_id] = existing
        group = existing
        try:
            if group.state == S.DEAD:
                raise GroupError(ErrorCode.coordinator_not_available)
            if not self._accepts(group, req.member_id):
                raise GroupError(ErrorCode.group_max_size_reached,
                                 f"group {group.group_id} has reached group.max.size "
                                 f"{self.config.max_size}")
            if not req.member_id:
                return self._join_unknown(group, req)
            return self._join_known(group, req)
        except GroupError as exc:
            self.coordinator.maybe_forget_group(shard, group)
            return JoinResult(error=exc.code, member_id=req.member_id)

    def _join_after(self, first: Awaitable[None], req: JoinRequest) -> asyncio.Task[JoinResult]:
        """Join once ``first`` (a write of this group) is done; its GroupError is the answer."""

        async def join_later() -> JoinResult:
            try:
                await first
                answer = self.join(self.coordinator.shard_of_group(req.group_id), req)
            except GroupError as exc:
                return JoinResult(error=exc.code, member_id=req.member_id)
            return await answer if isinstance(answer, asyncio.Future) else answer

        return self.coordinator.spawn(join_later())

    def _accepts(self, group: ClassicGroup, member_id: str) -> bool:
        """Kafka's acceptJoiningMember (group.max.size)."""
        limit = self.config.max_size
        member = group.members.get(member_id)
        if group.is_in(S.EMPTY, S.DEAD):
            return True
        if group.is_in(S.PREPARING_REBALANCE):
            awaiting = sum(1 for m in group.members.values() if m.awaiting_join)
            return (member is not None and member.awaiting_join) or awaiting < limit
        return member is not None or len(group.members) < limit

    def _join_unknown(self, group: ClassicGroup, req: JoinRequest) -> JoinAnswer:
        names = [name for name, _ in req.protocols]
        if not group.supports_protocols(req.protocol_type, names):
            raise GroupError(ErrorCode.inconsistent_group_protocol)
        new_id = new_member_id(req.group_instance_id or req.client_id)
        if req.group_instance_id is not None:
            old_id = group.static_member_id(req.group_instance_id)
            if old_id is not None:
                return self._replace_static_member(group, old_id, new_id, req)
            return self._add_member_and_rebalance(group, new_id, req)
        if req.require_known_member_id:
            # KIP-394: hand out the id first; the member joins again with it.
            group.pending_members.add(new_id)
            self.timer.schedule(("pending", group.group_id, new_id), req.session_timeout_ms,
                                lambda: self._expire_pending(group, new_id))
            return JoinResult(error=ErrorCode.member_id_required, member_id=new_id)
        return self._add_member_and_rebalance(group, new_id, req)

    def _join_known(self, group: ClassicGroup, req: JoinRequest) -> JoinAnswer:
        # Checked for every known member, pending ones (KIP-394) included, as Kafka's
        # classicGroupJoinExistingMember does: a member whose protocols no longer meet the
        # group's would leave the rebalance without a protocol every member supports.
        if not group.supports_protocols(req.protocol_type, [name for name, _ in req.protocols]):
            raise GroupError(ErrorCode.inconsistent_group_protocol,
                             f"member {req.member_id} supports none of the protocols of "
                             f"group {group.group_id}")
        if req.member_id in group.pending_members:
            return self._add_member_and_rebalance(group, req.member_id, req)
        member = self._known_member(group, req.member_id, req.group_instance_id)
        match group.state:
            case S.PREPARING_REBALANCE:
                return self._update_member_and_rebalance(group, member, req)
            case S.COMPLETING_REBALANCE:
                if member.matches(req.protocols):
                    # The member lost our answer; repeat it.
                    return group.join_result(member)
                return self._update_member_and_rebalance(group, member, req)
            case S.STABLE:
                if group.is_leader(member.member_id) or not member.matches(req.protocols):
                    return self._update_member_and_rebalance(group, member, req)
                return group.join_result(member)
        raise GroupError(ErrorCode.unknown_member_id)

    def _add_member_and_rebalance(self, group: ClassicGroup, member_id: str,
                                  req: JoinRequest) -> asyncio.Future[JoinResult]:
        group.pending_members.discard(member_id)
        self.timer.cancel(("pending", group.group_id, member_id))
        member = ClassicMember(
            member_id, req.group_instance_id, req.client_id, req.client_host,
            req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
            list(req.protocols), is_new=True,
        )
        future: asyncio.Future[JoinResult] = self._future()
        member.join_future = future
        group.add(member)
        if group.is_in(S.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        self.rebalance.schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self.rebalance.maybe_prepare_rebalance(group, f"adding new member {member_id}")
        self.rebalance.check_join_complete(group)
        return future

    def _update_member_and_rebalance(self, group: ClassicGroup, member: ClassicMember,
                                     req: JoinRequest) -> asyncio.Future[JoinResult]:
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.client_id, member.client_host = req.client_id, req.client_host
        # A second JoinGroup for the same member supersedes the first.
        complete(member.join_future, JoinResult(error=ErrorCode.rebalance_in_progress,
                                                member_id=member.member_id))
        future: asyncio.Future[JoinResult] = self._future()
        member.join_future = future
        self.rebalance.maybe_prepare_rebalance(
            group, f"updating metadata for member {member.member_id}")
        self.rebalance.check_join_complete(group)
        return future

    def _replace_static_member(self, group: ClassicGroup, old_id: str, new_id: str,
                               req: JoinRequest) -> JoinAnswer:
        old = group.members[old_id]
        if group.is_in(S.STABLE) and group.protocol_name == group.select_protocol(
                {old_id: req.protocols}):
            return self._rejoin_stable(group, old, new_id, req)
        # Otherwise the new member id joins a rebalance, whose bookkeeping stays in memory
        # until its generation is written (as in Kafka).
        self._fence_incarnation(group, old)
        member = group.replace_static_member(req.group_instance_id or "", old_id, new_id)
        self._update_static(member, req)
        future: asyncio.Future[JoinResult] = self._future()
        member.join_future = future
        self.rebalance.schedule_heartbeat(group, member, member.session_timeout_ms)
        match group.state:
            case S.STABLE:
                self.rebalance.maybe_prepare_rebalance(
                    group, f"static member {new_id} changed the selected protocol")
            case S.COMPLETING_REBALANCE:
                self.rebalance.prepare_rebalance(
                    group, f"static member {new_id} rejoined during sync")
            case _:
                self.rebalance.check_join_complete(group)
        return future

    def _fence_incarnation(self, group: ClassicGroup, old: ClassicMember) -> None:
        """Answer the parked requests of a static member's old incarnation and stop its
        session timer."""
        complete(old.join_future, JoinResult(error=ErrorCode.fenced_instance_id,
                                             member_id=old.member_id))
        complete(old.sync_future, SyncResult(error=ErrorCode.fenced_instance_id))
        old.join_future = old.sync_future = None
        self.timer.cancel(("heartbeat", group.group_id, old.member_id))

    @staticmethod
    def _update_static(member: ClassicMember, source: JoinRequest | ClassicMember) -> None:
        member.protocols = list(source.protocols)
        member.rebalance_timeout_ms = source.rebalance_timeout_ms
        member.session_timeout_ms = source.session_timeout_ms
        member.client_id, member.client_host = source.client_id, source.client_host

    def _rejoin_stable(self, group: ClassicGroup, old: ClassicMember, new_id: str,
                       req: JoinRequest) -> asyncio.Future[JoinResult]:
        """A static member's new incarnation joins a stable group without changing what the
        assignment depends on: the group record with its new member id is written, then
        applied, and it is answered with the old leader id so that it does not assign again.
        (Kafka applies the new id first and reverts it when the write fails; writing first
        keeps the old incarnation, session timer included, exactly as the log has it.) Joins
        of the group wait for the write (:mod:`.locks`)."""
        claimed = self.coordinator.locks.try_hold(group.group_id)
        assert claimed, "join() waits for the group's lock before it gets here"
        renewed = replace(old, member_id=new_id, join_future=None, sync_future=None)
        self._update_static(renewed, req)
        record = group.to_record()
        record = replace(record, members=tuple(
            renewed.to_record(group.protocol_name) if m.member_id == old.member_id else m
            for m in record.members))
        future: asyncio.Future[JoinResult] = self._future()
        self.coordinator.spawn(self._store_static_rejoin(group, old, renewed, record, future))
        return future

    async def _store_static_rejoin(self, group: ClassicGroup, old: ClassicMember,
                                   renewed: ClassicMember, record: GroupValue,
                                   future: asyncio.Future[JoinResult]) -> None:
        group_id = group.group_id
        try:
            try:
                shard = self.coordinator.shard_of_group(group_id)
                await self.coordinator.write(shard, [(GroupKey(group_id), record)])
            except GroupError as exc:
                log.warning("Group %s: static member %s (instance %s) was not written (%s: %s);"
                            " member %s stays", group_id, renewed.member_id,
                            renewed.group_instance_id, exc.code.name, exc, old.member_id)
                complete(future, JoinResult(error=exc.code, member_id=""))
                return
            if group.members.get(old.member_id) is not old:
                # The old incarnation left or timed out during the write: the group rebalances
                # without it (in memory until its next generation is written); the instance
                # joins again.
                complete(future, JoinResult(error=ErrorCode.unknown_member_id,
                                            member_id=renewed.member_id))
                return
            previous_leader = group.leader_id
            self._fence_incarnation(group, old)
            member = group.replace_static_member(renewed.group_instance_id or "",
                                                 old.member_id, renewed.member_id)
            self._update_static(member, renewed)
            complete(future, JoinResult(
                error=0, generation_id=group.generation_id, protocol_type=group.protocol_type,
                protocol_name=group.protocol_name, leader=previous_leader or "",
                member_id=member.member_id, members=[]))
            self.rebalance.schedule_heartbeat(group, member, member.session_timeout_ms)
        finally:
            self.coordinator.locks.release(group_id)

    # --- SyncGroup -------------------------------------------------------------------------
    def sync(self, shard: GroupShard, group_id: str, generation_id: int, member_id: str,
             instance_id: str | None, protocol_type: str | None, protocol_name: str | None,
             assignments: Mapping[str, bytes]) -> SyncAnswer:
        try:
            group = self.classic_group(shard, group_id)
            if group is None:
                raise GroupError(ErrorCode.unknown_member_id)
            if group.is_in(S.DEAD):
                raise GroupError(ErrorCode.coordinator_not_available)
            member = self._known_member(group, member_id, instance_id)
            if generation_id != group.generation_id:
                raise GroupError(ErrorCode.illegal_generation)
            if protocol_type is not None and protocol_type != group.protocol_type:
                raise GroupError(ErrorCode.inconsistent_group_protocol)
            if protocol_name is not None and protocol_name != group.protocol_name:
                raise GroupError(ErrorCode.inconsistent_group_protocol)
        except GroupError as exc:
            return SyncResult(error=exc.code)
        match group.state:
            case S.EMPTY:
                return SyncResult(error=ErrorCode.unknown_member_id)
            case S.PREPARING_REBALANCE:
                return SyncResult(error=ErrorCode.rebalance_in_progress)
            case S.STABLE:
                self._synced(group, member_id)
                self.rebalance.schedule_heartbeat(group, member, member.session_timeout_ms)
                return SyncResult(protocol_type=group.protocol_type,
                                  protocol_name=group.protocol_name,
                                  assignment=member.assignment)
        # CompletingRebalance: park until the leader's assignment is stored.
        future: asyncio.Future[SyncResult] = self._future()
        complete(member.sync_future, SyncResult(error=ErrorCode.rebalance_in_progress))
        member.sync_future = future
        self._synced(group, member_id)
        if group.is_leader(member_id):
            full = {m: assignments.get(m, b"") for m in group.members}
            self.coordinator.spawn(self.rebalance.store_assignment(group, generation_id, full))
        return future

    def _synced(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self.timer.cancel(("sync", group.group_id))

    # --- Heartbeat -------------------------------------------------------------------------
    def heartbeat(self, shard: GroupShard, group_id: str, generation_id: int, member_id: str,
                  instance_id: str | None) -> int:
        try:
            group = self.classic_group(shard, group_id)
            if group is None:
                raise GroupError(ErrorCode.unknown_member_id)
            if group.is_in(S.DEAD):
                raise GroupError(ErrorCode.coordinator_not_available)
            if group.is_in(S.EMPTY):
                raise GroupError(ErrorCode.unknown_member_id)
            member = self._known_member(group, member_id, instance_id)
            if generation_id != group.generation_id:
                raise GroupError(ErrorCode.illegal_generation)
        except GroupError as exc:
            return exc.code
        self.rebalance.schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.is_in(S.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def _expire_pending(self, group: ClassicGroup, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self.rebalance.check_join_complete(group)

    # --- LeaveGroup and removal ------------------------------------------------------------
    def leave(self, shard: GroupShard, group_id: str,
              members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        """Remove members; returns (group-level error, per-member errors)."""
        group = self.classic_group(shard, group_id)
        if group is None:
            return 0, [ErrorCode.unknown_member_id] * len(members)
        if group.is_in(S.DEAD):
            return ErrorCode.coordinator_not_available, []
        errors: list[int] = []
        for member_id, instance_id in members:
            try:
                if instance_id is not None and not member_id:
                    mapped = group.static_member_id(instance_id)
                    if mapped is None:
                        raise GroupError(ErrorCode.unknown_member_id)
                    member_id = mapped
                if member_id in group.pending_members:
                    group.pending_members.discard(member_id)
                    self.timer.cancel(("pending", group.group_id, member_id))
                    self.rebalance.check_join_complete(group)
                    errors.append(ErrorCode.none)
                    continue
                member = self._known_member(group, member_id, instance_id)
            except GroupError as exc:
                errors.append(exc.code)
                continue
            # Rebalance bookkeeping, in memory only as in Kafka (see the module docstring).
            log.info("Member %s has left group %s through explicit LeaveGroup", member_id,
                     group_id)
            self.rebalance.remove_member(group, member, "member left")
            errors.append(ErrorCode.none)
        return 0, errors

    # --- lifecycle -------------------------------------------------------------------------
    def start_loaded(self, group: ClassicGroup) -> None:
        """Arm the session timers of a group just loaded from the log."""
        self.rebalance.start_loaded(group)

    def shutdown_group(self, group: ClassicGroup, error: int) -> None:
        """Answer every parked request with ``error`` and stop the group's timers."""
        self.rebalance.shutdown_group(group, error)
