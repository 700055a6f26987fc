"""OffsetForLeaderEpoch (key 23), versions 2-4 (Kafka 4 serves the same, KIP-896).

For each partition: the largest leader epoch at or below the requested ``leader_epoch`` that
the leader's epoch cache knows and the offset where it ended (the start offset of the next
epoch, or the log end offset for the current one), exactly as Kafka's
``LeaderEpochFileCache.endOffsetFor``: consumers use it after a leader change to find out
whether their position was truncated away (KIP-320), followers to truncate their logs. An
epoch newer than any known answers epoch -1 / offset -1 with no error.

Answered by the leader only, in Kafka's order (``ReplicaManager.leader_partition``):
UNKNOWN_TOPIC_OR_PARTITION for partitions the metadata does not know, KAFKA_STORAGE_ERROR
when the log is offline here, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH when
``current_leader_epoch`` is older / newer than the partition's, NOT_LEADER_OR_FOLLOWER when
another broker leads it, none does, or this broker is fenced; errors carry epoch -1 and
offset -1.

Left out: the debugging replica id (-2), which Kafka lets read a follower's epochs.
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, handler


def _answer(ctx: RequestContext, topic: str, request: Any) -> dict[str, Any]:
    partition = ctx.broker.replica_manager.leader_partition(topic, request.partition,
                                                            request.current_leader_epoch)
    if isinstance(partition, ErrorCode):
        return {"error_code": partition, "partition": request.partition, "leader_epoch": -1,
                "end_offset": -1}
    epoch, end_offset = partition.log.end_offset_for_epoch(request.leader_epoch)
    return {"error_code": ErrorCode.none, "partition": request.partition,
            "leader_epoch": epoch, "end_offset": end_offset}


@handler(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4)
def handle_offset_for_leader_epoch(ctx: RequestContext, request: Any) -> Any:
    topics = [{"topic": t.topic, "partitions": [_answer(ctx, t.topic, p)
                                                for p in t.partitions]}
              for t in request.topics]
    return ctx.respond({"throttle_time": 0, "topics": topics})
