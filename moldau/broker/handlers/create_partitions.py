"""CreatePartitions (key 37), versions 0-3.

Grows a topic to ``count`` partitions. Partitions can only be added: a count equal to or
below the current one answers INVALID_PARTITIONS with the current count. New partitions take
the topic's replication factor, placed on the live brokers, or the request's assignments (one
per new partition, each with that many distinct registered brokers, else
INVALID_REPLICA_ASSIGNMENT). Unknown topics answer UNKNOWN_TOPIC_OR_PARTITION, a topic named
twice INVALID_REQUEST "Duplicate topic name.". ``validate_only`` checks without changing
anything. The new partitions' logs are created (all or none) before their PartitionRecords
are committed to the metadata log in one batch; a batch over the 8 MiB metadata limit answers
RECORD_LIST_TOO_LARGE (with ``validate_only`` too), logs that cannot be created (disk full, no
file descriptor left) KAFKA_STORAGE_ERROR.

In a cluster the change is made by the active controller (this broker's, or forwarded to
it); a request forwarded by another broker that reaches a broker which is not the
active controller answers NOT_CONTROLLER for every entry, so the sender retries there.

Left out: ACL checks and controller mutation quotas (throttle time is always 0).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, handler
from ..metadata.forwarding import NOT_CONTROLLER_MESSAGE, misdirected


@handler(ApiKey.CREATE_PARTITIONS, 0, 3)
async def handle_create_partitions(ctx: RequestContext, request: Any) -> Any:
    controller = ctx.broker.controller
    if misdirected(ctx.header.client_id, ctx.broker.controller_id, ctx.broker.node_id):
        return ctx.respond({"throttle_time": 0, "results": [
            {"name": t.name, "error_code": ErrorCode.not_controller,
             "error_message": NOT_CONTROLLER_MESSAGE} for t in request.topics]})
    counts = Counter(t.name for t in request.topics)
    results: list[dict[str, Any]] = []
    for topic in request.topics:
        if counts[topic.name] > 1:
            continue
        # An empty list means "no assignments" too (some clients send [] instead of null).
        assignments = ([list(a.broker_ids) for a in topic.assignments]
                       if topic.assignments else None)
        code, message = await controller.create_partitions(
            topic.name, topic.count, assignments, validate_only=request.validate_only)
        results.append({"name": topic.name, "error_code": code, "error_message": message})
    for name, n in counts.items():
        if n > 1:
            results.append({"name": name, "error_code": ErrorCode.invalid_request,
                            "error_message": "Duplicate topic name."})
    return ctx.respond({"throttle_time": 0, "results": results})
