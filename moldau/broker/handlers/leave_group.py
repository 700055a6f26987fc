"""LeaveGroup (key 13), versions 0-5.

Removes members from a classic group, which rebalances the rest at once (no waiting for a
session timeout). v3+ takes a batch of members, each by member id and/or
``group.instance.id`` (a static member can be removed by instance id alone, as
``kafka-consumer-groups`` does); each gets its own error. v0-2 report the first error at the
top level, as Kafka does.
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, handler
from ..group.errors import GroupError
from ..group.service import coordinator_of


@handler(ApiKey.LEAVE_GROUP, 0, 5)
def handle_leave_group(ctx: RequestContext, request: Any) -> Any:
    if ctx.version >= 3:
        identities = [(m.member_id or "", m.group_instance_id) for m in request.members]
    else:
        identities = [(request.member_id or "", None)]
    try:
        coordinator = coordinator_of(ctx.broker)
        shard = coordinator.shard_of_group(request.group_id)
        top, errors = coordinator.classic.leave(shard, request.group_id, identities)
    except GroupError as exc:
        top, errors = exc.code, []
    if ctx.version >= 3:
        return ctx.respond({
            "throttle_time": 0, "error_code": top,
            "members": [{"member_id": m, "group_instance_id": i, "error_code": e}
                        for (m, i), e in zip(identities, errors, strict=False)],
        })
    if top == ErrorCode.none:
        top = next((e for e in errors if e != ErrorCode.none), ErrorCode.none)
    return ctx.respond({"throttle_time": 0, "error_code": top})
