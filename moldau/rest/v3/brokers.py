"""Brokers: list, get, and the replicas a broker holds.

* ``GET /v3/clusters/{cluster_id}/brokers`` -> ``KafkaBrokerList`` (sorted by id)
* ``GET /v3/clusters/{cluster_id}/brokers/{broker_id}`` -> ``KafkaBroker``; an unknown or
  non-numeric id answers 404 / 404
* ``GET /v3/clusters/{cluster_id}/brokers/{broker_id}/partition-replicas`` ->
  ``KafkaReplicaList`` of every partition replica on that broker

``host``/``port`` are what the cluster advertises (before ``client.address.map`` rewrites).
Broker configs are in :mod:`.configs`.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from moldau.client import BrokerInfo

from .context import Links, check_cluster, state
from .errors import endpoint, json_response, not_found
from .partitions import replica_data


def broker_data(links: Links, broker: BrokerInfo) -> dict[str, Any]:
    """``KafkaBroker`` of one broker."""
    node = broker.node_id
    host, port = broker.advertised or (broker.host, broker.port)
    data = links.resource("KafkaBroker", ("brokers", node), (("broker", node),))
    data.update({
        "cluster_id": links.cluster_id,
        "broker_id": node,
        "host": host,
        "port": port,
        "rack": broker.rack,
        "configs": links.related("brokers", node, "configs"),
        "partition_replicas": links.related("brokers", node, "partition-replicas"),
    })
    return data


def broker_id(request: web.Request) -> int:
    """The ``broker_id`` path parameter; not a number -> 404 (as JAX-RS)."""
    try:
        return int(request.match_info["broker_id"])
    except ValueError:
        raise not_found() from None


async def find_broker(request: web.Request) -> BrokerInfo:
    """The broker of the path; 404 when the cluster has no such broker."""
    wanted = broker_id(request)
    brokers = await state(request).admin.describe_brokers()
    if wanted not in brokers:
        raise not_found()
    return brokers[wanted]


@endpoint
async def list_brokers(request: web.Request) -> web.StreamResponse:
    """``KafkaBrokerList`` of every broker, by id."""
    links = Links(request, await check_cluster(request))
    brokers = await state(request).admin.describe_brokers()
    return json_response(links.collection(
        "KafkaBrokerList", ("brokers",),
        [broker_data(links, brokers[node]) for node in sorted(brokers)]))


@endpoint
async def get_broker(request: web.Request) -> web.StreamResponse:
    """``KafkaBroker`` of the broker of the path."""
    links = Links(request, await check_cluster(request))
    return json_response(broker_data(links, await find_broker(request)))


@endpoint
async def list_broker_replicas(request: web.Request) -> web.StreamResponse:
    """``KafkaReplicaList``: the replicas on the broker of the path."""
    links = Links(request, await check_cluster(request))
    node = (await find_broker(request)).node_id
    topics = await state(request).admin.list_topics(include_internal=True)
    data = [replica_data(links, info, node)
            for _name, topic in sorted(topics.items())
            for _index, info in sorted(topic.partitions.items()) if node in info.replicas]
    return json_response(links.collection(
        "KafkaReplicaList", ("brokers", node, "partition-replicas"), data))


ROUTES = [
    ("GET", "/v3/clusters/{cluster_id}/brokers", list_brokers),
    ("GET", "/v3/clusters/{cluster_id}/brokers/{broker_id}", get_broker),
    ("GET", "/v3/clusters/{cluster_id}/brokers/{broker_id}/partition-replicas",
     list_broker_replicas),
]
