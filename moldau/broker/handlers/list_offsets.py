"""ListOffsets (key 2), versions 1-11.

Special timestamps: -2 earliest (log start offset), -1 latest (high watermark, or the last
stable offset for read_committed), -3 the offset of the record with the largest timestamp
(v7+), -4 earliest local offset (same as earliest: no tiered storage), -5 earliest pending
upload (no tiered storage: answered as -1). Any other timestamp finds the first offset whose
record timestamp is at or after it, below the high watermark; none -> offset -1.
Leader epochs are checked (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH); answers carry the
leader epoch of the returned offset (v4+). A partition this broker does not lead answers
NOT_LEADER_OR_FOLLOWER, one the metadata does not know UNKNOWN_TOPIC_OR_PARTITION, one whose
log is offline here KAFKA_STORAGE_ERROR (``ReplicaManager.leader_partition``).
Left out: follower (replica id >= 0) semantics beyond reading to the log end.
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, handler

EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD = -2, -1, -3, -4, -5


def _answer(ctx: RequestContext, topic: str, partition_index: int, timestamp: int,
            leader_epoch: int, committed: bool) -> dict[str, Any]:
    partition = ctx.broker.replica_manager.leader_partition(topic, partition_index,
                                                            leader_epoch)
    base = {"partition_index": partition_index, "timestamp": -1, "offset": -1,
            "leader_epoch": -1}
    if isinstance(partition, ErrorCode):
        return {**base, "error_code": partition}
    log = partition.log
    limit = partition.last_stable_offset if committed else partition.high_watermark
    if timestamp == LATEST:
        return {"partition_index": partition_index, "error_code": ErrorCode.none,
                "timestamp": -1, "offset": limit, "leader_epoch": partition.leader_epoch}
    if timestamp < 0 and timestamp not in (EARLIEST, EARLIEST_LOCAL, MAX_TIMESTAMP,
                                           EARLIEST_PENDING_UPLOAD):
        return {**base, "error_code": ErrorCode.invalid_request}
    found = log.fetch_offset_by_timestamp(timestamp)
    if found is None or found.offset < 0 or (timestamp >= 0 and found.offset >= limit):
        return {**base, "error_code": ErrorCode.none}
    return {"partition_index": partition_index, "error_code": ErrorCode.none,
            "timestamp": found.timestamp, "offset": found.offset,
            "leader_epoch": found.leader_epoch}


@handler(ApiKey.LIST_OFFSETS, 1, 11)
def handle_list_offsets(ctx: RequestContext, request: Any) -> Any:
    committed = getattr(request, "isolation_level", 0) == 1
    topics = []
    for topic in request.topics:
        partitions = [
            _answer(ctx, topic.name, p.partition_index, p.timestamp,
                    getattr(p, "current_leader_epoch", -1), committed)
            for p in topic.partitions
        ]
        topics.append({"name": topic.name, "partitions": partitions})
    return ctx.respond({"throttle_time": 0, "topics": topics})
