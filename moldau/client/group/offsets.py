"""OffsetCommit and OffsetFetch: request bodies and answers for every version.

Shared by group members (which commit with their generation or KIP-848 member epoch) and the
admin client (which commits as "nobody": member id "" and generation -1, accepted only for a
group without members, as ``kafka-consumer-groups --reset-offsets`` does).

Versions: OffsetCommit 2-10 and OffsetFetch 1-10 as kio knows them; v10 names topics by id,
so when the client lacks a topic's id the version is capped at 9.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode

from ..connection import BrokerConnection
from ..types import TopicPartition
from .types import OffsetAndMetadata

TopicIds = Mapping[str, uuid.UUID | None]


def as_offset(value: int | OffsetAndMetadata | tuple[Any, ...]) -> OffsetAndMetadata:
    """An OffsetAndMetadata from an int offset, an OffsetAndMetadata or a tuple of its fields."""
    if isinstance(value, OffsetAndMetadata):
        return value
    if isinstance(value, int):
        return OffsetAndMetadata(value)
    return OffsetAndMetadata(*value)


def _by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[TopicPartition]]:
    topics: dict[str, list[TopicPartition]] = {}
    for tp in sorted(tps):
        topics.setdefault(tp.topic, []).append(tp)
    return topics


def pick_version(conn: BrokerConnection, api_key: int, topics: Iterable[str],
                 topic_ids: TopicIds) -> int:
    """The negotiated version, below 10 when a topic's id is unknown."""
    version = conn.versions.require(api_key, 1 if api_key == ApiKey.OFFSET_FETCH else 2)
    if version >= 10 and any(topic_ids.get(t) is None for t in topics):
        version = 9
    return version


def commit_body(group_id: str, generation: int, member_id: str, instance_id: str | None,
                offsets: Mapping[TopicPartition, OffsetAndMetadata],
                topic_ids: TopicIds) -> dict[str, Any]:
    """An OffsetCommit request as a dict (fields of every version; build() keeps the right
    ones)."""
    return {
        "group_id": group_id,
        "generation_id_or_member_epoch": generation,
        "member_id": member_id,
        "group_instance_id": instance_id,
        "retention_time": -1,
        "topics": [{
            "name": topic,
            "topic_id": topic_ids.get(topic),
            "partitions": [{
                "partition_index": tp.partition,
                "committed_offset": offsets[tp].offset,
                "committed_leader_epoch": offsets[tp].leader_epoch,
                "committed_metadata": offsets[tp].metadata,
            } for tp in tps],
        } for topic, tps in _by_topic(offsets).items()],
    }


def commit_errors(response: Any, topic_names: Mapping[Any, str]) -> dict[TopicPartition, int]:
    """Error code per partition of an OffsetCommit answer."""
    out: dict[TopicPartition, int] = {}
    for t in response.topics:
        name = getattr(t, "name", None) or topic_names.get(getattr(t, "topic_id", None))
        if name is None:
            continue
        for p in t.partitions:
            out[TopicPartition(name, p.partition_index)] = int(p.error_code)
    return out


def fetch_body(group_id: str, partitions: Iterable[TopicPartition] | None,
               topic_ids: TopicIds, *, member_id: str | None = None, member_epoch: int = -1,
               require_stable: bool = False) -> dict[str, Any]:
    """An OffsetFetch request for one group; ``partitions=None`` asks for all of them."""
    topics = None if partitions is None else [{
        "name": topic, "topic_id": topic_ids.get(topic),
        "partition_indexes": [tp.partition for tp in tps],
    } for topic, tps in _by_topic(partitions).items()]
    return {
        "group_id": group_id,
        "topics": topics,
        "require_stable": require_stable,
        "groups": [{
            "group_id": group_id, "member_id": member_id, "member_epoch": member_epoch,
            "topics": topics,
        }],
    }


def fetch_result(
    response: Any, version: int, topic_names: Mapping[Any, str]
) -> tuple[int, dict[TopicPartition, OffsetAndMetadata | int | None]]:
    """(group error code, {partition: committed offset, None when none, or error code}).

    v1 has no group-level error: a group error shows on every partition, and is lifted to
    the group level here when all partitions agree.
    """
    if version >= 8:
        group = response.groups[0]
        group_error, topics = int(group.error_code), group.topics
    else:
        group_error, topics = int(getattr(response, "error_code", 0)), response.topics
    out: dict[TopicPartition, OffsetAndMetadata | int | None] = {}
    codes: set[int] = set()
    for t in topics:
        name = getattr(t, "name", None) or topic_names.get(getattr(t, "topic_id", None))
        if name is None:
            continue
        for p in t.partitions:
            tp = TopicPartition(name, p.partition_index)
            code = int(p.error_code)
            codes.add(code)
            if code:
                out[tp] = code
            elif p.committed_offset < 0:
                out[tp] = None
            else:
                out[tp] = OffsetAndMetadata(
                    int(p.committed_offset), p.metadata or "",
                    int(getattr(p, "committed_leader_epoch", -1)),
                )
    if not group_error and len(codes) == 1 and version < 2:
        only = next(iter(codes))
        if only in (ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator,
                    ErrorCode.coordinator_not_available):
            group_error = only
    return group_error, out
