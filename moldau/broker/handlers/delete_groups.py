"""DeleteGroups (key 42), versions 0-2.

Deletes empty groups with their committed offsets (tombstones in ``__consumer_offsets``,
written before the group is forgotten). A group with members answers NON_EMPTY_GROUP, an
unknown one GROUP_ID_NOT_FOUND; a failed write keeps the group and answers Kafka's error for
the append (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, UNKNOWN_SERVER_ERROR).
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ..dispatch import RequestContext, handler
from ..group.errors import GroupError
from ..group.service import coordinator_of


@handler(ApiKey.DELETE_GROUPS, 0, 2)
async def handle_delete_groups(ctx: RequestContext, request: Any) -> Any:
    results = []
    for group_id in request.groups_names:
        try:
            coordinator = coordinator_of(ctx.broker)
            shard = coordinator.shard_of_group(group_id)
            error = await coordinator.admin.delete(shard, group_id)
        except GroupError as exc:
            error = exc.code
        results.append({"group_id": group_id, "error_code": error})
    return ctx.respond({"throttle_time": 0, "results": results})
