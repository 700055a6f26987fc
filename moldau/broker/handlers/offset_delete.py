"""OffsetDelete (key 47), version 0.

Deletes committed offsets of some partitions of a group. Partitions of topics the group's
members still subscribe to answer GROUP_SUBSCRIBED_TO_TOPIC; a non-empty group whose
subscriptions cannot be read (protocol type other than ``consumer``) answers NON_EMPTY_GROUP;
an unknown group GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, handler
from ..group.errors import GroupError
from ..group.service import coordinator_of


@handler(ApiKey.OFFSET_DELETE, 0, 0)
async def handle_offset_delete(ctx: RequestContext, request: Any) -> Any:
    topics = [(t.name, [p.partition_index for p in t.partitions]) for t in request.topics]
    try:
        coordinator = coordinator_of(ctx.broker)
        shard = coordinator.shard_of_group(request.group_id)
        error, errors = await coordinator.offsets.delete(shard, request.group_id, topics)
    except GroupError as exc:
        error, errors = exc.code, []
    if error != ErrorCode.none:
        return ctx.respond({"error_code": error, "throttle_time": 0, "topics": []})
    return ctx.respond({
        "error_code": error, "throttle_time": 0,
        "topics": [{"name": name, "partitions": [
            {"partition_index": p, "error_code": e} for p, e in zip(parts, row, strict=True)]}
            for (name, parts), row in zip(topics, errors, strict=True)],
    })
