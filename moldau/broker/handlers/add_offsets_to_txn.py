"""AddOffsetsToTxn (key 25), versions 0-4: a group's offsets join the transaction.

The group's ``__consumer_offsets`` partition (Kafka's placement of the group id) becomes a
partition of the transaction, so the offsets the producer then commits through
TxnOffsetCommit become visible with the transaction's COMMIT marker (or are dropped with its
ABORT). Errors as AddPartitionsToTxn: INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (v2+;
INVALID_PRODUCER_EPOCH before), CONCURRENT_TRANSACTIONS while the last transaction completes,
the coordinator errors.

Left out: group ACLs; TRANSACTION_ABORTABLE (v4) is never answered.
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, handler
from ..group.partitioning import OFFSETS_TOPIC, partition_for
from ..txn.errors import TxnError, for_version
from ..txn.service import txn_coordinator_of


def group_partition(ctx: RequestContext, group_id: str) -> int:
    """The ``__consumer_offsets`` partition of ``group_id`` (the topic's partition count once
    it exists, ``offsets.topic.num.partitions`` before)."""
    topic = ctx.broker.image.topics_by_name.get(OFFSETS_TOPIC)
    count = len(topic.partitions) if topic is not None and topic.partitions else int(
        ctx.broker.config["offsets.topic.num.partitions"])
    return partition_for(group_id, count)


@handler(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4)
async def handle_add_offsets_to_txn(ctx: RequestContext, request: Any) -> Any:
    error = ErrorCode.none
    try:
        coordinator = txn_coordinator_of(ctx.broker)
        await coordinator.add_offsets(request.transactional_id, request.producer_id,
                                      request.producer_epoch,
                                      group_partition(ctx, request.group_id))
    except TxnError as exc:
        error = exc.code
    return ctx.respond({"throttle_time": 0,
                        "error_code": for_version(ApiKey.ADD_OFFSETS_TO_TXN, ctx.version,
                                                  error)})
