"""AlterPartition (key 56), versions 2-3: a partition leader asks the active controller to
change the partition's ISR (KIP-497; Kafka's brokers send it since 2.7 in ZooKeeper mode, as
AlterIsr, and KRaft's do too).

Served by the active controller only; any other broker answers NOT_CONTROLLER (41) at the top
level, and the sender (:class:`~moldau.broker.metadata.forwarding.ForwardingControllerChannel`)
asks again wherever the metadata then names the controller. Each partition is checked on its
own (:mod:`moldau.broker.metadata.isr_change`: UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION,
FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, INVALID_UPDATE_VERSION, INVALID_REQUEST,
INELIGIBLE_REPLICA); the valid ones are committed as one PartitionChangeRecord each (new ISR,
partition epoch + 1), in one metadata batch — in a cluster one ZooKeeper multi-op that sets
each state znode conditionally on its version. Every broker then learns the new ISR the usual
way (replay, or its ZooKeeper watch). A valid partition is answered with its state after the
change (leader, leader epoch, ISR, partition epoch); a refused one with its error code.

Version 3 (Kafka 3.5, KIP-903) sends the ISR with broker epochs (``new_isr_with_epochs``);
version 2 (Kafka 3.3) sends broker ids (``new_isr``). Left out: versions 0-1 (topics named by
name; kio, following Kafka 4, has no schemas for them), the broker epoch checks
(STALE_BROKER_EPOCH: Moldau's image keeps no broker epochs, so ``broker_epoch`` is read and
ignored), and the request's ``leader_recovery_state``, which is read and ignored: every ISR
change a leader asks for counts as RECOVERED (KIP-704's state is RECOVERING from an unclean
election until the leader's first ISR change, see :mod:`moldau.broker.metadata.isr_change`),
and the answer says 0, RECOVERED.
"""

from __future__ import annotations

import logging
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, handler
from ..metadata.isr_change import IsrChange, IsrChangeResult

log = logging.getLogger(__name__)


def requested_changes(request: Any) -> list[IsrChange]:
    """The ISR changes an AlterPartition request (v2 or v3) asks for, in request order."""
    changes = []
    for topic in request.topics:
        for p in topic.partitions:
            with_epochs = getattr(p, "new_isr_with_epochs", None)
            isr = (tuple(b.broker_id for b in with_epochs) if with_epochs is not None
                   else tuple(p.new_isr))
            changes.append(IsrChange(topic.topic_id, p.partition_index, p.leader_epoch,
                                     p.partition_epoch, isr))
    return changes


def _partition(result: IsrChangeResult) -> dict[str, Any]:
    return {"partition_index": result.partition, "error_code": result.error,
            "leader_id": result.leader, "leader_epoch": result.leader_epoch,
            "isr": list(result.isr), "leader_recovery_state": 0,
            "partition_epoch": result.partition_epoch}


def response_data(results: list[IsrChangeResult], error: ErrorCode = ErrorCode.none
                  ) -> dict[str, Any]:
    """The response body for ``results`` (grouped by topic, in order of first mention)."""
    topics: dict[Any, list[dict[str, Any]]] = {}
    for result in results:
        topics.setdefault(result.topic_id, []).append(_partition(result))
    return {"throttle_time": 0, "error_code": error,
            "topics": [{"topic_id": topic_id, "partitions": partitions}
                       for topic_id, partitions in topics.items()]}


@handler(ApiKey.ALTER_PARTITION, 2, 3)
async def handle_alter_partition(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    if broker.controller_id != broker.node_id:
        return ctx.respond(response_data([], ErrorCode.not_controller))
    changes = requested_changes(request)
    results = await broker.controller.alter_partition(request.broker_id, changes)
    if any(r.error == ErrorCode.not_controller for r in results):
        # Deposed (or not yet armed) while answering: the sender retries at the top level.
        return ctx.respond(response_data([], ErrorCode.not_controller))
    topics = broker.image.topics_by_id
    for change, result in zip(changes, results, strict=True):
        if result.error != ErrorCode.none:
            topic = topics.get(change.topic_id)  # logs name the topic (its id if unknown)
            log.info("ISR change of %s-%d from broker %d refused: %s %s",
                     topic.name if topic is not None else change.topic_id,
                     change.partition, request.broker_id, result.error.name.upper(),
                     result.message or "")
    return ctx.respond(response_data(results))
