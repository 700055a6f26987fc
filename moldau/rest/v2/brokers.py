"""Brokers of API v2: ``GET /brokers`` answers ``{"brokers": [node ids]}``."""

from __future__ import annotations

from aiohttp import web

from ..context import CONTEXT_KEY
from ..media import json_answer


async def list_brokers(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT_KEY]
    admin = await ctx.admin()
    cluster = await ctx.kafka(admin.describe_cluster())
    return json_answer(request, {"brokers": sorted(b.node_id for b in cluster.brokers)})
