"""CreateTopics (key 19), versions 2-7.

Each topic is validated on its own (name, duplicates, '.'/'_' collisions, partitions,
replication factor against the live brokers, manual assignments, configs) and answered with
Kafka's error codes and a message that says what to change. ``num_partitions`` and
``replication_factor`` of -1 take ``num.partitions`` and ``default.replication.factor``.
A name given twice in one request gets INVALID_REQUEST "Duplicate topic name." (once), as
Kafka answers. The internal topics (``__consumer_offsets``, ``__transaction_state``) are
created by the broker itself when first needed; clients asking for them get INVALID_REQUEST.
A broker that is not the controller creates them by forwarding CreateTopics to the controller
(its client id says so, ``metadata.forwarding.forwarded_by``), which is let through, as
Kafka's brokers create internal topics through the controller (AutoTopicCreationManager).

From v5 the answer carries the topic id, partition count, replication factor and the topic's
effective configs with their sources (sorted by name, as Kafka's controller lists them);
``validate_only`` answers the same without creating anything (topic id all zeros).
Creation is synchronous, so ``timeout`` never expires. The logs of a topic's partitions are
created before its records are committed (all or none), and a topic's records go to the
metadata log in one batch; topics share batches up to the 8 MiB metadata batch limit. A topic
whose records alone exceed it answers RECORD_LIST_TOO_LARGE (``validate_only`` too); one whose
logs cannot be created (no disk space or file descriptor left) answers KAFKA_STORAGE_ERROR
with the reason, and nothing of it is left behind.

In a cluster the change is made by the active controller (this broker's, or forwarded to
it); a request forwarded by another broker that reaches a broker which is not the
active controller answers NOT_CONTROLLER for every entry, so the sender retries there.

Left out: CreateTopicPolicy (POLICY_VIOLATION is used only for the partitions-per-request
limit), controller mutation quotas (throttle time is always 0), ACL checks.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Mapping
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, handler
from ..metadata import forwarding
from ..metadata.configs import topic_entries
from ..metadata.controller import TopicResult, TopicSpec
from ..metadata.forwarding import NOT_CONTROLLER_MESSAGE, misdirected
from ..metadata.validation import INTERNAL_TOPICS

_ZERO_UUID = uuid.UUID(int=0)


def _spec(topic: Any) -> TopicSpec:
    return TopicSpec(
        name=topic.name,
        num_partitions=topic.num_partitions,
        replication_factor=topic.replication_factor,
        assignments={a.partition_index: list(a.broker_ids) for a in topic.assignments},
        configs={c.name: c.value for c in topic.configs},
    )


def _error(name: str, code: ErrorCode, message: str) -> dict[str, Any]:
    return {"name": name, "topic_id": _ZERO_UUID, "error_code": code, "error_message": message,
            "num_partitions": -1, "replication_factor": -1, "configs": []}


@handler(ApiKey.CREATE_TOPICS, 2, 7)
async def handle_create_topics(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    if misdirected(ctx.header.client_id, broker.controller_id, broker.node_id):
        return ctx.respond({"throttle_time": 0, "topics": [
            _error(t.name, ErrorCode.not_controller, NOT_CONTROLLER_MESSAGE)
            for t in request.topics]})
    counts = Counter(t.name for t in request.topics)
    answers: list[dict[str, Any] | None] = []  # in request order; None = ask the controller
    specs: list[TopicSpec] = []
    for topic in request.topics:
        answer = _refusal(topic, counts, broker.image.topics_by_name,
                          forwarded=forwarding.forwarded_by(ctx.header.client_id) is not None)
        answers.append(answer)
        if answer is None:
            specs.append(_spec(topic))
    results = await broker.controller.create_topics(specs, validate_only=request.validate_only)
    done = iter(zip(results, specs, strict=True))
    for i, answer in enumerate(answers):
        if answer is None:
            answers[i] = _created(ctx, *next(done))
    # A duplicated name is answered once (the other entries are dropped), as Kafka does.
    answered: set[str] = set()
    unique = []
    for entry in answers:
        assert entry is not None
        if counts[entry["name"]] > 1:
            if entry["name"] in answered:
                continue
            answered.add(entry["name"])
        unique.append(entry)
    return ctx.respond({"throttle_time": 0, "topics": unique})


def _refusal(topic: Any, counts: Counter[str], existing: Mapping[str, Any], *,
             forwarded: bool = False) -> dict[str, Any] | None:
    """The answer for a topic refused before it reaches the controller, else None
    (``forwarded``: another broker sent the request on its own behalf)."""
    if counts[topic.name] > 1:
        return _error(topic.name, ErrorCode.invalid_request, "Duplicate topic name.")
    indexes = [a.partition_index for a in topic.assignments]
    if len(set(indexes)) != len(indexes):
        repeated = sorted(i for i, n in Counter(indexes).items() if n > 1)
        return _error(topic.name, ErrorCode.invalid_replica_assignment,
                      f"Found multiple manual partition assignments for partition(s) "
                      f"{repeated}")
    if topic.name in INTERNAL_TOPICS and topic.name not in existing and not forwarded:
        return _error(topic.name, ErrorCode.invalid_request,
                      f"Topic '{topic.name}' is internal: the broker creates it when it is "
                      f"first needed, clients cannot create it.")
    return None


def _created(ctx: RequestContext, result: TopicResult, spec: TopicSpec) -> dict[str, Any]:
    """The answer for a topic the controller created (or validated, or refused)."""
    if result.error != ErrorCode.none:
        return _error(result.name, result.error, result.message or "")
    configs = topic_entries(ctx.broker.image, ctx.broker.config, spec.name,
                            overrides={k: v for k, v in spec.configs.items() if v is not None})
    return {
        "name": result.name,
        "topic_id": result.topic_id or _ZERO_UUID,
        "error_code": ErrorCode.none,
        "error_message": None,
        "num_partitions": result.num_partitions,
        "replication_factor": result.replication_factor,
        "configs": [{"name": e.name, "value": None if e.sensitive else e.value,
                     "read_only": e.read_only, "config_source": int(e.source),
                     "is_sensitive": e.sensitive} for e in configs],
    }
