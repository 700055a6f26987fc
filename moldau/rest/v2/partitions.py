"""Partitions of API v2: ``GET /topics/{topic}/partitions``, ``.../partitions/{p}``,
``.../partitions/{p}/offsets`` (``{"beginning_offset", "end_offset"}``) and produce to one
partition (``POST .../partitions/{p}``). 40401 for an unknown topic, 40402 for a partition
the topic does not have (or a partition number that is not a number)."""

from __future__ import annotations

from aiohttp import web

from moldau.client import TopicInfo, TopicPartition

from .. import errors
from ..context import CONTEXT_KEY
from ..media import json_answer
from .produce import produce
from .topics import partition_json


def _partition(request: web.Request) -> int:
    text = request.match_info["partition"]
    try:
        number = int(text)
    except ValueError:
        raise errors.partition_not_found() from None
    if number < 0:
        raise errors.partition_not_found()
    return number


async def _topic(request: web.Request) -> TopicInfo:
    ctx = request.app[CONTEXT_KEY]
    name = request.match_info["topic"]
    admin = await ctx.admin()
    return (await ctx.kafka(admin.describe_topics([name])))[name]


async def list_partitions(request: web.Request) -> web.Response:
    info = await _topic(request)
    return json_answer(request, [partition_json(info, p) for p in sorted(info.partitions)])


async def get_partition(request: web.Request) -> web.Response:
    number = _partition(request)
    info = await _topic(request)
    if number not in info.partitions:
        raise errors.partition_not_found()
    return json_answer(request, partition_json(info, number))


async def get_offsets(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT_KEY]
    number = _partition(request)
    info = await _topic(request)
    if number not in info.partitions:
        raise errors.partition_not_found()
    tp = TopicPartition(info.name, number)
    admin = await ctx.admin()
    first = (await ctx.kafka(admin.list_offsets({tp: -2})))[tp]
    last = (await ctx.kafka(admin.list_offsets({tp: -1})))[tp]
    return json_answer(request, {"beginning_offset": first.offset,  # type: ignore[union-attr]
                                 "end_offset": last.offset})  # type: ignore[union-attr]


async def produce_to_partition(request: web.Request) -> web.Response:
    return await produce(request, _partition(request))
