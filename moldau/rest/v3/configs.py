"""Topic, broker and cluster-wide broker configs: list, get, set, reset, batch alter.

Three resources, one shape (``AbstractConfigData``: name, value, is_default, is_read_only,
is_sensitive, source, synonyms):

* topic configs ``.../topics/{topic_name}/configs[/{name}]`` (``KafkaTopicConfig``), and
  ``.../topics/-/configs`` for every topic at once;
* a broker's configs ``.../brokers/{broker_id}/configs[/{name}]`` (``KafkaBrokerConfig``), and
  ``.../brokers/-/configs`` for every broker;
* the cluster-wide dynamic broker defaults ``.../broker-configs[/{name}]``
  (``KafkaClusterConfig``, ``config_type`` BROKER; Kafka's BROKER resource named "").

``GET`` lists or reads (DescribeConfigs with synonyms); ``PUT`` with ``{"value": ...}`` sets
one key and ``DELETE`` resets it (IncrementalAlterConfigs SET / DELETE), both 204;
``POST ...configs:alter`` with ``{"data": [{"name", "value", "operation": "SET"|"DELETE"}],
"validate_only": bool}`` applies a batch atomically per resource (204; with validate_only the
broker only validates). As Confluent's proxy, a topic or broker key that does not exist
answers 404 ``Config X cannot be found for TOPIC t in cluster c.`` before anything is sent;
cluster-wide keys are sent as they are (the list only holds keys that are set).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from moldau.client import AlterConfigOp, AlterOp, ConfigEntry, ConfigResource, ResourceType
from moldau.protocol.config_source import ConfigSource

from .body import get_bool, get_objects, get_str, read_object
from .brokers import find_broker
from .context import Links, check_cluster, describe_topic, state
from .errors import V3Error, endpoint, json_response, not_found


def _source(value: int) -> str:
    try:
        return ConfigSource(value).name
    except ValueError:
        return "UNKNOWN"


class Target:
    """One config resource as the API names it."""

    def __init__(self, resource: ConfigResource, kind: str, segments: tuple[str | int, ...],
                 crn: tuple[tuple[str, str | int], ...], extra: dict[str, Any]) -> None:
        self.resource = resource
        self.kind = kind
        self.segments = segments
        self.crn = crn
        self.extra = extra

    def data(self, links: Links, entry: ConfigEntry) -> dict[str, Any]:
        """The config entry as its resource kind."""
        data = links.resource(self.kind, (*self.segments, entry.name),
                              (*self.crn, ("config", entry.name)))
        if self.resource.type == ResourceType.BROKER and not self.resource.name:
            data["metadata"]["resource_name"] = links.crn(("broker-config", entry.name))
        data["cluster_id"] = links.cluster_id
        data.update(self.extra)
        data.update({
            "name": entry.name, "value": entry.value, "is_default": entry.is_default,
            "is_read_only": entry.read_only, "is_sensitive": entry.is_sensitive,
            "source": _source(entry.source),
            "synonyms": [{"name": n, "value": v, "source": _source(s)}
                         for n, v, s in entry.synonyms],
        })
        return data

    def missing(self, links: Links, name: str) -> V3Error:
        """404 for a key the resource does not have (Confluent's message)."""
        kind = "TOPIC" if self.resource.type == ResourceType.TOPIC else "BROKER"
        return not_found(f"Config {name} cannot be found for {kind} {self.resource.name} in "
                         f"cluster {links.cluster_id}.")


def topic_target(name: str) -> Target:
    """The configs of topic ``name``."""
    return Target(ConfigResource.topic(name), "KafkaTopicConfig", ("topics", name, "configs"),
                  (("topic", name),), {"topic_name": name})


def broker_target(node: int) -> Target:
    """The configs of broker ``node``."""
    return Target(ConfigResource.broker(node), "KafkaBrokerConfig",
                  ("brokers", node, "configs"), (("broker", node),), {"broker_id": node})


CLUSTER_TARGET = Target(ConfigResource(ResourceType.BROKER, ""), "KafkaClusterConfig",
                        ("broker-configs",), (), {"config_type": "BROKER"})


async def _target(request: web.Request) -> Target:
    """The resource of the path (checking that the topic or broker exists)."""
    if "topic_name" in request.match_info:
        name = request.match_info["topic_name"]
        await describe_topic(request, name)
        return topic_target(name)
    if "broker_id" in request.match_info:
        return broker_target((await find_broker(request)).node_id)
    return CLUSTER_TARGET


async def _entries(request: web.Request, target: Target) -> dict[str, ConfigEntry]:
    found = await state(request).admin.describe_configs([target.resource],
                                                        include_synonyms=True)
    return found.get(target.resource, {})


def _list_kind(target: Target) -> str:
    return target.kind + "List"


@endpoint
async def list_configs(request: web.Request) -> web.StreamResponse:
    """The configs of the path's resource (``-`` as broker: every broker's)."""
    links = Links(request, await check_cluster(request))
    if request.match_info.get("broker_id") == "-":
        return await _all_brokers(request, links)
    target = await _target(request)
    entries = await _entries(request, target)
    return json_response(links.collection(
        _list_kind(target), target.segments,
        [target.data(links, entry) for entry in entries.values()]))


async def _all_brokers(request: web.Request, links: Links) -> web.StreamResponse:
    brokers = await state(request).admin.describe_brokers()
    targets = [broker_target(node) for node in sorted(brokers)]
    data = []
    for target in targets:
        entries = await _entries(request, target)
        data.extend(target.data(links, entry) for entry in entries.values())
    return json_response(links.collection("KafkaBrokerConfigList",
                                          ("brokers", "-", "configs"), data))


@endpoint
async def list_all_topic_configs(request: web.Request) -> web.StreamResponse:
    """``KafkaTopicConfigList`` of every topic's configs."""
    links = Links(request, await check_cluster(request))
    admin = state(request).admin
    names = sorted(await admin.list_topics())
    targets = [topic_target(name) for name in names]
    found = await admin.describe_configs([t.resource for t in targets],
                                         include_synonyms=True) if targets else {}
    data = [target.data(links, entry) for target in targets
            for entry in found.get(target.resource, {}).values()]
    return json_response(links.collection("KafkaTopicConfigList", ("topics", "-", "configs"),
                                          data))


@endpoint
async def get_config(request: web.Request) -> web.StreamResponse:
    """One config of the path's resource; 404 when it has no such key."""
    links = Links(request, await check_cluster(request))
    target = await _target(request)
    entry = (await _entries(request, target)).get(request.match_info["name"])
    if entry is None:
        raise not_found()
    return json_response(target.data(links, entry))


async def _alter(request: web.Request, links: Links, target: Target,
                 ops: list[AlterConfigOp], validate_only: bool = False) -> None:
    if target is not CLUSTER_TARGET:
        known = await _entries(request, target)
        for op in ops:
            if op.name not in known:
                raise target.missing(links, op.name)
    await state(request).admin.incremental_alter_configs({target.resource: ops},
                                                         validate_only=validate_only)


@endpoint
async def update_config(request: web.Request) -> web.StreamResponse:
    """``PUT {"value": ...}``: set one key (204)."""
    links = Links(request, await check_cluster(request))
    target = await _target(request)
    body = await read_object(request)
    value = get_str(body, "value")
    await _alter(request, links, target,
                 [AlterConfigOp(request.match_info["name"], value, AlterOp.SET)])
    return web.Response(status=204)


@endpoint
async def reset_config(request: web.Request) -> web.StreamResponse:
    """``DELETE``: reset one key to its default (204)."""
    links = Links(request, await check_cluster(request))
    target = await _target(request)
    await _alter(request, links, target,
                 [AlterConfigOp(request.match_info["name"], None, AlterOp.DELETE)])
    return web.Response(status=204)


def _batch(body: dict[str, Any]) -> list[AlterConfigOp]:
    ops = []
    for item in get_objects(body, "data"):
        name = get_str(item, "name", required=True)
        value = get_str(item, "value")
        operation = (get_str(item, "operation") or "SET").upper()
        if operation not in ("SET", "DELETE"):
            raise V3Error(400, 400, f"Bad Request: operation must be SET or DELETE, not "
                                    f"{operation!r}.")
        assert name is not None
        ops.append(AlterConfigOp(name, value if operation == "SET" else None,
                                 AlterOp[operation]))
    return ops


@endpoint
async def alter_configs(request: web.Request) -> web.StreamResponse:
    """``POST ...:alter``: set and delete keys in one batch (204)."""
    links = Links(request, await check_cluster(request))
    target = await _target(request)
    body = await read_object(request)
    await _alter(request, links, target, _batch(body), get_bool(body, "validate_only"))
    return web.Response(status=204)


_C = "/v3/clusters/{cluster_id}"
ROUTES = [
    ("GET", _C + "/topics/-/configs", list_all_topic_configs),
    ("GET", _C + "/topics/{topic_name}/configs", list_configs),
    ("POST", _C + "/topics/{topic_name}/configs:alter", alter_configs),
    ("GET", _C + "/topics/{topic_name}/configs/{name}", get_config),
    ("PUT", _C + "/topics/{topic_name}/configs/{name}", update_config),
    ("DELETE", _C + "/topics/{topic_name}/configs/{name}", reset_config),
    ("GET", _C + "/brokers/{broker_id}/configs", list_configs),
    ("POST", _C + "/brokers/{broker_id}/configs:alter", alter_configs),
    ("GET", _C + "/brokers/{broker_id}/configs/{name}", get_config),
    ("PUT", _C + "/brokers/{broker_id}/configs/{name}", update_config),
    ("DELETE", _C + "/brokers/{broker_id}/configs/{name}", reset_config),
    ("GET", _C + "/broker-configs", list_configs),
    ("POST", _C + "/broker-configs:alter", alter_configs),
    ("GET", _C + "/broker-configs/{name}", get_config),
    ("PUT", _C + "/broker-configs/{name}", update_config),
    ("DELETE", _C + "/broker-configs/{name}", reset_config),
]
