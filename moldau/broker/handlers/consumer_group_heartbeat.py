"""ConsumerGroupHeartbeat (key 68), versions 0-1: the KIP-848 consumer protocol.

Joining (epoch 0), leaving (-1; -2 for a static member leaving temporarily), acknowledging
revocations and receiving assignments all go through this one request (see
:mod:`moldau.broker.group.consumer_ops`). Assignments are computed on the broker by the
``uniform`` or ``range`` assignor (``group.consumer.assignors``; a member may name one). The
answer carries the member epoch, ``group.consumer.heartbeat.interval.ms`` and, when it changed,
the member's assignment by topic id, once the change is written to ``__consumer_offsets``. v1
adds subscription by regular expression (matched
against whole topic names, internal topics excluded) and client-chosen member ids (KIP-1082);
a v0 join without a member id gets one from the broker.
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.entities import to_ms
from ..dispatch import RequestContext, handler
from ..group.consumer_ops import HeartbeatRequest
from ..group.errors import GroupError
from ..group.service import coordinator_of


@handler(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1)
async def handle_consumer_group_heartbeat(ctx: RequestContext, request: Any) -> Any:
    owned = None
    if request.topic_partitions is not None:
        owned = {}
        for tp in request.topic_partitions:
            owned.setdefault(tp.topic_id, set()).update(tp.partitions)
    names = request.subscribed_topic_names
    req = HeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id or "",
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=to_ms(request.rebalance_timeout),
        subscribed_topic_names=None if names is None else list(names),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor,
        owned=owned,
        client_id=ctx.header.client_id or "",
        client_host=f"/{ctx.client_host}",
    )
    try:
        coordinator = coordinator_of(ctx.broker)
        shard = coordinator.shard_of_group(req.group_id)
        # Answered once the change is written (a failed write answers its error).
        result = await coordinator.consumer.heartbeat(shard, req, ctx.version)
    except GroupError as exc:
        return ctx.respond({"throttle_time": 0, "error_code": exc.code,
                            "error_message": exc.message, "member_id": None,
                            "member_epoch": 0, "heartbeat_interval": 0, "assignment": None})
    assignment = None
    if result.assignment is not None:
        assignment = {"topic_partitions": [
            {"topic_id": topic, "partitions": sorted(parts)}
            for topic, parts in sorted(result.assignment.items()) if parts]}
    return ctx.respond({
        "throttle_time": 0, "error_code": 0, "error_message": None,
        "member_id": result.member_id, "member_epoch": result.member_epoch,
        "heartbeat_interval": result.heartbeat_interval_ms, "assignment": assignment,
    })
