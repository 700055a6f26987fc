"""OffsetCommit (key 8), versions 2-9.

Commits are validated against the group (classic: member and generation, with
REBALANCE_IN_PROGRESS while the group completes a rebalance; KIP-848: member epoch, else
STALE_MEMBER_EPOCH), written to ``__consumer_offsets`` with Kafka's record layout, and answered
once written. A commit with generation -1 and no member id ("simple" commit, as kcat and
``assign()``-based consumers send) is accepted for a group without members and creates it if
needed. Metadata longer than ``offset.metadata.max.bytes`` gets OFFSET_METADATA_TOO_LARGE for
that partition. v2-4's retention time, when set, becomes the offset's expire timestamp; v6+
stores the committed leader epoch; v7+ checks ``group.instance.id`` (FENCED_INSTANCE_ID); v9+
answers GROUP_ID_NOT_FOUND instead of ILLEGAL_GENERATION for an unknown group.

Partitions of a topic the metadata does not know, and partition indexes beyond a topic's
partition count, get UNKNOWN_TOPIC_OR_PARTITION at every version and are neither validated
against the group nor written, as Kafka's ``KafkaApis.handleOffsetCommitRequest`` does; the
other partitions of the request are committed as usual (group errors apply to them only). A
request with no known partition is answered without touching the group (no simple group is
created for it).

Left out: v10 (topic ids); transactional commits (TxnOffsetCommit) come with transactions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.entities import to_ms
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, handler
from ..group.errors import GroupError
from ..group.offsets import OffsetToCommit
from ..group.service import coordinator_of


def _exists(topics: Mapping[str, Any], topic: str, partition: int) -> bool:
    known = topics.get(topic)
    return known is not None and partition in known.partitions


@handler(ApiKey.OFFSET_COMMIT, 2, 9)
async def handle_offset_commit(ctx: RequestContext, request: Any) -> Any:
    return await answer_offset_commit(ctx, request, lambda entries: _commit(ctx, request, entries))


async def answer_offset_commit(
        ctx: RequestContext, request: Any,
        commit: Callable[[list[OffsetToCommit]], Awaitable[list[int]]]) -> Any:
    """The answer to an OffsetCommit or TxnOffsetCommit (same topics/partitions shape):
    UNKNOWN_TOPIC_OR_PARTITION for partitions the image lacks, ``commit``'s code (one per
    entry, in order) for the others."""
    topics = ctx.broker.image.topics_by_name
    errors: list[int] = []
    entries: list[OffsetToCommit] = []
    for topic in request.topics:
        for p in topic.partitions:
            if _exists(topics, topic.name, p.partition_index):
                errors.append(ErrorCode.none)  # replaced by the commit's answer below
                entries.append(OffsetToCommit(
                    topic.name, p.partition_index, p.committed_offset,
                    getattr(p, "committed_leader_epoch", -1), p.committed_metadata))
            else:
                errors.append(ErrorCode.unknown_topic_or_partition)
    if entries:
        committed = iter(await commit(entries))
        errors = [next(committed) if e == ErrorCode.none else e for e in errors]
    results = iter(errors)
    return ctx.respond({
        "throttle_time": 0,
        "topics": [
            {"name": topic.name,
             "partitions": [{"partition_index": p.partition_index, "error_code": next(results)}
                            for p in topic.partitions]}
            for topic in request.topics
        ],
    })


async def _commit(ctx: RequestContext, request: Any, entries: list[OffsetToCommit]) -> list[int]:
    """The group coordinator's answer for ``entries`` (one error code each, in order)."""
    retention = -1
    if ctx.version <= 4:
        retention = to_ms(request.retention_time)
    try:
        coordinator = coordinator_of(ctx.broker)
        shard = coordinator.shard_of_group(request.group_id)
        return await coordinator.offsets.commit(
            shard, request.group_id, request.generation_id_or_member_epoch,
            request.member_id or "", getattr(request, "group_instance_id", None), entries,
            version=ctx.version, retention_ms=retention)
    except GroupError as exc:
        return [exc.code] * len(entries)
