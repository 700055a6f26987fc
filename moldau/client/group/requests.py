"""Request bodies of the group protocol as plain dicts, for every version at once.

Each builder returns the fields any version of its API may want;
:func:`moldau.protocol.entities.build` keeps those the negotiated version has (``member_id`` at
the top in LeaveGroup v0-2, a ``members`` batch from v3; ``group_instance_id`` from JoinGroup
v5; ...). Pure functions, tested against every version kio knows
(tests/unit/client/test_group_requests.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def join_group(group_id: str, member_id: str, instance_id: str | None, session_ms: int,
               rebalance_ms: int, protocols: Iterable[tuple[str, bytes]], *,
               protocol_type: str) -> dict[str, Any]:
    """JoinGroup of a member offering ``protocols`` (name, metadata) of ``protocol_type``
    ("consumer" for consumers, "sr" for the schema registry's election, ...)."""
    return {
        "group_id": group_id,
        "session_timeout": session_ms,
        "rebalance_timeout": rebalance_ms,
        "member_id": member_id,
        "group_instance_id": instance_id,
        "protocol_type": protocol_type,
        "protocols": [{"name": name, "metadata": metadata} for name, metadata in protocols],
        "reason": None,
    }


def sync_group(group_id: str, generation: int, member_id: str, instance_id: str | None,
               protocol: str | None, assignments: Iterable[tuple[str, bytes]], *,
               protocol_type: str) -> dict[str, Any]:
    """SyncGroup: the leader sends every member's assignment, the others none."""
    return {
        "group_id": group_id,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": instance_id,
        "protocol_type": protocol_type,
        "protocol_name": protocol,
        "assignments": [{"member_id": m, "assignment": a} for m, a in assignments],
    }


def heartbeat(group_id: str, generation: int, member_id: str, instance_id: str | None
              ) -> dict[str, Any]:
    return {"group_id": group_id, "generation_id": generation, "member_id": member_id,
            "group_instance_id": instance_id}


def leave_group(group_id: str, member_id: str, reason: str) -> dict[str, Any]:
    return {
        "group_id": group_id, "member_id": member_id,
        "members": [{"member_id": member_id, "group_instance_id": None, "reason": reason}],
    }


def consumer_group_heartbeat(
    group_id: str, member_id: str, epoch: int, *, instance_id: str | None = None,
    rack: str | None = None, rebalance_ms: int = -1, topics: list[str] | None = None,
    regex: str | None = None, assignor: str | None = None,
    owned: list[tuple[Any, list[int]]] | None = None,
) -> dict[str, Any]:
    """KIP-848 heartbeat; None/-1 fields mean "unchanged" (``owned`` as (topic id,
    partitions) pairs)."""
    return {
        "group_id": group_id,
        "member_id": member_id,
        "member_epoch": epoch,
        "instance_id": instance_id,
        "rack_id": rack,
        "rebalance_timeout": rebalance_ms,
        "subscribed_topic_names": topics,
        "subscribed_topic_regex": regex,
        "server_assignor": assignor,
        "topic_partitions": None if owned is None else [
            {"topic_id": t, "partitions": ps} for t, ps in owned],
    }


def list_groups(states: Iterable[str] | None, types: Iterable[str] | None) -> dict[str, Any]:
    return {"states_filter": list(states or ()), "types_filter": list(types or ())}


def describe_groups(group_ids: Iterable[str]) -> dict[str, Any]:
    return {"groups": list(group_ids), "include_authorized_operations": False}


def delete_groups(group_ids: Iterable[str]) -> dict[str, Any]:
    return {"groups_names": list(group_ids)}


def offset_delete(group_id: str, partitions: dict[str, list[int]]) -> dict[str, Any]:
    return {
        "group_id": group_id,
        "topics": [{"name": t, "partitions": [{"partition_index": p} for p in ps]}
                   for t, ps in sorted(partitions.items())],
    }
