"""KIP-848 consumer groups: members, epochs, target assignment and reconciliation.

The group epoch goes up whenever membership, a subscription or the partitions of a subscribed
topic change; the target assignment is recomputed for the new epoch by the server assignor.
Each member then moves towards its target one safe step at a time (Kafka's
CurrentAssignmentBuilder):

* partitions it must give up are *revoked first*: the member keeps its epoch and only the
  partitions it keeps, and stays in ``UNREVOKED_PARTITIONS`` until a heartbeat shows it no
  longer owns the revoked ones;
* then it advances to the target epoch and gets the new partitions that are free; partitions
  still owned by another member (not yet revoked there) are held back
  (``UNRELEASED_PARTITIONS``) and handed over on a later heartbeat once released.

So a partition never has two owners. Everything here is pure; timers and requests live in
:mod:`.consumer_ops`.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from ...protocol.errors import ErrorCode
from .errors import GroupError
from .records import (
    MEMBER_STATE_STABLE,
    MEMBER_STATE_UNRELEASED,
    MEMBER_STATE_UNREVOKED,
    ConsumerAssignmentKey,
    ConsumerAssignmentValue,
    ConsumerGroupKey,
    ConsumerGroupValue,
    ConsumerMemberKey,
    ConsumerMemberValue,
    TopicPartitions,
    Value,
    WritableKey,
)

Assignment = dict[uuid.UUID, set[int]]

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class MemberState(enum.Enum):
    """Kafka's MemberState, valued as its byte in ConsumerGroupCurrentMemberAssignmentValue."""

    STABLE = MEMBER_STATE_STABLE
    UNREVOKED_PARTITIONS = MEMBER_STATE_UNREVOKED
    UNRELEASED_PARTITIONS = MEMBER_STATE_UNRELEASED


