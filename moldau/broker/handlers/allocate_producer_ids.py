"""AllocateProducerIds (key 67), version 0: another broker asks the active controller for a
block of producer ids (Kafka's RPCProducerIdManager; the forwarding controller channel sends
it when a broker's block runs out).

Answered by the active controller only: it allocates the next block (1000 ids, one
ProducerIdsRecord, in ZooKeeper ``/latest_producer_id_block`` in a cluster) and answers its
start and length. Any other broker answers NOT_CONTROLLER, so the sender asks the controller
the metadata names next. A refusal of the controller (e.g. its store could not be written)
comes back with the controller's error code.

Left out: the broker epoch check (STALE_BROKER_EPOCH): the image keeps no broker epochs.
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ..dispatch import RequestContext, handler


def _answer(ctx: RequestContext, code: ErrorCode, start: int = -1, length: int = 0) -> Any:
    return ctx.respond({"throttle_time": 0, "error_code": code, "producer_id_start": start,
                        "producer_id_len": length})


@handler(ApiKey.ALLOCATE_PRODUCER_IDS, 0, 0)
async def handle_allocate_producer_ids(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    if broker.controller_id != broker.node_id:
        return _answer(ctx, ErrorCode.not_controller)
    try:
        block = await broker.controller.allocate_producer_ids(request.broker_id)
    except KafkaError as exc:
        return _answer(ctx, exc.code)
    return _answer(ctx, ErrorCode.none, block.start, len(block))
