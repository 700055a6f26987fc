"""Confluent's REST Proxy API v2: topics, produce, partitions, brokers, consumers.

:func:`register_v2` adds every v2 route to the proxy's app; each module opens with what it
serves and how it differs from Confluent's proxy, if at all.
"""

from __future__ import annotations

from aiohttp import web

from ..context import RestContext
from ..media import json_answer
from ..routing import route
from . import brokers, consumers, partitions, topics
from .produce import PRODUCE_KEY, ProduceState


async def _root(request: web.Request) -> web.Response:
    """``GET /`` and ``POST /``: ``{}`` (Confluent's liveness check)."""
    return json_answer(request, {})


def register_v2(app: web.Application, ctx: RestContext) -> None:
    """Add the v2 routes (every one also with a trailing slash)."""
    app[PRODUCE_KEY] = ProduceState(ctx)
    route(app, "GET", "/", _root)
    route(app, "POST", "/", _root)
    route(app, "GET", "/topics", topics.list_topics)
    route(app, "GET", "/topics/{topic}", topics.get_topic)
    route(app, "POST", "/topics/{topic}", topics.produce_to_topic)
    route(app, "GET", "/topics/{topic}/partitions", partitions.list_partitions)
    route(app, "GET", "/topics/{topic}/partitions/{partition}", partitions.get_partition)
    route(app, "POST", "/topics/{topic}/partitions/{partition}",
          partitions.produce_to_partition)
    route(app, "GET", "/topics/{topic}/partitions/{partition}/offsets", partitions.get_offsets)
    route(app, "GET", "/brokers", brokers.list_brokers)
    consumers.register(app, ctx, route)
