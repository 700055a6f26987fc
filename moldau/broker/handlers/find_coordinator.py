"""FindCoordinator (key 10), versions 0-6.

Answers with the broker leading the key's ``__consumer_offsets`` partition (Kafka's placement:
``abs(hashCode(group id)) % partitions``), reported with its endpoint for the listener the
request arrived on, so clients behind different networks reach the coordinator the same way
they reached this broker. ``__consumer_offsets`` is created on the first group lookup. v4+
carries a batch of keys, answered one by one.

Left out: transaction coordinators (key type 1) answer COORDINATOR_NOT_AVAILABLE until
transactions exist; key type 2 (share groups) is INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ..dispatch import RequestContext, handler
from ..group.service import find_coordinator


@handler(ApiKey.FIND_COORDINATOR, 0, 6)
async def handle_find_coordinator(ctx: RequestContext, request: Any) -> Any:
    key_type = getattr(request, "key_type", 0)
    if ctx.version >= 4:
        coordinators = [
            (await find_coordinator(ctx.broker, key, key_type, ctx.listener)).as_dict(key)
            for key in request.coordinator_keys
        ]
        return ctx.respond({"throttle_time": 0, "coordinators": coordinators})
    answer = await find_coordinator(ctx.broker, request.key, key_type, ctx.listener)
    return ctx.respond({"throttle_time": 0, **answer.as_dict()})
