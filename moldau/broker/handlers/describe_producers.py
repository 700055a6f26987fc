"""DescribeProducers (key 61), version 0.

For each partition, the producers whose state the local replica keeps (idempotent and
transactional producers seen within ``producer.id.expiration.ms``): producer id and epoch,
last sequence, timestamp of its last batch, coordinator epoch and the start offset of its open
transaction (-1: none), as ``kafka-transactions.sh describe-producers`` shows them.

Any replica hosted here answers from its own log, leader or not, as Kafka's
``Partition.activeProducerState`` does (the admin client asks the leader unless told which
broker to ask). A partition the metadata does not know answers UNKNOWN_TOPIC_OR_PARTITION, one
with no replica here NOT_LEADER_OR_FOLLOWER, one whose log is offline here
KAFKA_STORAGE_ERROR (``ReplicaManager.hosted_partition``).

Left out: ACL checks (Kafka requires READ on the topic).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, answer_each, handler


def _answer(ctx: RequestContext, topic: str, index: int) -> dict[str, Any]:
    partition = ctx.broker.replica_manager.hosted_partition(topic, index)
    if isinstance(partition, ErrorCode):
        return {"partition_index": index, "error_code": partition, "error_message": None,
                "active_producers": []}
    producers = [
        {"producer_id": entry.producer_id, "producer_epoch": entry.producer_epoch,
         "last_sequence": entry.last_seq, "last_timestamp": entry.last_timestamp,
         "coordinator_epoch": entry.coordinator_epoch,
         "current_txn_start_offset": entry.current_txn_first_offset}
        for entry in sorted(partition.log.active_producers(), key=lambda e: e.producer_id)
    ]
    return {"partition_index": index, "error_code": ErrorCode.none, "error_message": None,
            "active_producers": producers}


@handler(ApiKey.DESCRIBE_PRODUCERS, 0, 0)
def handle_describe_producers(ctx: RequestContext, request: Any) -> Any:
    topics = [{"name": t.name,
               "partitions": answer_each(t.partition_indexes, partial(_answer, ctx, t.name))}
              for t in request.topics]
    return ctx.respond({"throttle_time": 0, "topics": topics})
