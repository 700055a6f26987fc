"""Partitions, their replicas and reassignments in progress.

* ``GET .../topics/{topic_name}/partitions`` -> ``KafkaPartitionList``
* ``GET .../topics/{topic_name}/partitions/{partition_id}`` -> ``KafkaPartition``
* ``GET .../topics/{topic_name}/partitions/{partition_id}/replicas`` -> ``KafkaReplicaList``
* ``GET .../topics/{topic_name}/partitions/{partition_id}/replicas/{broker_id}`` ->
  ``KafkaReplica``
* ``GET .../topics/-/partitions/-/reassignment``, ``.../topics/{topic_name}/partitions/-/
  reassignment`` -> ``KafkaReassignmentList`` (only partitions being reassigned);
  ``.../partitions/{partition_id}/reassignment`` -> ``KafkaReassignment`` or 404 when that
  partition is not being reassigned (ListPartitionReassignments, KIP-455)

An unknown topic answers 404 / 40403; an unknown partition or replica 404 / 404.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from moldau.client import PartitionInfo, PartitionReassignment, TopicInfo, TopicPartition

from .context import Links, check_cluster, describe_topic, state
from .errors import endpoint, json_response, not_found


def partition_data(links: Links, info: PartitionInfo) -> dict[str, Any]:
    """``KafkaPartition`` of one partition."""
    t, p = info.topic, info.partition
    data = links.resource("KafkaPartition", ("topics", t, "partitions", p),
                          (("topic", t), ("partition", p)))
    data.update({"cluster_id": links.cluster_id, "topic_name": t, "partition_id": p})
    if info.leader >= 0:
        data["leader"] = links.related("topics", t, "partitions", p, "replicas", info.leader)
    data["replicas"] = links.related("topics", t, "partitions", p, "replicas")
    data["reassignment"] = links.related("topics", t, "partitions", p, "reassignment")
    return data


def replica_data(links: Links, info: PartitionInfo, broker: int) -> dict[str, Any]:
    """``KafkaReplica``: the replica of ``info`` on ``broker``."""
    t, p = info.topic, info.partition
    data = links.resource("KafkaReplica", ("topics", t, "partitions", p, "replicas", broker),
                          (("topic", t), ("partition", p), ("replica", broker)))
    data.update({
        "cluster_id": links.cluster_id, "topic_name": t, "partition_id": p,
        "broker_id": broker, "is_leader": broker == info.leader,
        "is_in_sync": broker in info.isr, "broker": links.related("brokers", broker),
    })
    return data


def reassignment_data(links: Links, tp: TopicPartition,
                      moving: PartitionReassignment) -> dict[str, Any]:
    """``KafkaReassignment`` of one partition being reassigned."""
    t, p = tp
    data = links.resource("KafkaReassignment", ("topics", t, "partitions", p, "reassignment"),
                          None)
    data["metadata"]["resource_name"] = links.crn(("topic", t), ("partition", p)) + (
        "/reassignment")
    data.update({
        "cluster_id": links.cluster_id, "topic_name": t, "partition_id": p,
        "adding_replicas": list(moving.adding_replicas),
        "removing_replicas": list(moving.removing_replicas),
        "replicas": links.related("topics", t, "partitions", p, "replicas"),
    })
    return data


def _int_param(request: web.Request, name: str) -> int:
    try:
        return int(request.match_info[name])
    except ValueError:
        raise not_found() from None


def find_partition(topic: TopicInfo, request: web.Request) -> PartitionInfo:
    """The ``partition_id`` of the path in ``topic``; 404 when it has no such partition."""
    index = _int_param(request, "partition_id")
    if index not in topic.partitions:
        raise not_found()
    return topic.partitions[index]


async def _partition(request: web.Request) -> tuple[Links, PartitionInfo]:
    links = Links(request, await check_cluster(request))
    topic = await describe_topic(request, request.match_info["topic_name"])
    return links, find_partition(topic, request)


@endpoint
async def list_partitions(request: web.Request) -> web.StreamResponse:
    """``KafkaPartitionList`` of the topic."""
    links = Links(request, await check_cluster(request))
    name = request.match_info["topic_name"]
    topic = await describe_topic(request, name)
    return json_response(links.collection(
        "KafkaPartitionList", ("topics", name, "partitions"),
        [partition_data(links, info) for _, info in sorted(topic.partitions.items())]))


@endpoint
async def get_partition(request: web.Request) -> web.StreamResponse:
    """``KafkaPartition`` of the path."""
    links, info = await _partition(request)
    return json_response(partition_data(links, info))


@endpoint
async def list_replicas(request: web.Request) -> web.StreamResponse:
    """``KafkaReplicaList`` of the partition."""
    links, info = await _partition(request)
    return json_response(links.collection(
        "KafkaReplicaList", ("topics", info.topic, "partitions", info.partition, "replicas"),
        [replica_data(links, info, broker) for broker in info.replicas]))


@endpoint
async def get_replica(request: web.Request) -> web.StreamResponse:
    """``KafkaReplica`` on the broker of the path."""
    links, info = await _partition(request)
    broker = _int_param(request, "broker_id")
    if broker not in info.replicas:
        raise not_found()
    return json_response(replica_data(links, info, broker))


async def _reassignments(request: web.Request, partitions: list[TopicPartition] | None
                         ) -> dict[TopicPartition, PartitionReassignment]:
    return await state(request).admin.list_partition_reassignments(partitions)


@endpoint
async def list_all_reassignments(request: web.Request) -> web.StreamResponse:
    """Every reassignment in progress."""
    links = Links(request, await check_cluster(request))
    moving = await _reassignments(request, None)
    return json_response(links.collection(
        "KafkaReassignmentList", ("topics", "-", "partitions", "-", "reassignment"),
        [reassignment_data(links, tp, moving[tp]) for tp in sorted(moving)]))


@endpoint
async def list_topic_reassignments(request: web.Request) -> web.StreamResponse:
    """The topic's reassignments in progress."""
    links = Links(request, await check_cluster(request))
    name = request.match_info["topic_name"]
    topic = await describe_topic(request, name)
    moving = await _reassignments(
        request, [TopicPartition(name, p) for p in sorted(topic.partitions)])
    return json_response(links.collection(
        "KafkaReassignmentList", ("topics", name, "partitions", "-", "reassignment"),
        [reassignment_data(links, tp, moving[tp]) for tp in sorted(moving)]))


@endpoint
async def get_reassignment(request: web.Request) -> web.StreamResponse:
    """The partition's reassignment; 404 when none is running."""
    links, info = await _partition(request)
    tp = TopicPartition(info.topic, info.partition)
    moving = await _reassignments(request, [tp])
    if tp not in moving:
        raise not_found()
    return json_response(reassignment_data(links, tp, moving[tp]))


_TOPIC = "/v3/clusters/{cluster_id}/topics/{topic_name}/partitions"
ROUTES = [
    ("GET", "/v3/clusters/{cluster_id}/topics/-/partitions/-/reassignment",
     list_all_reassignments),
    ("GET", _TOPIC + "/-/reassignment", list_topic_reassignments),
    ("GET", _TOPIC, list_partitions),
    ("GET", _TOPIC + "/{partition_id}", get_partition),
    ("GET", _TOPIC + "/{partition_id}/replicas", list_replicas),
    ("GET", _TOPIC + "/{partition_id}/replicas/{broker_id}", get_replica),
    ("GET", _TOPIC + "/{partition_id}/reassignment", get_reassignment),
]
