"""WriteTxnMarkers (key 27), versions 1-2: a transaction coordinator (or ``moldau
transactions abort``) asks this broker to end transactions on the partitions it leads.

Each marker (producer id and epoch, COMMIT or ABORT, coordinator epoch, partitions) becomes one
control batch per partition, appended with acks=-1 (the answer waits for the ISR, up to 30 s,
Kafka's ``request.timeout.ms``) by :class:`~moldau.broker.txn.markers.MarkerWriter`;
``__consumer_offsets`` partitions go to the group coordinator, which makes the transaction's
offsets visible (commit) or drops them (abort). Errors per partition: UNKNOWN_TOPIC_OR_PARTITION
(metadata does not know it), NOT_LEADER_OR_FOLLOWER (this broker does not lead it, or is
fenced), KAFKA_STORAGE_ERROR (its log is offline here), NOT_ENOUGH_REPLICAS (ISR below
``min.insync.replicas``), NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT (ISR wait),
INVALID_PRODUCER_EPOCH (an epoch older than the partition's for this producer: a newer
producer or coordinator moved on), TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch:
a zombie coordinator), and from the group coordinator NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS. A marker for a producer with no open transaction on the
partition is written anyway (a harmless empty completion, as in Kafka: coordinators re-send).
v2's ``transaction_version`` (KIP-890 part 2) is read and ignored.
Left out: v0 (gone from Kafka 4 and kio); CLUSTER_ACTION authorization (no ACLs).
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ..dispatch import RequestContext, handler
from ..txn.markers import TxnMarker


@handler(ApiKey.WRITE_TXN_MARKERS, 1, 2)
async def handle_write_txn_markers(ctx: RequestContext, request: Any) -> Any:
    markers = [
        TxnMarker(m.producer_id, m.producer_epoch, bool(m.transaction_result),
                  m.coordinator_epoch,
                  tuple((t.name, p) for t in m.topics for p in t.partition_indexes))
        for m in request.markers
    ]
    results = await ctx.broker.marker_writer.write(markers)
    answers = []
    for marker in request.markers:
        topics = [
            {"name": t.name,
             "partitions": [{"partition_index": p,
                             "error_code": results[(marker.producer_id, (t.name, p))]}
                            for p in t.partition_indexes]}
            for t in marker.topics
        ]
        answers.append({"producer_id": marker.producer_id, "topics": topics})
    return ctx.respond({"markers": answers})
