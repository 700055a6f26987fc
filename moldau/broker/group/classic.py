"""The classic group (JoinGroup/SyncGroup protocol) as Kafka's GroupMetadata models it.

States and their allowed predecessors::

    Empty               <- PreparingRebalance
    PreparingRebalance  <- Empty, Stable, CompletingRebalance
    CompletingRebalance <- PreparingRebalance
    Stable              <- CompletingRebalance
    Dead                <- any

Everything here is plain data and pure decisions (protocol selection, what a record holds);
the request flow lives in :mod:`.classic_protocol`, the rebalance with its timers in
:mod:`.classic_rebalance`. The durable part of a
group is its :class:`~.records.GroupValue` record: :meth:`ClassicGroup.to_record` writes it and
:meth:`ClassicGroup.replay` rebuilds a group from it when the coordinator loads.
"""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .consumer_protocol import subscription_topics
from .records import GroupValue, MemberValue

CONSUMER_PROTOCOL_TYPE = "consumer"


class ClassicState(enum.Enum):
    """Kafka's GroupState names (what DescribeGroups and ListGroups report)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = ClassicState
VALID_PREVIOUS: dict[ClassicState, frozenset[ClassicState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.EMPTY, _S.STABLE, _S.COMPLETING_REBALANCE}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.DEAD: frozenset(_S),
}


@dataclass(slots=True)
class JoinResult:
    """What a JoinGroup response carries."""

    error: int = 0
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class SyncResult:
    """What a SyncGroup response carries."""

    error: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(eq=False, slots=True)
class ClassicMember:
    """One member of a classic group."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    # A parked JoinGroup / SyncGroup answer for this member, if one is waiting.
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    # Until it completes its first join, a member's heartbeat timer is the join deadline.
    is_new: bool = False
    heartbeat_satisfied: bool = False

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether ``protocols`` are exactly what this member last sent."""
        return self.protocols == protocols

    def has_satisfied_heartbeat(self) -> bool:
        """Whether the session timer may expire without removing the member (Kafka's rule:
        a member parked in JoinGroup/SyncGroup is alive)."""
        if self.is_new:
            return self.heartbeat_satisfied
        return self.awaiting_join or self.awaiting_sync or self.heartbeat_satisfied

    def to_record(self, protocol: str | None) -> MemberValue:
        subscription = b""
        if protocol is not None:
            try:
                subscription = self.metadata(protocol)
            except KeyError:
                subscription = b""
        return MemberValue(self.member_id, self.group_instance_id, self.client_id,
                           self.client_host, self.rebalance_timeout_ms,
                           self.session_timeout_ms, subscription, self.assignment)


def _common(names: Mapping[str, list[str]]) -> set[str]:
    sets = [set(mine) for mine in names.values()]
    return set.intersection(*sets) if sets else set()


def complete(future: asyncio.Future[Any] | None, value: Any) -> None:
    """Resolve a parked answer unless its request already went away."""
    if future is not None and not future.done():
        future.set_result(value)


class ClassicGroup:
    """A classic consumer (or Connect, or other protocol-type) group."""

    kind = "classic"

    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = ClassicState.EMPTY
        self.state_timestamp = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, ClassicMember] = {}
        self.static_members: dict[str, str] = {}
        self.pending_members: set[str] = set()
        self.pending_sync: set[str] = set()
        self.new_member_added = False
        # Join phase bookkeeping for group.initial.rebalance.delay.ms.
        self.initial_delay_active = False
        self.initial_delay_remaining_ms = 0

    # --- state ---------------------------------------------------------------------------
    def transition(self, state: ClassicState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[state]:
            raise RuntimeError(
                f"group {self.group_id}: illegal transition {self.state.value} -> {state.value}"
            )
        self.state = state
        self.state_timestamp = now_ms

    def is_in(self, *states: ClassicState) -> bool:
        return self.state in states

    @property
    def is_empty(self) -> bool:
        return not self.members

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS[ClassicState.PREPARING_REBALANCE]

    # --- members -------------------------------------------------------------------------
    def add(self, member: ClassicMember) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> ClassicMember | None:
        member = self.members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        if member is None:
            return None
        if (member.group_instance_id is not None
                and self.static_members.get(member.group_instance_id) == member_id):
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> ClassicMember:
        """Give a static member a new member id (KIP-345: the instance restarted)."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        self.pending_sync.discard(old_id)
        if self.leader_id == old_id:
            self.leader_id = new_id
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        if instance_id is None:
            return None
        return self.static_members.get(instance_id)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def all_members_joined(self) -> bool:
        return (sum(1 for m in self.members.values() if m.awaiting_join) == len(self.members)
                and not self.pending_members)

    def not_yet_rejoined(self) -> list[ClassicMember]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # --- protocols -----------------------------------------------------------------------
    def _protocol_names(self, overrides: Mapping[str, list[tuple[str, bytes]]] | None = None
                        ) -> dict[str, list[str]]:
        """Each member's protocol names, in its order of preference (``overrides``: the
        protocols some members would have after a change not yet applied)."""
        overrides = overrides or {}
        return {m.member_id: [name for name, _ in overrides[m.member_id]]
                if m.member_id in overrides else m.protocol_names()
                for m in self.members.values()}

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        return _common(self._protocol_names())

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(
            self.candidate_protocols() & set(names))

    def select_protocol(self,
                        overrides: Mapping[str, list[tuple[str, bytes]]] | None = None) -> str:
        """The protocol with the most votes; ties go to the leader's preference
        (``overrides``: as if some members had these protocols)."""
        names = self._protocol_names(overrides)
        candidates = _common(names)
        votes = Counter(next(n for n in mine if n in candidates) for mine in names.values())
        best = max(votes.values())
        preference = (names[self.leader_id]
                      if self.leader_id is not None and self.leader_id in names
                      else sorted(votes))
        for name in preference:
            if votes.get(name) == best:
                return name
        return max(votes, key=lambda n: votes[n])

    def member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        """(member id, instance id, metadata of the selected protocol) per member."""
        assert self.protocol_name is not None
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                for m in self.members.values()]

    def join_result(self, member: ClassicMember) -> JoinResult:
        """The JoinGroup answer for ``member`` in the current generation."""
        return JoinResult(
            error=0, generation_id=self.generation_id, protocol_type=self.protocol_type,
            protocol_name=self.protocol_name, leader=self.leader_id or "",
            member_id=member.member_id,
            members=self.member_metadata() if self.is_leader(member.member_id) else [],
        )

    # --- subscriptions -------------------------------------------------------------------
    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to; None when the protocol type is not ``consumer``
        or a subscription cannot be parsed (callers then assume every topic is in use)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                parsed = subscription_topics(member.metadata(self.protocol_name))
            except (KeyError, ValueError):
                return None
            topics.update(parsed)
        return topics

    # --- records -------------------------------------------------------------------------
    def to_record(self) -> GroupValue:
        return GroupValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=self.state_timestamp,
            members=tuple(m.to_record(self.protocol_name) for m in self.members.values()),
        )

    @classmethod
    def replay(cls, group_id: str, value: GroupValue, now_ms: int) -> ClassicGroup:
        """Rebuild a group from its latest GroupMetadataValue (Stable if it has members)."""
        group = cls(group_id, now_ms)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        if value.current_state_timestamp >= 0:
            group.state_timestamp = value.current_state_timestamp
        for m in value.members:
            protocols = [(value.protocol, m.subscription)] if value.protocol else []
            member = ClassicMember(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.rebalance_timeout, m.session_timeout, value.protocol_type, protocols,
                assignment=m.assignment,
            )
            group.members[m.member_id] = member
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        if group.members:
            group.state = ClassicState.STABLE
            if group.leader_id not in group.members:
                group.leader_id = next(iter(group.members))
        else:
            group.leader_id = None
        return group
