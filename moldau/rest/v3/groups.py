"""Consumer groups, their consumers and assignments, and lag.

* ``GET .../consumer-groups`` -> ``KafkaConsumerGroupList`` (groups of protocol type
  ``consumer`` and simple groups, as the Java admin's ``listConsumerGroups``)
* ``GET .../consumer-groups/{consumer_group_id}`` -> ``KafkaConsumerGroup`` (state in
  Confluent's spelling: STABLE, EMPTY, PREPARING_REBALANCE, ...); a group that does not exist
  (Kafka describes it as a simple, DEAD group) answers 404 / 404
* ``GET .../consumers``, ``.../consumers/{consumer_id}`` -> ``KafkaConsumer(List)``
* ``GET .../consumers/{consumer_id}/assignments[/{topic_name}/partitions/{partition_id}]`` ->
  ``KafkaConsumerAssignment(List)``
* ``GET .../lags[/{topic_name}/partitions/{partition_id}]`` -> ``KafkaConsumerLag(List)``:
  per partition with a committed offset: ``current_offset`` (committed), ``log_end_offset``
  (high watermark), ``lag`` and the consumer reading it ("" when nobody does)
* ``GET .../lag-summary`` -> ``KafkaConsumerGroupLagSummary``: the partition with the largest
  lag (the first one of them, by topic and partition) and the total lag. A group without
  committed offsets answers 404 ``Consumer group offsets could not be found.``.
"""

from __future__ import annotations

import re
from typing import Any

from aiohttp import web

from moldau.client import GroupDescription, MemberDescription, PartitionLag

from .context import Links, check_cluster, state
from .errors import endpoint, json_response, not_found

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def group_state(state_name: str) -> str:
    """Kafka's group state (``PreparingRebalance``) as Confluent spells it
    (``PREPARING_REBALANCE``); states it does not know are UNKNOWN."""
    spelled = _CAMEL.sub("_", state_name).upper()
    known = {"UNKNOWN", "PREPARING_REBALANCE", "COMPLETING_REBALANCE", "STABLE", "DEAD",
             "EMPTY"}
    return spelled if spelled in known else "UNKNOWN"


def _exists(group: GroupDescription) -> bool:
    return not (group.is_simple and group.state == "Dead")


def group_data(links: Links, group: GroupDescription) -> dict[str, Any]:
    """``KafkaConsumerGroup``."""
    g = group.group_id
    data = links.resource("KafkaConsumerGroup", ("consumer-groups", g),
                          (("consumer-group", g),))
    data.update({
        "cluster_id": links.cluster_id, "consumer_group_id": g, "is_simple": group.is_simple,
        "partition_assignor": group.protocol, "state": group_state(group.state),
    })
    if group.coordinator is not None:
        data["coordinator"] = links.related("brokers", group.coordinator.node_id)
    data["consumers"] = links.related("consumer-groups", g, "consumers")
    data["lag_summary"] = links.related("consumer-groups", g, "lag-summary")
    return data


def consumer_data(links: Links, group_id: str, member: MemberDescription) -> dict[str, Any]:
    """``KafkaConsumer``."""
    c = member.member_id
    data = links.resource("KafkaConsumer", ("consumer-groups", group_id, "consumers", c),
                          (("consumer-group", group_id), ("consumer", c)))
    data.update({
        "cluster_id": links.cluster_id, "consumer_group_id": group_id, "consumer_id": c,
        "instance_id": member.group_instance_id, "client_id": member.client_id,
        "assignments": links.related("consumer-groups", group_id, "consumers", c,
                                     "assignments"),
    })
    return data


