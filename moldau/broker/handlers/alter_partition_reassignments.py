"""AlterPartitionReassignments (key 45), versions 0-1: start, redirect or cancel the
reassignment of partitions to other brokers (KIP-455, kafka-reassign-partitions.sh).

Each partition names its target replicas, or null to cancel the reassignment in progress.
The change is made by the active controller (this broker's, or forwarded to it as the other
controller-bound requests are; a forwarded request that reaches a broker which is not the
controller answers NOT_CONTROLLER at the top level, and the sender retries). Each partition is
checked on its own (:mod:`moldau.broker.metadata.reassignment`): an unknown topic or partition
answers UNKNOWN_TOPIC_OR_PARTITION; an empty target, a repeated broker or a broker that is not
alive INVALID_REPLICA_ASSIGNMENT; a cancellation with nothing in progress
NO_REASSIGNMENT_IN_PROGRESS; a partition named twice INVALID_REQUEST; with version 1's
``allow_replication_factor_change`` false (KIP-860), a target of another size than the
partition's replica count INVALID_REPLICATION_FACTOR. The accepted ones are committed in one
metadata batch and answered at once: the data moves afterwards (the new replicas fetch from the
leader, join the ISR, then the controller drops the old ones), and ListPartitionReassignments
or Metadata show the progress.

Left out: ACL checks; ``timeout`` is read and ignored (the answer comes when the reassignment
has started, as Kafka's).
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, handler
from ..metadata.forwarding import NOT_CONTROLLER_MESSAGE, misdirected
from ..metadata.reassignment import ReassignmentRequest, original_replicas


def _requests(request: Any) -> list[ReassignmentRequest]:
    return [ReassignmentRequest(t.name, p.partition_index,
                                None if p.replicas is None else tuple(p.replicas))
            for t in request.topics for p in t.partitions]


def _factor_problem(ctx: RequestContext, wanted: ReassignmentRequest) -> str | None:
    """KIP-860: why a target that changes the replication factor is refused (None: it is
    not, or the partition is unknown and the controller says so)."""
    topic = ctx.broker.image.topics_by_name.get(wanted.topic)
    state = None if topic is None else topic.partitions.get(wanted.partition)
    if state is None or wanted.replicas is None:
        return None
    current = len(original_replicas(state))
    if len(wanted.replicas) == current:
        return None
    return (f"The replication factor of {wanted.topic}-{wanted.partition} would change from "
            f"{current} to {len(wanted.replicas)}, but allowReplicationFactorChange is false.")


def response_data(requests: list[ReassignmentRequest],
                  outcomes: list[tuple[ErrorCode, str | None]],
                  error: ErrorCode = ErrorCode.none, message: str | None = None
                  ) -> dict[str, Any]:
    """The response body: partitions grouped by topic, in order of first mention."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for wanted, (code, text) in zip(requests, outcomes, strict=True):
        topics.setdefault(wanted.topic, []).append(
            {"partition_index": wanted.partition, "error_code": code,
             "error_message": text if code != ErrorCode.none else None})
    return {"throttle_time": 0, "error_code": error, "error_message": message,
            "responses": [{"name": name, "partitions": parts}
                          for name, parts in topics.items()]}


@handler(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 1)
async def handle_alter_partition_reassignments(ctx: RequestContext, request: Any) -> Any:
    if misdirected(ctx.header.client_id, ctx.broker.controller_id, ctx.broker.node_id):
        return ctx.respond(response_data([], [], ErrorCode.not_controller,
                                         NOT_CONTROLLER_MESSAGE))
    requests = _requests(request)
    outcomes: list[tuple[ErrorCode, str | None]] = [(ErrorCode.none, None)] * len(requests)
    allowed: list[int] = []
    for i, wanted in enumerate(requests):
        refusal = (None if getattr(request, "allow_replication_factor_change", True)
                   else _factor_problem(ctx, wanted))
        if refusal is not None:
            outcomes[i] = (ErrorCode.invalid_replication_factor, refusal)
        else:
            allowed.append(i)
    if allowed:
        answers = await ctx.broker.controller.alter_partition_reassignments(
            [requests[i] for i in allowed])
        if any(code == ErrorCode.not_controller for code, _ in answers):
            return ctx.respond(response_data([], [], ErrorCode.not_controller,
                                             NOT_CONTROLLER_MESSAGE))
        for i, answer in zip(allowed, answers, strict=True):
            outcomes[i] = answer
    return ctx.respond(response_data(requests, outcomes))
