"""Topics: list, create (also as a dry run), get, grow, delete.

* ``GET .../topics`` -> ``KafkaTopicList``, sorted by name, internal topics left out (as the
  Java admin client's ``listTopics()``)
* ``POST .../topics`` with ``topic_name``, optional ``partitions_count``,
  ``replication_factor`` (the broker's defaults when absent), ``replicas_assignments``
  (``[{"partition_id": 0, "broker_ids": [1]}]``, which then fixes both counts), ``configs``
  (``[{"name": ..., "value": ...}]``) and ``validate_only``: 201 with the ``KafkaTopic`` and a
  ``Location`` header; with ``validate_only`` true the broker only validates (200, nothing
  created). A topic that exists answers 400 / 40002 ``Topic 'x' already exists.``; a bad
  name, count, factor or config 400 / 40002 with the broker's message.
* ``GET .../topics/{topic_name}`` -> ``KafkaTopic``; unknown -> 404 / 40403
* ``PATCH .../topics/{topic_name}`` with ``partitions_count``: grows the topic (CreatePartitions)
  and answers the ``KafkaTopic``; fewer partitions than now -> 400 / 40002
* ``DELETE .../topics/{topic_name}`` -> 204

``replication_factor`` is the replica count of partition 0, as Confluent reports it.
Left out: ``include_authorized_operations`` (no authorizer yet: the field is not sent).
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from moldau.client import AdminError, ConfigResource, NewTopic, TopicInfo

from .body import get_bool, get_int, get_list, get_objects, get_str, read_object
from .context import Links, check_cluster, describe_topic, state
from .errors import V3Error, endpoint, json_response


def topic_data(links: Links, name: str, *, internal: bool, replication_factor: int,
               partitions_count: int) -> dict[str, Any]:
    """``KafkaTopic``."""
    data = links.resource("KafkaTopic", ("topics", name), (("topic", name),))
    data.update({
        "cluster_id": links.cluster_id,
        "topic_name": name,
        "is_internal": internal,
        "replication_factor": replication_factor,
        "partitions_count": partitions_count,
        "partitions": links.related("topics", name, "partitions"),
        "configs": links.related("topics", name, "configs"),
        "partition_reassignments": links.related("topics", name, "partitions", "-",
                                                 "reassignment"),
    })
    return data


def from_info(links: Links, info: TopicInfo) -> dict[str, Any]:
    """``KafkaTopic`` of a described topic."""
    first = info.partitions.get(0) or next(iter(info.partitions.values()), None)
    return topic_data(links, info.name, internal=info.is_internal,
                      replication_factor=len(first.replicas) if first else 0,
                      partitions_count=len(info.partitions))


@endpoint
async def list_topics(request: web.Request) -> web.StreamResponse:
    """``KafkaTopicList`` (internal topics left out)."""
    links = Links(request, await check_cluster(request))
    topics = await state(request).admin.list_topics()
    return json_response(links.collection(
        "KafkaTopicList", ("topics",),
        [from_info(links, info) for _, info in sorted(topics.items())]))


@endpoint
async def get_topic(request: web.Request) -> web.StreamResponse:
    """``KafkaTopic`` of the path."""
    links = Links(request, await check_cluster(request))
    return json_response(from_info(links, await describe_topic(
        request, request.match_info["topic_name"])))


def _assignments(items: list[dict[str, Any]]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for item in items:
        partition = get_int(item, "partition_id", required=True)
        brokers = get_list(item, "broker_ids")
        if not brokers or not all(isinstance(b, int) and not isinstance(b, bool)
                                  for b in brokers):
            raise V3Error(400, 400, "Bad Request: broker_ids must be a list of broker ids.")
        assert partition is not None
        out[partition] = brokers
    return out


def _configs(items: list[dict[str, Any]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name = get_str(item, "name", required=True)
        value = get_str(item, "value")
        assert name is not None
        if value is not None:
            out[name] = value
    return out


async def _broker_default(request: web.Request, key: str) -> int:
    """A broker default (``num.partitions``, ``default.replication.factor``) for a dry run."""
    admin = state(request).admin
    brokers = await admin.describe_brokers()
    if not brokers:
        return -1
    resource = ConfigResource.broker(min(brokers))
    entries = (await admin.describe_configs([resource], keys=[key]))[resource]
    entry = entries.get(key)
    try:
        return int(entry.value) if entry is not None and entry.value is not None else -1
    except ValueError:
        return -1


async def _created(request: web.Request, name: str) -> TopicInfo | None:
    """The new topic's metadata, once the cluster reports its partitions (a few tries)."""
    admin = state(request).admin
    for _ in range(20):
        try:
            info = (await admin.describe_topics([name]))[name]
        except AdminError:
            info = None
        if info is not None and info.partitions:
            return info
        await asyncio.sleep(0.05)
    return None


@endpoint
async def create_topic(request: web.Request) -> web.StreamResponse:
    """Create a topic (201), or only validate it (200)."""
    links = Links(request, await check_cluster(request))
    body = await read_object(request)
    name = get_str(body, "topic_name", required=True)
    assert name is not None
    partitions = get_int(body, "partitions_count")
    factor = get_int(body, "replication_factor")
    assignment = _assignments(get_objects(body, "replicas_assignments"))
    configs = _configs(get_objects(body, "configs"))
    validate_only = get_bool(body, "validate_only")
    if assignment:
        partitions = len(assignment)
        factor = len(next(iter(assignment.values())))
    new = NewTopic(name, -1 if partitions is None else partitions,
                   -1 if factor is None else factor, configs, assignment or None)
    await state(request).admin.create_topics([new], validate_only=validate_only)
    info = None if validate_only else await _created(request, name)
    if info is not None:
        data = from_info(links, info)
    else:
        if partitions is None:
            partitions = await _broker_default(request, "num.partitions")
        if factor is None:
            factor = await _broker_default(request, "default.replication.factor")
        data = topic_data(links, name, internal=False, replication_factor=factor,
                          partitions_count=partitions)
    return json_response(data, 200 if validate_only else 201,
                         headers={"Location": data["metadata"]["self"]})


@endpoint
async def update_partitions(request: web.Request) -> web.StreamResponse:
    """``PATCH {"partitions_count": n}``: grow the topic."""
    links = Links(request, await check_cluster(request))
    name = request.match_info["topic_name"]
    body = await read_object(request, required=False)
    if not body:
        raise V3Error(400, 400,
                      "Bad Request: Request body is empty. Partitions_count is required.")
    count = get_int(body, "partitions_count", required=True)
    assert count is not None
    await describe_topic(request, name)
    await state(request).admin.create_partitions({name: count})
    info = await describe_topic(request, name)
    for _ in range(20):
        if len(info.partitions) >= count:
            break
        await asyncio.sleep(0.05)
        info = await describe_topic(request, name)
    return json_response(from_info(links, info))


@endpoint
async def delete_topic(request: web.Request) -> web.StreamResponse:
    """Delete the topic (204)."""
    await check_cluster(request)
    name = request.match_info["topic_name"]
    await state(request).admin.delete_topics([name])
    state(request).admin.cluster.wanted_topics.discard(name)
    return web.Response(status=204)


ROUTES = [
    ("GET", "/v3/clusters/{cluster_id}/topics", list_topics),
    ("POST", "/v3/clusters/{cluster_id}/topics", create_topic),
    ("GET", "/v3/clusters/{cluster_id}/topics/{topic_name}", get_topic),
    ("PATCH", "/v3/clusters/{cluster_id}/topics/{topic_name}", update_partitions),
    ("DELETE", "/v3/clusters/{cluster_id}/topics/{topic_name}", delete_topic),
]