def assignment_data(links: Links, group_id: str, consumer_id: str, topic: str,
                    partition: int) -> dict[str, Any]:
    """``KafkaConsumerAssignment``."""
    data = links.resource(
        "KafkaConsumerAssignment",
        ("consumer-groups", group_id, "consumers", consumer_id, "assignments", topic,
         "partitions", partition),
        (("consumer-group", group_id), ("consumer", consumer_id), ("assignment", topic),
         ("partition", partition)))
    data.update({
        "cluster_id": links.cluster_id, "consumer_group_id": group_id,
        "consumer_id": consumer_id, "topic_name": topic, "partition_id": partition,
        "partition": links.related("topics", topic, "partitions", partition),
        "lag": links.related("consumer-groups", group_id, "lags", topic, "partitions",
                             partition),
    })
    return data


def lag_data(links: Links, group_id: str, row: PartitionLag) -> dict[str, Any]:
    """``KafkaConsumerLag``."""
    t, p = row.topic, row.partition
    data = links.resource("KafkaConsumerLag",
                          ("consumer-groups", group_id, "lags", t, "partitions", p),
                          (("consumer-group", group_id), ("lag", t), ("partition", p)))
    data.update({
        "cluster_id": links.cluster_id, "consumer_group_id": group_id, "topic_name": t,
        "partition_id": p, "current_offset": row.committed,
        "log_end_offset": row.log_end_offset, "lag": row.lag, "consumer_id": row.member_id,
        "instance_id": row.group_instance_id, "client_id": row.client_id,
    })
    return data


async def find_group(request: web.Request) -> GroupDescription:
    """The group of the path; 404 when it does not exist."""
    group_id = request.match_info["consumer_group_id"]
    found = (await state(request).admin.describe_groups([group_id]))[group_id]
    if not isinstance(found, GroupDescription) or not _exists(found):
        raise not_found()
    return found


def find_member(group: GroupDescription, request: web.Request) -> MemberDescription:
    """The consumer of the path in ``group``; 404 when it is not a member."""
    wanted = request.match_info["consumer_id"]
    for member in group.members:
        if member.member_id == wanted:
            return member
    raise not_found()


async def lag_rows(request: web.Request, group: GroupDescription) -> list[PartitionLag]:
    """Rows with a committed offset and a known log end, by topic and partition."""
    rows = await state(request).admin.describe_group_lag(group.group_id)
    kept = [r for r in rows if r.committed is not None and r.log_end_offset >= 0]
    return sorted(kept, key=lambda r: (r.topic, r.partition))


@endpoint
async def list_groups(request: web.Request) -> web.StreamResponse:
    """``KafkaConsumerGroupList``."""
    links = Links(request, await check_cluster(request))
    admin = state(request).admin
    listed = [g.group_id for g in await admin.list_groups()
              if g.protocol_type in ("consumer", "")]
    described = await admin.describe_groups(sorted(listed), raise_errors=False) if listed else {}
    data = [group_data(links, g) for _, g in sorted(described.items())
            if isinstance(g, GroupDescription) and _exists(g)]
    return json_response(links.collection("KafkaConsumerGroupList", ("consumer-groups",),
                                          data))


@endpoint
async def get_group(request: web.Request) -> web.StreamResponse:
    """``KafkaConsumerGroup`` of the path."""
    links = Links(request, await check_cluster(request))
    return json_response(group_data(links, await find_group(request)))


@endpoint
async def list_consumers(request: web.Request) -> web.StreamResponse:
    """``KafkaConsumerList``: the group's members."""
    links = Links(request, await check_cluster(request))
    group = await find_group(request)
    members = sorted(group.members, key=lambda m: m.member_id)
    return json_response(links.collection(
        "KafkaConsumerList", ("consumer-groups", group.group_id, "consumers"),
        [consumer_data(links, group.group_id, m) for m in members]))


@endpoint
async def get_consumer(request: web.Request) -> web.StreamResponse:
    """``KafkaConsumer`` of the path."""
    links = Links(request, await check_cluster(request))
    group = await find_group(request)
    return json_response(consumer_data(links, group.group_id, find_member(group, request)))


