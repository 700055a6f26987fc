"""InitProducerId (key 22), versions 0-5, for idempotent producers.

A producer without a transactional id gets a fresh producer id with epoch 0. Ids come from
blocks the controller hands out (ProducerIdsRecord in the metadata log), so an id is never
issued twice, across restarts too. A producer that sends its current id and epoch (v3+, KIP-360)
to recover from an error gets the same id with the epoch bumped, or a new id when the epoch
would overflow.

The broker prefetches the next block once 90% of the current one is issued (Kafka 3.5+), so
this request does not wait on the controller in the common case. With no id at hand (the
first request after a start; a block the controller could not write, e.g. a full disk; a
controller that does not answer) the request waits at most 1 s for the block being asked for,
then answers COORDINATOR_LOAD_IN_PROGRESS, what Kafka's producer id manager answers while it
has no block: clients retry.

Left out until the transactions work: transactional ids (answered COORDINATOR_NOT_AVAILABLE,
which clients treat as "retry later").
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ..dispatch import RequestContext, handler

MAX_EPOCH = 32767


@handler(ApiKey.INIT_PRODUCER_ID, 0, 5)
async def handle_init_producer_id(ctx: RequestContext, request: Any) -> Any:
    if request.transactional_id is not None:
        return ctx.respond({"throttle_time": 0,
                            "error_code": ErrorCode.coordinator_not_available,
                            "producer_id": -1, "producer_epoch": -1})
    producer_id = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    if producer_id >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        return ctx.respond({"throttle_time": 0, "error_code": ErrorCode.none,
                            "producer_id": producer_id, "producer_epoch": epoch + 1})
    try:
        new_id = await ctx.broker.next_producer_id()
    except KafkaError:
        return ctx.respond({"throttle_time": 0,
                            "error_code": ErrorCode.coordinator_load_in_progress,
                            "producer_id": -1, "producer_epoch": -1})
    return ctx.respond({"throttle_time": 0, "error_code": ErrorCode.none,
                        "producer_id": new_id, "producer_epoch": 0})
