"""DescribeGroups, ListGroups and DeleteGroups over both kinds of groups.

KIP-848 consumer groups are described to DescribeGroups the way Kafka does it: protocol type
``consumer``, the group's server assignor as protocol, and each member's subscription and
assignment encoded as ConsumerProtocolSubscription / ConsumerProtocolAssignment, so tools built
for classic groups (``kafka-consumer-groups``, ``moldau groups``) show them too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...protocol.errors import ErrorCode
from .classic import ClassicGroup, ClassicState
from .consumer_protocol import encode_assignment, encode_subscription
from .errors import GroupError
from .records import OffsetKey
from .shard import Group, GroupShard

if TYPE_CHECKING:
    from .coordinator import GroupCoordinator


def group_state(group: Group) -> str:
    """The state name DescribeGroups and ListGroups report."""
    if isinstance(group, ClassicGroup):
        return group.state.value
    return group.state_name()


def group_type(group: Group) -> str:
    return "classic" if isinstance(group, ClassicGroup) else "consumer"


def dead_group(group_id: str) -> dict[str, Any]:
    """How Kafka (DescribeGroups < v6) describes a group it does not know."""
    return {"error_code": ErrorCode.none, "group_id": group_id, "group_state": "Dead",
            "protocol_type": "", "protocol_data": "", "members": []}


class GroupAdmin:
    """The admin-facing views and deletion of groups."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator

    def describe(self, shard: GroupShard, group_id: str) -> dict[str, Any]:
        """One DescribeGroups entry."""
        group = shard.groups.get(group_id)
        if group is None:
            return dead_group(group_id)
        if isinstance(group, ClassicGroup):
            return self._describe_classic(group)
        names = self.coordinator.consumer.topic_names()
        members = []
        for m in group.members.values():
            assigned = {names[t]: sorted(p) for t, p in m.assigned.items() if t in names}
            members.append({
                "member_id": m.member_id, "group_instance_id": m.instance_id,
                "client_id": m.client_id, "client_host": m.client_host,
                "member_metadata": encode_subscription(sorted(group.member_topic_names(m)),
                                                       assigned),
                "member_assignment": encode_assignment(assigned),
            })
        return {"error_code": ErrorCode.none, "group_id": group_id,
                "group_state": group.state_name(), "protocol_type": "consumer",
                "protocol_data": group.preferred_assignor(), "members": members}

    @staticmethod
    def _describe_classic(group: ClassicGroup) -> dict[str, Any]:
        stable = group.is_in(ClassicState.STABLE) and group.protocol_name is not None
        members = []
        for m in group.members.values():
            metadata = b""
            if stable:
                try:
                    metadata = m.metadata(group.protocol_name or "")
                except KeyError:
                    metadata = b""
            members.append({
                "member_id": m.member_id, "group_instance_id": m.group_instance_id,
                "client_id": m.client_id, "client_host": m.client_host,
                "member_metadata": metadata,
                "member_assignment": m.assignment if stable else b"",
            })
        return {"error_code": ErrorCode.none, "group_id": group.group_id,
                "group_state": group.state.value, "protocol_type": group.protocol_type or "",
                "protocol_data": group.protocol_name if stable else "",
                "members": members}

    def list(self, states: list[str], types: list[str]) -> list[dict[str, Any]]:
        """ListGroups entries, filtered by state and type (case-insensitive)."""
        if self.coordinator.loading:
            raise GroupError(ErrorCode.coordinator_load_in_progress)
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        result = []
        for _, group in self.coordinator.groups():
            state = group_state(group)
            if isinstance(group, ClassicGroup) and group.is_in(ClassicState.DEAD):
                continue
            if wanted_states and state.lower() not in wanted_states:
                continue
            if wanted_types and group_type(group) not in wanted_types:
                continue
            protocol_type = (group.protocol_type or "") if isinstance(group, ClassicGroup) \
                else "consumer"
            result.append({"group_id": group.group_id, "protocol_type": protocol_type,
                           "group_state": state, "group_type": group_type(group)})
        return result

    async def delete(self, shard: GroupShard, group_id: str) -> int:
        """Delete an empty group and its offsets; returns the DeleteGroups error code.

        The tombstones are written first, then replayed (offsets) and the group forgotten; a
        failed write leaves the group and its offsets as they were and answers Kafka's error
        for the append. Other changes of the group wait meanwhile (:mod:`.locks`), so a
        JoinGroup arriving during the write starts a new group after it."""
        return await self.coordinator.run(self._delete(shard, group_id))

    async def _delete(self, shard: GroupShard, group_id: str) -> int:
        async with self.coordinator.locks.hold(group_id):
            self.coordinator.check_loaded(shard)
            group = shard.groups.get(group_id)
            if group is None or (isinstance(group, ClassicGroup)
                                 and group.is_in(ClassicState.DEAD)):
                return ErrorCode.group_id_not_found
            if not self.coordinator.is_idle(group):
                return ErrorCode.non_empty_group
            records = list(self.coordinator.offsets.tombstones_for_group(shard, group))
            try:
                base = await self.coordinator.write(shard, records)  # type: ignore[arg-type]
            except GroupError as exc:
                return exc.code
            for i, (key, _) in enumerate(records):
                if isinstance(key, OffsetKey):
                    shard.offsets.replay(key, None, base + i)
            self.coordinator.remove_group(shard, group)
        return ErrorCode.none
