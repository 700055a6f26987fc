"""FindCoordinator (key 10), versions 0-6.

Key type 0 (groups): the broker leading the group's ``__consumer_offsets`` partition (Kafka's
placement: ``abs(hashCode(group id)) % partitions``). Key type 1 (transactional ids): the
broker leading the id's ``__transaction_state`` partition, placed the same way
(``moldau.broker.txn.service``). Each is reported with its endpoint for the listener the
request arrived on, so clients behind different networks reach the coordinator the same way
they reached this broker. ``__consumer_offsets`` / ``__transaction_state`` is created on the
first lookup of its kind, through the active controller; a lookup waits for that at most about
a second and otherwise answers COORDINATOR_NOT_AVAILABLE, which clients retry (Kafka answers
so at once), while the creation goes on. v4+ carries a batch of keys, looked up together (so
the batch waits once, not once per key).

Left out: key type 2 (share groups) is INVALID_REQUEST.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ...protocol.api_keys import ApiKey
from ..dispatch import RequestContext, handler
from ..group.service import TRANSACTION_KEY_TYPE, CoordinatorAnswer, find_coordinator
from ..txn.service import find_txn_coordinator


async def _find(ctx: RequestContext, key: str, key_type: int) -> CoordinatorAnswer:
    if key_type == TRANSACTION_KEY_TYPE:
        return await find_txn_coordinator(ctx.broker, key, ctx.listener)
    return await find_coordinator(ctx.broker, key, key_type, ctx.listener)


@handler(ApiKey.FIND_COORDINATOR, 0, 6)
async def handle_find_coordinator(ctx: RequestContext, request: Any) -> Any:
    key_type = getattr(request, "key_type", 0)
    if ctx.version >= 4:
        answers = await asyncio.gather(*(_find(ctx, key, key_type)
                                         for key in request.coordinator_keys))
        coordinators = [answer.as_dict(key)
                        for key, answer in zip(request.coordinator_keys, answers, strict=True)]
        return ctx.respond({"throttle_time": 0, "coordinators": coordinators})
    answer = await _find(ctx, request.key, key_type)
    return ctx.respond({"throttle_time": 0, **answer.as_dict()})
