"""Clusters: ``GET /v3/clusters`` and ``GET /v3/clusters/{cluster_id}``.

The proxy knows one cluster, the one behind ``bootstrap.servers`` (as Confluent's); its id is
the one DescribeCluster reports. Another id answers 404 ``Cluster X cannot be found.``.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .context import Links, base_url, check_cluster, state
from .errors import endpoint, json_response


async def _cluster_data(request: web.Request, links: Links) -> dict[str, Any]:
    info = await state(request).admin.describe_cluster()
    data: dict[str, Any] = links.resource("KafkaCluster", (), ())
    data["cluster_id"] = links.cluster_id
    if info.controller_id >= 0:
        data["controller"] = links.related("brokers", info.controller_id)
    data.update({
        "acls": links.related("acls"),
        "brokers": links.related("brokers"),
        "broker_configs": links.related("broker-configs"),
        "consumer_groups": links.related("consumer-groups"),
        "topics": links.related("topics"),
        "partition_reassignments": links.related("topics", "-", "partitions", "-",
                                                 "reassignment"),
    })
    return data


@endpoint
async def list_clusters(request: web.Request) -> web.StreamResponse:
    """``KafkaClusterList`` with the one cluster."""
    cluster_id = await state(request).local_cluster_id()
    links = Links(request, cluster_id)
    return json_response({
        "kind": "KafkaClusterList",
        "metadata": {"self": f"{base_url(request)}/v3/clusters", "next": None},
        "data": [await _cluster_data(request, links)],
    })


@endpoint
async def get_cluster(request: web.Request) -> web.StreamResponse:
    """``KafkaCluster``."""
    links = Links(request, await check_cluster(request))
    return json_response(await _cluster_data(request, links))


ROUTES = [
    ("GET", "/v3/clusters", list_clusters),
    ("GET", "/v3/clusters/{cluster_id}", get_cluster),
]