@endpoint
async def list_assignments(request: web.Request) -> web.StreamResponse:
    """``KafkaConsumerAssignmentList``: the consumer's partitions."""
    links = Links(request, await check_cluster(request))
    group = await find_group(request)
    member = find_member(group, request)
    data = [assignment_data(links, group.group_id, member.member_id, tp.topic, tp.partition)
            for tp in sorted(member.assignment)]
    return json_response(links.collection(
        "KafkaConsumerAssignmentList",
        ("consumer-groups", group.group_id, "consumers", member.member_id, "assignments"),
        data))


@endpoint
async def get_assignment(request: web.Request) -> web.StreamResponse:
    """One assignment of the consumer; 404 when it does not hold it."""
    links = Links(request, await check_cluster(request))
    group = await find_group(request)
    member = find_member(group, request)
    topic = request.match_info["topic_name"]
    for tp in member.assignment:
        if tp.topic == topic and str(tp.partition) == request.match_info["partition_id"]:
            return json_response(assignment_data(links, group.group_id, member.member_id,
                                                 tp.topic, tp.partition))
    raise not_found()


@endpoint
async def list_lags(request: web.Request) -> web.StreamResponse:
    """``KafkaConsumerLagList``: lag per committed partition."""
    links = Links(request, await check_cluster(request))
    group = await find_group(request)
    rows = await lag_rows(request, group)
    return json_response(links.collection(
        "KafkaConsumerLagList", ("consumer-groups", group.group_id, "lags"),
        [lag_data(links, group.group_id, row) for row in rows]))


@endpoint
async def get_lag(request: web.Request) -> web.StreamResponse:
    """``KafkaConsumerLag`` of one partition; 404 without a committed offset."""
    links = Links(request, await check_cluster(request))
    group = await find_group(request)
    topic, partition = request.match_info["topic_name"], request.match_info["partition_id"]
    for row in await lag_rows(request, group):
        if row.topic == topic and str(row.partition) == partition:
            return json_response(lag_data(links, group.group_id, row))
    raise not_found()


@endpoint
async def get_lag_summary(request: web.Request) -> web.StreamResponse:
    """``KafkaConsumerGroupLagSummary``: the largest and the total lag."""
    links = Links(request, await check_cluster(request))
    group = await find_group(request)
    rows = await lag_rows(request, group)
    if not rows:
        raise not_found("Consumer group offsets could not be found.")
    top = max(rows, key=lambda r: r.lag or 0)  # the first of the largest
    g = group.group_id
    data = links.resource("KafkaConsumerGroupLagSummary", ("consumer-groups", g,
                                                           "lag-summary"), None)
    data["metadata"]["resource_name"] = links.crn(("consumer-groups", g)) + "/lag-summary"
    data.update({
        "cluster_id": links.cluster_id, "consumer_group_id": g,
        "max_lag_consumer_id": top.member_id, "max_lag_instance_id": top.group_instance_id,
        "max_lag_client_id": top.client_id, "max_lag_topic_name": top.topic,
        "max_lag_partition_id": top.partition, "max_lag": top.lag or 0,
        "total_lag": sum(r.lag or 0 for r in rows),
        "max_lag_consumer": links.related("consumer-groups", g, "consumers", top.member_id),
        "max_lag_partition": links.related("topics", top.topic, "partitions", top.partition),
    })
    return json_response(data)


_G = "/v3/clusters/{cluster_id}/consumer-groups"
_M = _G + "/{consumer_group_id}/consumers/{consumer_id}"
ROUTES = [
    ("GET", _G, list_groups),
    ("GET", _G + "/{consumer_group_id}", get_group),
    ("GET", _G + "/{consumer_group_id}/consumers", list_consumers),
    ("GET", _M, get_consumer),
    ("GET", _M + "/assignments", list_assignments),
    ("GET", _M + "/assignments/{topic_name}/partitions/{partition_id}", get_assignment),
    ("GET", _G + "/{consumer_group_id}/lags", list_lags),
    ("GET", _G + "/{consumer_group_id}/lags/{topic_name}/partitions/{partition_id}", get_lag),
    ("GET", _G + "/{consumer_group_id}/lag-summary", get_lag_summary),
]
