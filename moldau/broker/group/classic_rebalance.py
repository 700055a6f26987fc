"""The rebalance engine of classic groups: the phases a rebalance goes through, the timers
that drive it (initial delay, rebalance timeout, sync timeout, member sessions), removing
members, and writing a group's record (Kafka's GroupCoordinator rebalance half:
prepareRebalance, onCompleteJoin, removeMemberAndUpdateGroup, storeGroup).

The requests themselves (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) are in
:mod:`.classic_protocol`, which validates them and hands the group to this engine.

A rebalance that nobody rejoined leaves the group empty: that generation is entered only once
its record is written (see :meth:`ClassicRebalance._enter_empty_generation`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from .classic import ClassicGroup, ClassicMember, ClassicState, JoinResult, SyncResult, complete
from .errors import GroupError
from .records import GroupKey

if TYPE_CHECKING:
    from .coordinator import GroupCoordinator

log = logging.getLogger(__name__)

EMPTY_RETRY_MS = 500
"""Back-off before writing an emptied group's generation again after a failed write."""

S = ClassicState


class ClassicRebalance:
    """Rebalance phases, timers and member removal of the coordinator's classic groups."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator
        self.timer = coordinator.timer
        self.config = coordinator.config
        # Ids of groups whose empty generation is being written.
        self.emptying: set[str] = set()

    def _now(self) -> int:
        return self.timer.now_ms()

    # --- rebalance phases ------------------------------------------------------------------
    def maybe_prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        """Start a rebalance unless the group is already in one (or dead)."""
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        """Kafka's prepareRebalance: enter PreparingRebalance and arm the join timer."""
        if group.is_in(S.COMPLETING_REBALANCE):
            self._reset_and_propagate_error(group, ErrorCode.rebalance_in_progress)
        join_key = ("join", group.group_id)
        if group.is_in(S.EMPTY):
            delay = self.config.initial_rebalance_delay_ms
            group.initial_delay_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            group.new_member_added = False
            self.timer.schedule(join_key, delay, lambda: self._initial_delay_expired(group))
            initial = True
        else:
            self.timer.schedule(join_key, group.rebalance_timeout_ms(),
                                lambda: self._complete_join(group))
            initial = False
        log.info("Preparing to rebalance group %s in state %s with old generation %d "
                 "(reason: %s)", group.group_id, group.state.value, group.generation_id, reason)
        group.transition(S.PREPARING_REBALANCE, self._now())
        group.initial_delay_active = initial
        if not initial:
            self.check_join_complete(group)

    def _initial_delay_expired(self, group: ClassicGroup) -> None:
        if not group.is_in(S.PREPARING_REBALANCE):
            return
        remaining = group.initial_delay_remaining_ms
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, remaining)
            group.initial_delay_remaining_ms = max(
                remaining - self.config.initial_rebalance_delay_ms, 0)
            self.timer.schedule(("join", group.group_id), delay,
                                lambda: self._initial_delay_expired(group))
            return
        self._complete_join(group)

    def check_join_complete(self, group: ClassicGroup) -> None:
        """Complete the join phase once every member rejoined (outside the initial delay)."""
        if (group.is_in(S.PREPARING_REBALANCE)
                and not group.initial_delay_active
                and group.all_members_joined()):
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        """Kafka's onCompleteJoin: start the next generation with whoever rejoined."""
        if not group.is_in(S.PREPARING_REBALANCE):
            return
        group.initial_delay_active = False
        self.timer.cancel(("join", group.group_id))
        for member in group.not_yet_rejoined():
            log.info("Group %s removes member %s which did not rejoin in time",
                     group.group_id, member.member_id)
            self._drop_member(group, member, ErrorCode.unknown_member_id)
        if group.is_empty:
            if group.group_id not in self.emptying:
                self.emptying.add(group.group_id)
                self.coordinator.spawn(self._enter_empty_generation(group))
            return
        group.generation_id += 1
        now = self._now()
        group.protocol_name = group.select_protocol()
        group.transition(S.COMPLETING_REBALANCE, now)
        log.info("Stabilized group %s generation %d with %d members (protocol %s)",
                 group.group_id, group.generation_id, len(group.members), group.protocol_name)
        for member in list(group.members.values()):
            complete(member.join_future, group.join_result(member))
            member.join_future = None
            member.is_new = False
            self.schedule_heartbeat(group, member, member.session_timeout_ms)
        group.pending_sync = set(group.members)
        generation = group.generation_id
        self.timer.schedule(("sync", group.group_id), group.rebalance_timeout_ms(),
                            lambda: self._sync_expired(group, generation))

    def _sync_expired(self, group: ClassicGroup, generation: int) -> None:
        """Members that never sent SyncGroup within the rebalance timeout are removed."""
        if generation != group.generation_id or not group.is_in(S.COMPLETING_REBALANCE,
                                                                  S.STABLE):
            return
        missing = [group.members[m] for m in group.pending_sync if m in group.members]
        if not missing:
            return
        for member in missing:
            log.info("Group %s removes member %s which did not sync in time",
                     group.group_id, member.member_id)
            self._drop_member(group, member, ErrorCode.unknown_member_id)
        self.maybe_prepare_rebalance(group, "members did not sync in time")

    def _reset_and_propagate_error(self, group: ClassicGroup, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
            complete(member.sync_future, SyncResult(error=error))
            member.sync_future = None
        group.pending_sync.clear()
        self.timer.cancel(("sync", group.group_id))

    def _set_and_propagate_assignment(self, group: ClassicGroup,
                                      assignments: Mapping[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, b"")
            if member.sync_future is not None:
                complete(member.sync_future, SyncResult(
                    protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                    assignment=member.assignment))
                member.sync_future = None
                self.schedule_heartbeat(group, member, member.session_timeout_ms)

    # --- persistence -----------------------------------------------------------------------
    async def store_group(self, group: ClassicGroup,
                          assignments: Mapping[str, bytes] | None = None) -> None:
        """Write the group's GroupMetadata record (with ``assignments`` if given)."""
        value = group.to_record()
        if assignments is not None:
            members = tuple(
                m.__class__(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                            m.rebalance_timeout, m.session_timeout, m.subscription,
                            assignments.get(m.member_id, b""))
                for m in value.members)
            value = value.__class__(value.protocol_type, value.generation, value.protocol,
                                    value.leader, value.current_state_timestamp, members)
        shard = self.coordinator.shard_of_group(group.group_id)
        await self.coordinator.write(shard, [(GroupKey(group.group_id), value)])

    async def _enter_empty_generation(self, group: ClassicGroup) -> None:
        """Write the next, empty generation of a group nobody rejoined, then enter it, so
        memory never runs ahead of the log (Kafka's old coordinator entered it at once and only
        warned on a failed write; its new one reverts the change then). Until then the group
        stays rebalancing without members; a failed write is retried after
        :data:`EMPTY_RETRY_MS`; a member joining meanwhile starts the next generation itself."""
        generation, now = group.generation_id, self._now()
        value = replace(group.to_record(), generation=generation + 1, protocol=None,
                        leader=None, current_state_timestamp=now, members=())
        try:
            shard = self.coordinator.shard_of_group(group.group_id)
            await self.coordinator.write(shard, [(GroupKey(group.group_id), value)])
        except GroupError as exc:
            if not self.coordinator.serves(group):
                # The shard moved: the next coordinator loads the group from the log.
                log.info("Group %s: the empty generation was not written: %s",
                         group.group_id, exc)
                return
            log.warning("Group %s: could not write its empty generation %d (%s: %s); "
                        "retrying in %d ms", group.group_id, generation + 1, exc.code.name,
                        exc, EMPTY_RETRY_MS)
            self.timer.schedule(("join", group.group_id), EMPTY_RETRY_MS,
                                lambda: self._complete_join(group))
            return
        finally:
            self.emptying.discard(group.group_id)
        if (group.generation_id != generation or not group.is_in(S.PREPARING_REBALANCE)
                or not group.is_empty):
            return  # a member joined meanwhile and started the next generation itself
        group.generation_id = generation + 1
        group.protocol_name = None
        group.leader_id = None
        group.transition(S.EMPTY, now)
        log.info("Group %s with generation %d is now empty", group.group_id,
                 group.generation_id)

    async def store_assignment(self, group: ClassicGroup, generation: int,
                               assignments: dict[str, bytes]) -> None:
        """Write the leader's assignment, then hand it to the members (the group is Stable);
        a failed write answers the parked SyncGroups with its error and rebalances again."""
        error: int = 0
        try:
            await self.store_group(group, assignments)
        except GroupError as exc:
            error = exc.code
        # Members may have come or gone while the write was in flight.
        if not group.is_in(S.COMPLETING_REBALANCE) or group.generation_id != generation:
            return
        if error:
            self._reset_and_propagate_error(group, error)
            self.maybe_prepare_rebalance(group, "storing the assignment failed")
            return
        self._set_and_propagate_assignment(group, assignments)
        group.transition(S.STABLE, self._now())

    # --- sessions and removal --------------------------------------------------------------
    def schedule_heartbeat(self, group: ClassicGroup, member: ClassicMember,
                           timeout_ms: int) -> None:
        """(Re)arm the member's session timer: it is removed if nothing renews it in time."""
        key = ("heartbeat", group.group_id, member.member_id)
        self.timer.schedule(key, timeout_ms, lambda: self._heartbeat_expired(group, member))

    def _heartbeat_expired(self, group: ClassicGroup, member: ClassicMember) -> None:
        if group.members.get(member.member_id) is not member:
            return
        if not member.is_new and (member.awaiting_join or member.awaiting_sync):
            # Parked in JoinGroup/SyncGroup: alive; the next phase reschedules the timer.
            return
        log.info("Member %s in group %s has failed, removing it from the group",
                 member.member_id, group.group_id)
        self.remove_member(group, member, "session timeout expired")

    def _drop_member(self, group: ClassicGroup, member: ClassicMember, error: int) -> None:
        complete(member.join_future, JoinResult(error=error, member_id=member.member_id))
        complete(member.sync_future, SyncResult(error=error))
        member.join_future = member.sync_future = None
        self.timer.cancel(("heartbeat", group.group_id, member.member_id))
        group.remove(member.member_id)

    def remove_member(self, group: ClassicGroup, member: ClassicMember, reason: str) -> None:
        """Kafka's removeMemberAndUpdateGroup."""
        self._drop_member(group, member, ErrorCode.unknown_member_id)
        if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, f"removing member {member.member_id}: {reason}")
        elif group.is_in(S.PREPARING_REBALANCE):
            self.check_join_complete(group)

    # --- lifecycle -------------------------------------------------------------------------
    def start_loaded(self, group: ClassicGroup) -> None:
        """Arm the session timers of a group just loaded from the log."""
        for member in group.members.values():
            self.schedule_heartbeat(group, member, member.session_timeout_ms)

    def shutdown_group(self, group: ClassicGroup, error: int) -> None:
        """Answer every parked request with ``error`` and stop the group's timers."""
        for member in group.members.values():
            complete(member.join_future, JoinResult(error=error, member_id=member.member_id))
            complete(member.sync_future, SyncResult(error=error))
            member.join_future = member.sync_future = None
            self.timer.cancel(("heartbeat", group.group_id, member.member_id))
        for member_id in group.pending_members:
            self.timer.cancel(("pending", group.group_id, member_id))
        self.timer.cancel(("join", group.group_id))
        self.timer.cancel(("sync", group.group_id))
