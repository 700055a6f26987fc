"""FindCoordinator (key 10), versions 0-6.

Answers with the broker leading the key's ``__consumer_offsets`` partition (Kafka's placement:
``abs(hashCode(group id)) % partitions``), reported with its endpoint for the listener the
request arrived on, so clients behind different networks reach the coordinator the same way
they reached this broker. ``__consumer_offsets`` is created on the first group lookup, through
the active controller; a lookup waits for that at most about a second and otherwise answers
COORDINATOR_NOT_AVAILABLE, which clients retry (Kafka answers so at once), while the creation
goes on. v4+ carries a batch of keys, looked up together (so the batch waits once, not once per
key).

Left out: transaction coordinators (key type 1) answer COORDINATOR_NOT_AVAILABLE until
transactions exist; key type 2 (share groups) is INVALID_REQUEST.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ...protocol.api_keys import ApiKey
from ..dispatch import RequestContext, handler
from ..group.service import find_coordinator


@handler(ApiKey.FIND_COORDINATOR, 0, 6)
async def handle_find_coordinator(ctx: RequestContext, request: Any) -> Any:
    key_type = getattr(request, "key_type", 0)
    if ctx.version >= 4:
        answers = await asyncio.gather(*(
            find_coordinator(ctx.broker, key, key_type, ctx.listener)
            for key in request.coordinator_keys))
        coordinators = [answer.as_dict(key)
                        for key, answer in zip(request.coordinator_keys, answers, strict=True)]
        return ctx.respond({"throttle_time": 0, "coordinators": coordinators})
    answer = await find_coordinator(ctx.broker, request.key, key_type, ctx.listener)
    return ctx.respond({"throttle_time": 0, **answer.as_dict()})
