"""ConsumerGroupDescribe (key 69), versions 0-1.

KIP-848 groups: state (Empty, Assigning, Reconciling, Stable), group and assignment epochs, the
server assignor in use, and per member its epoch, subscription, current assignment and target
assignment (topics by id and name). v1 adds the member type (always ``consumer``). A classic
or unknown group answers GROUP_ID_NOT_FOUND. Authorized operations are all of them (no ACLs).
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ..dispatch import RequestContext, answer_each, handler
from ..group.errors import GroupError
from ..group.service import coordinator_of
from .describe_groups import GROUP_OPERATIONS

_NOT_REQUESTED = -(2**31)


@handler(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1)
def handle_consumer_group_describe(ctx: RequestContext, request: Any) -> Any:
    with_ops = bool(request.include_authorized_operations)

    def describe(group_id: str) -> dict[str, Any]:
        try:
            coordinator = coordinator_of(ctx.broker)
            shard = coordinator.shard_of_group(group_id)
            entry = coordinator.consumer.describe(shard, group_id)
        except GroupError as exc:
            entry = {"error_code": exc.code, "error_message": exc.message,
                     "group_id": group_id, "group_state": "", "group_epoch": 0,
                     "assignment_epoch": 0, "assignor_name": "", "members": []}
        entry["authorized_operations"] = GROUP_OPERATIONS if with_ops else _NOT_REQUESTED
        return entry

    groups = answer_each(request.group_ids, describe)
    return ctx.respond({"throttle_time": 0, "groups": groups})