@dataclass(slots=True)
class ConsumerMember:
    """One member of a consumer group (what ConsumerGroupMemberMetadata and
    ConsumerGroupCurrentMemberAssignment hold in Kafka)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = 300_000
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)


def _copy(assignment: Mapping[uuid.UUID, set[int]]) -> Assignment:
    return {t: set(p) for t, p in assignment.items() if p}


def owns_any(owned: Mapping[uuid.UUID, set[int]], partitions: Mapping[uuid.UUID, set[int]]) -> bool:
    return any(owned.get(t, set()) & p for t, p in partitions.items())


def is_subset(owned: Mapping[uuid.UUID, set[int]], of: Mapping[uuid.UUID, set[int]]) -> bool:
    return all(p <= of.get(t, set()) for t, p in owned.items())


def reconcile(member: ConsumerMember, target_epoch: int, target: Mapping[uuid.UUID, set[int]],
              owned: Mapping[uuid.UUID, set[int]] | None,
              partition_epoch: Callable[[uuid.UUID, int], int]) -> ConsumerMember:
    """The member's next state towards ``target`` (Kafka's CurrentAssignmentBuilder).

    ``owned`` is what the member reported owning in this heartbeat (None if it did not say);
    ``partition_epoch(topic, p)`` is the epoch of the member currently owning a partition, or
    -1 when it is free.
    """
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if owned is None or owns_any(owned, member.pending_revocation):
            return member
        return _next_assignment(member, target_epoch, target, partition_epoch)
    if member.state == MemberState.UNRELEASED_PARTITIONS or member.member_epoch != target_epoch:
        return _next_assignment(member, target_epoch, target, partition_epoch)
    return member


def _next_assignment(member: ConsumerMember, target_epoch: int,
                     target: Mapping[uuid.UUID, set[int]],
                     partition_epoch: Callable[[uuid.UUID, int], int]) -> ConsumerMember:
    kept: Assignment = {}
    with_new: Assignment = {}
    revoke: Assignment = {}
    unreleased = False
    for topic in set(target) | set(member.assigned):
        current = member.assigned.get(topic, set())
        wanted = target.get(topic, set())
        keep = current & wanted
        gone = current - wanted
        free = set()
        revoked_here = member.pending_revocation.get(topic, set())
        for p in wanted - current:
            # Free, or held only by this member's own finished revocation.
            if partition_epoch(topic, p) == -1 or p in revoked_here:
                free.add(p)
            else:
                unreleased = True
        if keep:
            kept[topic] = keep
        if keep | free:
            with_new[topic] = keep | free
        if gone:
            revoke[topic] = gone
    if revoke:
        # Revocation first: no new partitions until the old ones are given up.
        return replace(member, state=MemberState.UNREVOKED_PARTITIONS, assigned=kept,
                       pending_revocation=revoke)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return replace(member, state=state, member_epoch=target_epoch,
                   previous_member_epoch=member.member_epoch, assigned=with_new,
                   pending_revocation={})


class ConsumerGroup:
    """A KIP-848 consumer group."""

    kind = "consumer"

    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}
        self.target: dict[str, Assignment] = {}
        # (topic id, partition) -> epoch of the member owning it (assigned or revoking).
        self.partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        # What the subscribed topics looked like when the epoch was last bumped.
        self.subscription_fingerprint: tuple[tuple[str, uuid.UUID, int], ...] = ()
        self.resolved_regex: dict[str, set[str]] = {}
        self.regex_version = -2
        self.state_timestamp = now_ms
        # The epoch changed without a record yet (set when loading starts a new epoch).
        self.epoch_dirty = False

    # --- views ---------------------------------------------------------------------------
    @property
    def is_empty(self) -> bool:
        return not self.members

    def state_name(self) -> str:
        """Empty, Assigning, Reconciling or Stable (Kafka's ConsumerGroupState names)."""
        if not self.members:
            return "Empty"
        if self.group_epoch != self.assignment_epoch:
            return "Assigning"
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE:
                return "Reconciling"
        return "Stable"

    def member_topic_names(self, member: ConsumerMember) -> set[str]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex is not None:
            names |= self.resolved_regex.get(member.subscribed_topic_regex, set())
        return names

    def subscribed_topic_names(self) -> set[str]:
        names: set[str] = set()
        for member in self.members.values():
            names |= self.member_topic_names(member)
        return names

    def regexes(self) -> set[str]:
        return {m.subscribed_topic_regex for m in self.members.values()
                if m.subscribed_topic_regex is not None}

    def preferred_assignor(self, default: str = "uniform") -> str:
        """The server assignor most members ask for (the first configured one otherwise)."""
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return default
        return max(sorted(votes), key=lambda a: votes[a])

    def partition_epoch(self, topic: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic, partition), -1)

    # --- changes -------------------------------------------------------------------------
    def put_member(self, member: ConsumerMember) -> None:
        """Insert or replace a member, keeping partition ownership in step."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._claim(member)

    def remove_member(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._release(member)
        if member.instance_id is not None and \
                self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        return member

    def _release(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic, partitions in assignment.items():
                for p in partitions:
                    self.partition_epochs.pop((topic, p), None)

    def _claim(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic, partitions in assignment.items():
                for p in partitions:
                    self.partition_epochs[(topic, p)] = member.member_epoch

    def copy(self) -> ConsumerGroup:
        """A copy to plan a change on while this group keeps its state until the change is
        written. Members are never changed in place (changes make new ones), so the maps are
        copied, not the members."""
        staged = ConsumerGroup(self.group_id, self.state_timestamp)
        staged.group_epoch = self.group_epoch
        staged.assignment_epoch = self.assignment_epoch
        staged.members = dict(self.members)
        staged.static_members = dict(self.static_members)
        staged.target = dict(self.target)
        staged.partition_epochs = dict(self.partition_epochs)
        staged.subscription_fingerprint = self.subscription_fingerprint
        staged.resolved_regex = dict(self.resolved_regex)
        staged.regex_version = self.regex_version
        staged.epoch_dirty = self.epoch_dirty
        return staged

    def replay_written(self, records: Iterable[tuple[WritableKey, Value | None]],
                       planned: ConsumerGroup) -> None:
        """Apply a change once its records are written: members and the group epoch from the
        records themselves (as loading reads them), and from the copy the change was
        ``planned`` on what no record holds (target assignment, subscription bookkeeping)."""
        for key, value in records:
            match key:
                case ConsumerGroupKey() if isinstance(value, ConsumerGroupValue):
                    self.group_epoch = value.epoch
                    self.epoch_dirty = False
                case ConsumerMemberKey():
                    if value is None:
                        self.remove_member(key.member_id)
                    else:
                        assert isinstance(value, ConsumerMemberValue)
                        self.put_member(with_metadata(self.members.get(key.member_id),
                                                      key.member_id, value))
                case ConsumerAssignmentKey():
                    member = self.members.get(key.member_id)
                    if member is not None and value is not None:
                        assert isinstance(value, ConsumerAssignmentValue)
                        self.put_member(with_assignment(member, value))
        self.epoch_dirty = planned.epoch_dirty
        self.assignment_epoch = planned.assignment_epoch
        self.target = planned.target
        self.subscription_fingerprint = planned.subscription_fingerprint
        self.resolved_regex = planned.resolved_regex
        self.regex_version = planned.regex_version
        self.state_timestamp = planned.state_timestamp

    def bump_epoch(self, now_ms: int) -> int:
        self.group_epoch += 1
        self.state_timestamp = now_ms
        return self.group_epoch

    # --- offset validation (OffsetCommit / OffsetFetch) -----------------------------------
    def validate_offset_commit(self, member_id: str, epoch: int, version: int) -> None:
        if epoch < 0 and not member_id:
            if self.members:
                raise GroupError(ErrorCode.unknown_member_id,
                                 "simple commits need an empty group")
            return
        member = self.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.unknown_member_id)
        if version < 9:
            raise GroupError(ErrorCode.unsupported_version,
                             "members of consumer-protocol groups commit with OffsetCommit v9+")
        if epoch != member.member_epoch:
            raise GroupError(ErrorCode.stale_member_epoch,
                             f"epoch {epoch} is not the member's epoch {member.member_epoch}")

    def validate_offset_fetch(self, member_id: str | None, epoch: int) -> None:
        if epoch < 0 and not member_id:
            return
        member = self.members.get(member_id or "")
        if member is None:
            raise GroupError(ErrorCode.unknown_member_id)
        if epoch != member.member_epoch:
            raise GroupError(ErrorCode.stale_member_epoch)

    # --- records -------------------------------------------------------------------------
    def to_record(self) -> ConsumerGroupValue:
        return ConsumerGroupValue(self.group_epoch)

    def epoch_record(self) -> tuple[WritableKey, Value]:
        self.epoch_dirty = False
        return ConsumerGroupKey(self.group_id), self.to_record()

    @classmethod
    def replay(cls, group_id: str, value: ConsumerGroupValue,
               members: Mapping[str, ConsumerMemberValue],
               assignments: Mapping[str, ConsumerAssignmentValue], now_ms: int) -> ConsumerGroup:
        """Rebuild from the group's epoch, member and current-assignment records.

        The target assignment is not stored, so a group with members starts a new epoch:
        the target is recomputed at the next heartbeat (the previous assignments seed the
        sticky assignor, so partitions stay where they are) and every member reconciles to it.
        """
        group = cls(group_id, now_ms)
        group.group_epoch = group.assignment_epoch = value.epoch
        for member_id, meta in members.items():
            group.put_member(member_from_records(member_id, meta, assignments.get(member_id)))
        if group.members:
            group.target = {m.member_id: _copy(m.assigned) for m in group.members.values()}
            group.group_epoch += 1
            group.epoch_dirty = True
        return group


def _partitions(assignment: Mapping[uuid.UUID, set[int]]) -> TopicPartitions:
    return tuple((t, tuple(sorted(p))) for t, p in sorted(assignment.items()) if p)


def with_metadata(member: ConsumerMember | None, member_id: str,
                  meta: ConsumerMemberValue) -> ConsumerMember:
    """``member`` (a new one if None) with what a ConsumerGroupMemberMetadata record holds."""
    return replace(
        member or ConsumerMember(member_id), instance_id=meta.instance_id,
        rack_id=meta.rack_id, client_id=meta.client_id, client_host=meta.client_host,
        subscribed_topic_names=list(meta.subscribed_topic_names),
        subscribed_topic_regex=meta.subscribed_topic_regex,
        server_assignor=meta.server_assignor, rebalance_timeout_ms=meta.rebalance_timeout_ms)


def with_assignment(member: ConsumerMember,
                    assignment: ConsumerAssignmentValue) -> ConsumerMember:
    """``member`` with what a ConsumerGroupCurrentMemberAssignment record holds."""
    try:
        state = MemberState(assignment.state)
    except ValueError:
        state = MemberState.STABLE
    return replace(member, member_epoch=assignment.member_epoch,
                   previous_member_epoch=assignment.previous_member_epoch, state=state,
                   assigned={t: set(p) for t, p in assignment.assigned},
                   pending_revocation={t: set(p) for t, p in assignment.pending_revocation})


def member_from_records(member_id: str, meta: ConsumerMemberValue,
                        assignment: ConsumerAssignmentValue | None) -> ConsumerMember:
    member = with_metadata(None, member_id, meta)
    return member if assignment is None else with_assignment(member, assignment)


def _metadata_value(m: ConsumerMember) -> ConsumerMemberValue:
    return ConsumerMemberValue(m.instance_id, m.rack_id, m.client_id, m.client_host,
                               tuple(m.subscribed_topic_names), m.subscribed_topic_regex,
                               m.rebalance_timeout_ms, m.server_assignor)


def _assignment_value(m: ConsumerMember) -> ConsumerAssignmentValue:
    return ConsumerAssignmentValue(m.member_epoch, m.previous_member_epoch, m.state.value,
                                   _partitions(m.assigned), _partitions(m.pending_revocation))


def member_records(group_id: str, before: ConsumerMember | None,
                   after: ConsumerMember | None) -> list[tuple[WritableKey, Value | None]]:
    """The records that turn ``before`` into ``after`` (None = no such member)."""
    member_id = (after or before).member_id  # type: ignore[union-attr]
    meta_key = ConsumerMemberKey(group_id, member_id)
    assignment_key = ConsumerAssignmentKey(group_id, member_id)
    if after is None:
        return [(assignment_key, None), (meta_key, None)] if before is not None else []
    records: list[tuple[WritableKey, Value | None]] = []
    meta = _metadata_value(after)
    if before is None or _metadata_value(before) != meta:
        records.append((meta_key, meta))
    assignment = _assignment_value(after)
    if before is None or _assignment_value(before) != assignment:
        records.append((assignment_key, assignment))
    return records
