"""Topics of API v2: ``GET /topics`` (names, internal topics left out, as Confluent's proxy
lists them), ``GET /topics/{topic}`` (name, configs, partitions; 40401 when unknown) and the
produce routes (:mod:`.produce`)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from moldau.client import ConfigResource, TopicInfo

from ..context import CONTEXT_KEY
from ..media import json_answer
from .produce import produce


def partition_json(info: TopicInfo, partition: int) -> dict[str, Any]:
    """``{"partition", "leader", "replicas": [{"broker", "leader", "in_sync"}]}``."""
    p = info.partitions[partition]
    return {"partition": partition, "leader": p.leader,
            "replicas": [{"broker": r, "leader": r == p.leader, "in_sync": r in p.isr}
                         for r in p.replicas]}


async def list_topics(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT_KEY]
    admin = await ctx.admin()
    topics = await ctx.kafka(admin.list_topics())
    return json_answer(request, sorted(topics))


async def get_topic(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT_KEY]
    name = request.match_info["topic"]
    admin = await ctx.admin()
    info = (await ctx.kafka(admin.describe_topics([name])))[name]
    resource = ConfigResource.topic(name)
    entries = (await ctx.kafka(admin.describe_configs([resource])))[resource]
    configs = {e.name: e.value for e in entries.values() if not e.is_sensitive}
    return json_answer(request, {
        "name": name, "configs": configs,
        "partitions": [partition_json(info, p) for p in sorted(info.partitions)],
    })


async def produce_to_topic(request: web.Request) -> web.Response:
    return await produce(request, None)
