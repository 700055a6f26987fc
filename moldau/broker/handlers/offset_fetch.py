"""OffsetFetch (key 9), versions 1-9.

Returns committed offsets with their metadata strings (and, v5+, committed leader epochs);
partitions without a commit answer offset -1. A null topic list (v2+) means every partition the
group has committed. v8+ asks for several groups at once, each with its own error. v9 carries
a KIP-848 member id and epoch, checked like a commit's (UNKNOWN_MEMBER_ID,
STALE_MEMBER_EPOCH); a null member id is an admin fetch. v1 has no group-level error field, so
group errors are reported on each partition, as Kafka does.

Offsets committed inside a transaction (TxnOffsetCommit) are not returned until the transaction
commits. With ``require_stable`` (v7+, KIP-447; read_committed consumers send it) a partition
that has such pending offsets answers UNSTABLE_OFFSET_COMMIT (offset -1), which clients retry
until the transaction ends; without it the last committed offset is returned.
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, handler
from ..group.errors import GroupError
from ..group.service import coordinator_of


def _topics_of(request_topics: Any) -> list[tuple[str, list[int]]] | None:
    if request_topics is None:
        return None
    return [(t.name, list(t.partition_indexes)) for t in request_topics]


def fetch_group(ctx: RequestContext, group_id: str, topics: list[tuple[str, list[int]]] | None,
                member_id: str | None = None, member_epoch: int = -1, *,
                require_stable: bool = False) -> dict[str, Any]:
    """One group's answer: {"error_code", "topics"} with partition-level entries."""
    try:
        coordinator = coordinator_of(ctx.broker)
        shard = coordinator.shard_of_group(group_id)
        found = coordinator.offsets.fetch(shard, group_id, topics, member_id, member_epoch,
                                          require_stable=require_stable)
    except GroupError as exc:
        error = exc.code
        if ctx.version < 2 and topics is not None:
            # No group-level error field: put it on every partition.
            return {"error_code": error, "topics": [
                {"name": t, "partitions": [
                    {"partition_index": p, "committed_offset": -1, "metadata": "",
                     "error_code": error} for p in ps]}
                for t, ps in topics]}
        return {"error_code": error, "topics": []}
    return {"error_code": ErrorCode.none, "topics": [
        {"name": topic, "partitions": [
            {"partition_index": p, "committed_offset": f.offset,
             "committed_leader_epoch": f.leader_epoch, "metadata": f.metadata,
             "error_code": f.error} for p, f in entries]}
        for topic, entries in found]}


@handler(ApiKey.OFFSET_FETCH, 1, 9)
def handle_offset_fetch(ctx: RequestContext, request: Any) -> Any:
    stable = bool(getattr(request, "require_stable", False))
    if ctx.version >= 8:
        groups = []
        for g in request.groups:
            answer = fetch_group(ctx, g.group_id, _topics_of(g.topics),
                                 getattr(g, "member_id", None), getattr(g, "member_epoch", -1),
                                 require_stable=stable)
            groups.append({"group_id": g.group_id, **answer})
        return ctx.respond({"throttle_time": 0, "groups": groups})
    answer = fetch_group(ctx, request.group_id, _topics_of(request.topics),
                         require_stable=stable)
    return ctx.respond({"throttle_time": 0, **answer})
