"""AddPartitionsToTxn (key 24), versions 0-5.

v0-3 (producers): the partitions join the producer's transaction, which starts (Ongoing) if
none is open. Partitions the metadata does not know get UNKNOWN_TOPIC_OR_PARTITION and the
others OPERATION_NOT_ATTEMPTED (nothing is added); otherwise every partition gets the
coordinator's answer: NONE, INVALID_PRODUCER_ID_MAPPING (not the id's producer),
PRODUCER_FENCED (v2+; INVALID_PRODUCER_EPOCH before) for an older epoch,
CONCURRENT_TRANSACTIONS while the last transaction completes, NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE.

v4-5 (brokers, KIP-890 part 1): a batch of transactions with ``verify_only``; each partition
is answered NONE if the transaction holds it, else INVALID_TXN_STATE, or the transaction's
error for all its partitions. Partition leaders send it before a transaction's first write
(``moldau.broker.txn.verification``).

Left out: ``verify_only=false`` in v4+ (transactions V2 adds partitions from brokers) is
answered INVALID_REQUEST; TRANSACTION_ABORTABLE (v5) is never answered; ACLs.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, handler
from ..txn.coordinator import TransactionCoordinator
from ..txn.errors import TxnError, for_version
from ..txn.service import txn_coordinator_of

TopicPartition = tuple[str, int]


def _results(tps: list[TopicPartition], codes: dict[TopicPartition, ErrorCode]
             ) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for topic, index in tps:
        by_topic.setdefault(topic, []).append(
            {"partition_index": index, "partition_error_code": codes[(topic, index)]})
    return [{"name": name, "results_by_partition": parts} for name, parts in by_topic.items()]


def _partitions(topics: Any) -> list[TopicPartition]:
    seen: dict[TopicPartition, None] = {}
    for topic in topics:
        for index in topic.partitions:
            seen[(topic.name, int(index))] = None
    return list(seen)


@handler(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5)
async def handle_add_partitions_to_txn(ctx: RequestContext, request: Any) -> Any:
    if ctx.version >= 4:
        return await _verify_batch(ctx, request)
    tps = _partitions(request.v3_and_below_topics)
    codes = await _add(ctx, request.v3_and_below_transactional_id,
                       request.v3_and_below_producer_id, request.v3_and_below_producer_epoch,
                       tps)
    return ctx.respond({"throttle_time": 0, "results_by_topic_v3_and_below": _results(tps, codes)})


async def _add(ctx: RequestContext, txn_id: str, producer_id: int, epoch: int,
               tps: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
    topics = ctx.broker.image.topics_by_name
    unknown = {(t, p) for t, p in tps
               if t not in topics or p not in topics[t].partitions}
    if unknown:
        return {tp: ErrorCode.unknown_topic_or_partition if tp in unknown
                else ErrorCode.operation_not_attempted for tp in tps}
    error = ErrorCode.none
    try:
        await txn_coordinator_of(ctx.broker).add_partitions(txn_id, producer_id, epoch, tps)
    except TxnError as exc:
        error = for_version(ApiKey.ADD_PARTITIONS_TO_TXN, ctx.version, exc.code)
    return dict.fromkeys(tps, error)


async def _verify_batch(ctx: RequestContext, request: Any) -> Any:
    try:
        coordinator = txn_coordinator_of(ctx.broker)
    except TxnError as exc:
        return ctx.respond({"throttle_time": 0, "error_code": exc.code,
                            "results_by_transaction": []})
    results = await asyncio.gather(*(_verify_one(coordinator, txn)
                                     for txn in request.transactions))
    return ctx.respond({"throttle_time": 0, "error_code": ErrorCode.none,
                        "results_by_transaction": results})


async def _verify_one(coordinator: TransactionCoordinator, txn: Any) -> dict[str, Any]:
    tps = _partitions(txn.topics)
    if not txn.verify_only:
        codes = dict.fromkeys(tps, ErrorCode.invalid_request)
    else:
        codes = await coordinator.verify(txn.transactional_id, txn.producer_id,
                                         txn.producer_epoch, tps)
    return {"transactional_id": txn.transactional_id, "topic_results": _results(tps, codes)}
