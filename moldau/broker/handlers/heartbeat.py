"""Heartbeat (key 12), versions 0-4.

Keeps a classic member's session alive. Answers REBALANCE_IN_PROGRESS while the group
rebalances (the member then rejoins), UNKNOWN_MEMBER_ID for members the group does not have
(expired or never joined), ILLEGAL_GENERATION for an old generation, FENCED_INSTANCE_ID for a
static instance whose id was taken over.
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ..dispatch import RequestContext, handler
from ..group.errors import GroupError
from ..group.service import coordinator_of


@handler(ApiKey.HEARTBEAT, 0, 4)
def handle_heartbeat(ctx: RequestContext, request: Any) -> Any:
    try:
        coordinator = coordinator_of(ctx.broker)
        shard = coordinator.shard_of_group(request.group_id)
        error = coordinator.classic.heartbeat(
            shard, request.group_id, request.generation_id, request.member_id,
            getattr(request, "group_instance_id", None))
    except GroupError as exc:
        error = exc.code
    return ctx.respond({"throttle_time": 0, "error_code": error})
