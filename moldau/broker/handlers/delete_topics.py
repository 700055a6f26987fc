"""DeleteTopics (key 20), versions 1-6.

Topics are named by name, or (v6) by topic id; unknown names answer
UNKNOWN_TOPIC_OR_PARTITION, unknown ids UNKNOWN_TOPIC_ID. A v6 entry with both a name and an
id, or with neither, and names or ids given twice answer INVALID_REQUEST with Kafka's
messages. With ``delete.topic.enable=false`` every topic answers TOPIC_DELETION_DISABLED
(INVALID_REQUEST below v3, as Kafka). The internal topics ``__consumer_offsets`` and
``__transaction_state`` cannot be deleted (INVALID_REQUEST): groups and transactions live in
them.

The deletions are one batch of RemoveTopicRecords in the metadata log; the replica manager
renames the logs to ``...-delete`` at once and they are removed from disk after
``file.delete.delay.ms`` (60 s by default). Deletion is synchronous, so ``timeout`` never
expires; if the metadata log cannot be written (disk full) every deletion answers
KAFKA_STORAGE_ERROR.

In a cluster the change is made by the active controller (this broker's, or forwarded to
it); a request forwarded by another broker that reaches a broker which is not the
active controller answers NOT_CONTROLLER for every entry, so the sender retries there.

Left out: ACL checks, controller mutation quotas (throttle time is always 0), and Kafka's
shuffling of the answer order (refused entries are answered first, then the deletions, each
in request order).
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ..dispatch import RequestContext, handler
from ..metadata.forwarding import NOT_CONTROLLER_MESSAGE, misdirected
from ..metadata.validation import INTERNAL_TOPICS

_ZERO_UUID = uuid.UUID(int=0)


def _entries(request: Any, version: int) -> list[tuple[str | None, uuid.UUID | None]]:
    """(name, id) of every topic in the request, whatever the version's layout."""
    if version >= 6:
        return [(t.name, t.topic_id if t.topic_id not in (None, _ZERO_UUID) else None)
                for t in request.topics]
    return [(name, None) for name in request.topic_names]


def _answer(name: str | None, topic_id: uuid.UUID | None, code: ErrorCode,
            message: str | None) -> dict[str, Any]:
    return {"name": name, "topic_id": topic_id or _ZERO_UUID, "error_code": code,
            "error_message": message}


@handler(ApiKey.DELETE_TOPICS, 1, 6)
async def handle_delete_topics(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    image = broker.image
    entries = _entries(request, ctx.version)
    if misdirected(ctx.header.client_id, broker.controller_id, broker.node_id):
        return ctx.respond({"throttle_time": 0, "responses": [
            _answer(name, topic_id, ErrorCode.not_controller, NOT_CONTROLLER_MESSAGE)
            for name, topic_id in entries]})
    if not broker.config["delete.topic.enable"]:
        code = (ErrorCode.topic_deletion_disabled if ctx.version >= 3
                else ErrorCode.invalid_request)
        message = ("Topic deletion is disabled: set delete.topic.enable=true on the broker to "
                   "allow it.")
        return ctx.respond({"throttle_time": 0, "responses": [
            _answer(name, topic_id, code, message) for name, topic_id in entries]})

    names = Counter(name for name, topic_id in entries if name is not None and topic_id is None)
    ids = Counter(topic_id for name, topic_id in entries if name is None and topic_id)
    answers: list[dict[str, Any]] = []
    to_delete: list[str] = []
    duplicates_answered: set[str | uuid.UUID] = set()
    for name, topic_id in entries:
        if name is not None and topic_id is not None:
            answers.append(_answer(name, topic_id, ErrorCode.invalid_request,
                                   "You may not specify both topic name and topic id."))
        elif name is None and topic_id is None:
            answers.append(_answer(None, None, ErrorCode.invalid_request,
                                   "Neither topic name nor id were specified."))
        elif name is not None:
            if names[name] > 1:
                if name not in duplicates_answered:
                    duplicates_answered.add(name)
                    answers.append(_answer(name, None, ErrorCode.invalid_request,
                                           "Duplicate topic name."))
                continue
            to_delete.append(name)
        else:
            assert topic_id is not None
            if ids[topic_id] > 1:
                if topic_id not in duplicates_answered:
                    duplicates_answered.add(topic_id)
                    answers.append(_answer(None, topic_id, ErrorCode.invalid_request,
                                           "Duplicate topic id."))
                continue
            topic = image.topics_by_id.get(topic_id)
            if topic is None:
                answers.append(_answer(None, topic_id, ErrorCode.unknown_topic_id,
                                       f"Topic id {topic_id} does not exist."))
                continue
            to_delete.append(topic.name)

    names_to_delete: list[str] = []
    claimed: set[str] = set()
    for name in to_delete:
        topic = image.topics_by_name.get(name)
        topic_id = topic.topic_id if topic is not None else None
        if name in claimed:
            answers.append(_answer(name, topic_id, ErrorCode.invalid_request,
                                   "The provided topic name maps to an ID that was already "
                                   "supplied."))
            continue
        claimed.add(name)
        if topic is not None and name in INTERNAL_TOPICS:
            answers.append(_answer(name, topic_id, ErrorCode.invalid_request,
                                   f"Topic '{name}' is internal and cannot be deleted."))
            continue
        names_to_delete.append(name)
    ids_before = {name: image.topics_by_name[name].topic_id
                  for name in names_to_delete if name in image.topics_by_name}
    results = await broker.controller.delete_topics(names_to_delete)
    for name in names_to_delete:
        code, message = results[name]
        answers.append(_answer(name, ids_before.get(name), code, message))
    return ctx.respond({"throttle_time": 0, "responses": answers})
