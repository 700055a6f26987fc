"""CreateTopics (key 19), versions 2-7.

Each topic is validated on its own (name, duplicates, '.'/'_' collisions, partitions,
replication factor against the live brokers, manual assignments, configs) and answered with
Kafka's error codes and a message that says what to change. ``num_partitions`` and
``replication_factor`` of -1 take ``num.partitions`` and ``default.replication.factor``.
A name given twice in one request gets INVALID_REQUEST "Duplicate topic name." (once), as
Kafka answers. The internal topics (``__consumer_offsets``, ``__transaction_state``) are
created by the broker itself when first needed; clients asking for them get INVALID_REQUEST.

From v5 the answer carries the topic id, partition count, replication factor and the topic's
effective configs with their sources (sorted by name, as Kafka's controller lists them);
``validate_only`` answers the same without creating anything (topic id all zeros).
Creation is synchronous, so ``timeout`` never expires. The topics created are committed to
the metadata log as one batch.

Left out: CreateTopicPolicy (POLICY_VIOLATION is used only for the partitions-per-request
limit), controller mutation quotas (throttle time is always 0), ACL checks.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, handler
from ..metadata.configs import topic_entries
from ..metadata.controller import TopicSpec
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
def handle_create_topics(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    counts = Counter(t.name for t in request.topics)
    duplicates = [name for name, n in counts.items() if n > 1]
    specs: list[TopicSpec] = []
    answers: list[dict[str, Any]] = []
    for topic in request.topics:
        if counts[topic.name] > 1:
            continue
        if topic.name in INTERNAL_TOPICS and topic.name not in broker.image.topics_by_name:
            answers.append(_error(
                topic.name, ErrorCode.invalid_request,
                f"Topic '{topic.name}' is internal: the broker creates it when it is first "
                f"needed, clients cannot create it."))
            continue
        specs.append(_spec(topic))
    results = broker.controller.create_topics(specs, validate_only=request.validate_only)
    for spec, result in zip(specs, results, strict=True):
        if result.error != ErrorCode.none:
            answers.append(_error(result.name, result.error, result.message or ""))
            continue
        configs = topic_entries(broker.image, broker.config, spec.name,
                                overrides={k: v for k, v in spec.configs.items()
                                           if v is not None})
        answers.append({
            "name": result.name,
            "topic_id": result.topic_id or _ZERO_UUID,
            "error_code": ErrorCode.none,
            "error_message": None,
            "num_partitions": result.num_partitions,
            "replication_factor": result.replication_factor,
            "configs": [{"name": e.name, "value": None if e.sensitive else e.value,
                         "read_only": e.read_only, "config_source": int(e.source),
                         "is_sensitive": e.sensitive} for e in configs],
        })
    for name in duplicates:
        answers.append(_error(name, ErrorCode.invalid_request, "Duplicate topic name."))
    return ctx.respond({"throttle_time": 0, "topics": answers})
