"""ElectLeaders (key 43), versions 0-2 (KIP-183, KIP-460): an administrator asks the controller
to elect leaders — PREFERRED (0): give each partition back to its preferred replica, the first
of its assignment; UNCLEAN (1): elect a leader for partitions that have none alive, out of
sync if need be. Version 0 has no election type (always PREFERRED) and no top-level error.

Answers per partition, in Kafka's codes (rules in :mod:`moldau.broker.metadata.leader_election`):
NONE (elected), ELECTION_NOT_NEEDED (84), PREFERRED_LEADER_NOT_AVAILABLE (80),
ELIGIBLE_LEADERS_NOT_AVAILABLE (83), UNKNOWN_TOPIC_OR_PARTITION (3). ``topic_partitions``
null means every partition; then those that needed no election are left out of the answer,
as Kafka's controller leaves them. An election type other than 0 or 1 answers INVALID_REQUEST
for every partition named.

In a cluster the elections are made by the active controller (this broker's, or forwarded to
it like the other controller-bound requests); the new leaders are committed (to ZooKeeper)
before the answer, and every broker then follows the change through its usual watch, so a
client sees the new leader in Metadata a moment after the answer. A request forwarded by
another broker that reaches a broker which is not the active controller answers
NOT_CONTROLLER (top level from version 1, per partition in version 0), so the sender retries
where the metadata names the controller. A single node is its own controller: there is only
one replica to elect, so every existing partition answers ELECTION_NOT_NEEDED.

Left out: ACL checks (ALTER on the cluster) and the request's ``timeout`` (the answer comes
once the change is committed, which does not wait for the brokers to apply it).
"""

from __future__ import annotations

import logging
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ..dispatch import RequestContext, handler
from ..metadata.forwarding import NOT_CONTROLLER_MESSAGE, misdirected
from ..metadata.leader_election import ELECTION_TYPES, PREFERRED

log = logging.getLogger(__name__)

Outcomes = dict[tuple[str, int], tuple[ErrorCode, str | None]]


def requested_partitions(request: Any) -> list[tuple[str, int]] | None:
    """The (topic, partition) pairs asked for, without repeats; None for all."""
    if request.topic_partitions is None:
        return None
    return list(dict.fromkeys((t.topic, int(p)) for t in request.topic_partitions
                              for p in t.partitions))


def response_data(version: int, outcomes: Outcomes,
                  error: ErrorCode = ErrorCode.none) -> dict[str, Any]:
    """The response body: results grouped by topic in order of first mention."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), (code, message) in outcomes.items():
        topics.setdefault(topic, []).append(
            {"partition_id": partition, "error_code": code,
             "error_message": message if code != ErrorCode.none else None})
    data: dict[str, Any] = {"throttle_time": 0, "replica_election_results": [
        {"topic": topic, "partition_result": results} for topic, results in topics.items()]}
    if version >= 1:
        data["error_code"] = error
    return data


def _refused(version: int, partitions: list[tuple[str, int]] | None, code: ErrorCode,
             message: str) -> dict[str, Any]:
    # Version 0 has no top-level error: each named partition carries it.
    if version >= 1:
        return response_data(version, {}, code)
    return response_data(version, {tp: (code, message) for tp in partitions or ()})


@handler(ApiKey.ELECT_LEADERS, 0, 2)
async def handle_elect_leaders(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    version = ctx.version
    partitions = requested_partitions(request)
    election_type = int(getattr(request, "election_type", PREFERRED))
    if misdirected(ctx.header.client_id, broker.controller_id, broker.node_id):
        return ctx.respond(_refused(version, partitions, ErrorCode.not_controller,
                                    NOT_CONTROLLER_MESSAGE))
    if election_type not in ELECTION_TYPES:
        message = (f"Unknown election type {election_type}: 0 (PREFERRED) and 1 (UNCLEAN) are "
                   f"the election types")
        return ctx.respond(response_data(version, {
            tp: (ErrorCode.invalid_request, message) for tp in partitions or ()}))
    try:
        outcomes = await broker.controller.elect_leaders(election_type, partitions)
    except KafkaError as exc:
        log.info("ElectLeaders (%s) from %s:%s failed: %s", ELECTION_TYPES[election_type],
                 ctx.client_host, ctx.client_port, exc)
        return ctx.respond(_refused(version, partitions, exc.code, exc.message))
    if any(code == ErrorCode.not_controller for code, _ in outcomes.values()):
        # Deposed (or not yet armed) while committing: the sender retries at the top level.
        return ctx.respond(_refused(version, partitions, ErrorCode.not_controller,
                                    NOT_CONTROLLER_MESSAGE))
    elected = [f"{t}-{p}" for (t, p), (code, _) in outcomes.items() if code == ErrorCode.none]
    if elected:
        log.info("ElectLeaders (%s) from %s:%s elected new leaders of %s",
                 ELECTION_TYPES[election_type], ctx.client_host, ctx.client_port,
                 ", ".join(elected))
    return ctx.respond(response_data(version, outcomes))
