"""ListPartitionReassignments (key 46), version 0: the reassignments in progress (KIP-455),
of every partition (``topics`` null) or of the named partitions.

Each partition being reassigned is listed with its replicas (the union of the original and
the target ones while the move lasts), the replicas being added and those being removed.
Partitions that are not being reassigned, and unknown topics or partitions, are left out, as
Kafka's controller leaves them. Answered by the active controller (this broker's, or forwarded
to it; a forwarded request that reaches a broker which is not the controller answers
NOT_CONTROLLER, and the sender retries).

Left out: ACL checks; ``timeout`` is read and ignored (the answer never waits).
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ..dispatch import RequestContext, handler
from ..metadata.forwarding import NOT_CONTROLLER_MESSAGE, misdirected
from ..metadata.reassignment import OngoingReassignment


def response_data(ongoing: list[OngoingReassignment], error: ErrorCode = ErrorCode.none,
                  message: str | None = None) -> dict[str, Any]:
    """The response body: partitions grouped by topic."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for item in ongoing:
        topics.setdefault(item.topic, []).append(
            {"partition_index": item.partition, "replicas": list(item.replicas),
             "adding_replicas": list(item.adding_replicas),
             "removing_replicas": list(item.removing_replicas)})
    return {"throttle_time": 0, "error_code": error, "error_message": message,
            "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]}


@handler(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0)
async def handle_list_partition_reassignments(ctx: RequestContext, request: Any) -> Any:
    if misdirected(ctx.header.client_id, ctx.broker.controller_id, ctx.broker.node_id):
        return ctx.respond(response_data([], ErrorCode.not_controller, NOT_CONTROLLER_MESSAGE))
    wanted = (None if request.topics is None
              else [(t.name, list(t.partition_indexes)) for t in request.topics])
    try:
        ongoing = await ctx.broker.controller.list_partition_reassignments(wanted)
    except KafkaError as exc:
        return ctx.respond(response_data([], exc.code, exc.message))
    return ctx.respond(response_data(ongoing))
