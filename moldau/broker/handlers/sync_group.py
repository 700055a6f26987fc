"""SyncGroup (key 14), versions 0-5.

The leader sends the assignment; it is written to ``__consumer_offsets`` and every member's
SyncGroup (parked until then) gets its share. In a stable group SyncGroup returns the member's
current assignment. v5 checks the protocol type and name against the group's
(INCONSISTENT_GROUP_PROTOCOL). Errors: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ...protocol.api_keys import ApiKey
from ..dispatch import RequestContext, handler
from ..group.classic import SyncResult
from ..group.errors import GroupError
from ..group.service import coordinator_of

log = logging.getLogger(__name__)


@handler(ApiKey.SYNC_GROUP, 0, 5)
async def handle_sync_group(ctx: RequestContext, request: Any) -> Any:
    try:
        coordinator = coordinator_of(ctx.broker)
        shard = coordinator.shard_of_group(request.group_id)
        answer = coordinator.classic.sync(
            shard, request.group_id, request.generation_id, request.member_id,
            getattr(request, "group_instance_id", None),
            getattr(request, "protocol_type", None), getattr(request, "protocol_name", None),
            {a.member_id: a.assignment for a in request.assignments},
        )
    except GroupError as exc:
        answer = SyncResult(error=exc.code)
    if isinstance(answer, asyncio.Future):
        answer = await asyncio.shield(answer)
    log.debug("SyncGroup v%d of group %s generation %d from member %r: error %d, %d bytes of "
              "assignment", ctx.version, request.group_id, request.generation_id,
              request.member_id, answer.error, len(answer.assignment or b""))
    return ctx.respond({
        "throttle_time": 0,
        "error_code": answer.error,
        "protocol_type": answer.protocol_type,
        "protocol_name": answer.protocol_name,
        "assignment": answer.assignment,
    })
