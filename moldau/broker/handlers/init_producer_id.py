"""InitProducerId (key 22), versions 0-5, for idempotent and transactional producers.

Without a transactional id a producer gets a fresh producer id with epoch 0. Ids come from
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

With a transactional id the transaction coordinator answers (``moldau.broker.txn``): the
id's producer id with its epoch bumped (a new id at epoch 0 for a new transactional id or an
exhausted epoch), fencing older producers of the id. An open transaction of the id is aborted
first (CONCURRENT_TRANSACTIONS: the client retries); PRODUCER_FENCED (v4+, INVALID_PRODUCER_EPOCH
before) for a KIP-360 recovery with an id and epoch that are no longer the id's;
INVALID_TRANSACTION_TIMEOUT for a ``transaction_timeout`` outside 1..``transaction.max.timeout.ms``;
INVALID_REQUEST for an empty transactional id or only one of producer id / epoch;
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE as any coordinator.

Left out: transactional-id ACLs; v6 (KIP-939 two-phase commit).
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.entities import to_ms
from ...protocol.errors import ErrorCode, KafkaError
from ..dispatch import RequestContext, handler
from ..txn.errors import TxnError, for_version
from ..txn.service import txn_coordinator_of

MAX_EPOCH = 32767


def _answer(ctx: RequestContext, error: int, producer_id: int = -1, epoch: int = -1) -> Any:
    code = for_version(ApiKey.INIT_PRODUCER_ID, ctx.version, error)
    return ctx.respond({"throttle_time": 0, "error_code": code, "producer_id": producer_id,
                        "producer_epoch": epoch})


@handler(ApiKey.INIT_PRODUCER_ID, 0, 5)
async def handle_init_producer_id(ctx: RequestContext, request: Any) -> Any:
    producer_id = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    if request.transactional_id is not None:
        return await _transactional(ctx, request, producer_id, epoch)
    if producer_id >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        return _answer(ctx, ErrorCode.none, producer_id, epoch + 1)
    try:
        new_id = await ctx.broker.next_producer_id()
    except KafkaError:
        return _answer(ctx, ErrorCode.coordinator_load_in_progress)
    return _answer(ctx, ErrorCode.none, new_id, 0)


async def _transactional(ctx: RequestContext, request: Any, producer_id: int,
                         epoch: int) -> Any:
    if (producer_id == -1) != (epoch == -1):
        return _answer(ctx, ErrorCode.invalid_request)
    expected = None if producer_id == -1 else (producer_id, epoch)
    try:
        coordinator = txn_coordinator_of(ctx.broker)
        pid, new_epoch = await coordinator.init_producer_id(
            request.transactional_id, to_ms(request.transaction_timeout), expected)
    except TxnError as exc:
        return _answer(ctx, exc.code)
    return _answer(ctx, ErrorCode.none, pid, new_epoch)
