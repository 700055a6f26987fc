"""DeleteRecords (key 21), versions 0-2.

Moves each partition's log start offset forward to the requested offset (-1 means the high
watermark) and deletes whole segments below it; consumers can no longer read earlier offsets
(OFFSET_OUT_OF_RANGE). An offset above the high watermark answers OFFSET_OUT_OF_RANGE. The
answer's low watermark is the new log start offset. With a single replica the change is
immediate; with followers the low watermark is what the leader reached. A partition this
broker does not lead answers NOT_LEADER_OR_FOLLOWER (the admin client asks the leader the
metadata names), one the metadata does not know UNKNOWN_TOPIC_OR_PARTITION.
Left out: waiting for followers' log start offsets (there are none yet).
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, handler


def _delete(ctx: RequestContext, topic: str, index: int, offset: int) -> dict[str, Any]:
    partition = ctx.broker.replica_manager.leader_partition(topic, index)
    if isinstance(partition, ErrorCode):
        return {"partition_index": index, "low_watermark": -1, "error_code": partition}
    target = partition.high_watermark if offset == -1 else offset
    if target < 0 or target > partition.high_watermark:
        return {"partition_index": index, "low_watermark": -1,
                "error_code": ErrorCode.offset_out_of_range}
    partition.log.delete_records_before(target)
    return {"partition_index": index, "low_watermark": partition.log.log_start_offset,
            "error_code": ErrorCode.none}


@handler(ApiKey.DELETE_RECORDS, 0, 2)
def handle_delete_records(ctx: RequestContext, request: Any) -> Any:
    topics = [
        {"name": t.name, "partitions": [_delete(ctx, t.name, p.partition_index, p.offset)
                                        for p in t.partitions]}
        for t in request.topics
    ]
    return ctx.respond({"throttle_time": 0, "topics": topics})
