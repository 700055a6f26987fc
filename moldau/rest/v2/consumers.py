"""Consumer routes of API v2 (``/consumers/{group}/...``), as Confluent documents them.

=====================================================  =====================================
``POST /consumers/{group}``                            new instance: ``{"instance_id",
                                                       "base_uri"}`` (40902 if the name is
                                                       taken)
``DELETE .../instances/{name}``                        leave the group, forget it (204)
``POST|GET|DELETE .../subscription``                   ``{"topics": [..]}`` or
                                                       ``{"topic_pattern": ".."}`` (204)
``POST|GET .../assignments``                           ``{"partitions": [{"topic",
                                                       "partition"}]}``
``POST .../positions``                                 seek: ``{"offsets": [{"topic",
                                                       "partition", "offset"}],
                                                       "timestamps": [{.., "timestamp"}]}``
``POST .../positions/beginning`` and ``/end``          ``{"partitions": [..]}`` (204)
``POST .../offsets``                                   commit the given offsets (each +1:
                                                       the offset given is the last one
                                                       processed) or, without a body,
                                                       everything read (``?async``: without
                                                       waiting); answers ``[]``
``GET .../offsets``                                    committed offsets of the body's
                                                       ``partitions``
``GET .../records?timeout=&max_bytes=``                :mod:`.records`
=====================================================  =====================================

Unknown instances are 40403; a seek or assignment that contradicts the instance's state is
40903 ("Illegal state: ..."), as the Java consumer's IllegalStateException is.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from aiohttp import web

from moldau.client import Consumer, OffsetAndMetadata, TopicPartition
from moldau.client.errors import ClientError

from .. import errors
from ..context import CONTEXT_KEY, RestContext
from ..media import json_answer, no_content, read_body, records_format
from .instances import InstanceManager, assigned
from .records import read

MANAGER_KEY: web.AppKey[InstanceManager] = web.AppKey("moldau.rest.v2.instances",
                                                      InstanceManager)


def _manager(request: web.Request) -> InstanceManager:
    return request.app[MANAGER_KEY]


def _ids(request: web.Request) -> tuple[str, str]:
    return request.match_info["group"], request.match_info["instance"]


def _partitions(body: Any, key: str = "partitions") -> list[TopicPartition]:
    """``body[key]`` as partitions (422 when it is not a list of {"topic", "partition"})."""
    if not isinstance(body, dict) or not isinstance(body.get(key), list):
        raise errors.unprocessable(f"{key} must be a list")
    return [_tp(item) for item in body[key]]


def _tp(item: Any) -> TopicPartition:
    if not isinstance(item, dict) or not isinstance(item.get("topic"), str):
        raise errors.unprocessable("each partition needs a topic (string)")
    partition = item.get("partition")
    if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
        raise errors.unprocessable(f"partition must be an integer >= 0, not {partition!r}")
    return TopicPartition(item["topic"], partition)


def _offset(item: Any, key: str = "offset") -> int:
    value = item.get(key) if isinstance(item, dict) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise errors.unprocessable(f"{key} must be an integer >= 0, not {value!r}")
    return value


def _list(body: Any, key: str) -> list[Any]:
    value = body.get(key) if isinstance(body, dict) else None
    if value is None:
        return []
    if not isinstance(value, list):
        raise errors.unprocessable(f"{key} must be a list")
    return value


async def _kafka(operation: Any) -> Any:
    """Await a client call: the client's state errors (a plain ClientError, e.g. assign()
    after subscribe()) are 40903, Kafka failures 50002/50003."""
    try:
        return await operation
    except ClientError as exc:
        if type(exc) is ClientError:
            raise errors.illegal_state(str(exc)) from exc
        raise errors.kafka_error(exc) from exc


# --- instances --------------------------------------------------------------------------------

async def create(request: web.Request) -> web.Response:
    ctx = request.app[CONTEXT_KEY]
    group = request.match_info["group"]
    body = await read_body(request, optional=True)
    instance = _manager(request).create(group, body)
    base_uri = ctx.url(request, "consumers", group, "instances", instance.name)
    return json_answer(request, {"instance_id": instance.name, "base_uri": base_uri})


async def delete(request: web.Request) -> web.Response:
    await _manager(request).delete(*_ids(request))
    return no_content()


# --- subscription and assignment --------------------------------------------------------------

async def subscribe(request: web.Request) -> web.Response:
    body = await read_body(request)
    if not isinstance(body, dict):
        raise errors.unprocessable("The request body must be a JSON object")
    topics, pattern = body.get("topics"), body.get("topic_pattern")
    if topics is not None and (not isinstance(topics, list)
                               or not all(isinstance(t, str) and t for t in topics)):
        raise errors.unprocessable("topics must be a list of topic names")
    if topics is None and pattern is not None:
        if not isinstance(pattern, str):
            raise errors.unprocessable("topic_pattern must be a string")
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise errors.unprocessable(f"topic_pattern is not a valid pattern: {exc}") from None
    async with _manager(request).use(*_ids(request)) as instance:
        consumer = await instance.client()
        if topics is not None:
            if not topics:
                await _kafka(consumer.unsubscribe())
                return no_content()
            await _kafka(_subscribe(consumer, list(topics)))
        elif pattern is not None:
            await _kafka(_subscribe(consumer, compiled))
    return no_content()


async def _subscribe(consumer: Consumer, what: Any) -> None:
    consumer.subscribe(what)


async def subscription(request: web.Request) -> web.Response:
    async with _manager(request).use(*_ids(request)) as instance:
        topics = sorted(instance.consumer.subscription_topics())
    return json_answer(request, {"topics": topics})


async def unsubscribe(request: web.Request) -> web.Response:
    async with _manager(request).use(*_ids(request)) as instance:
        if instance.started:
            await _kafka(instance.consumer.unsubscribe())
    return no_content()


async def assign(request: web.Request) -> web.Response:
    tps = _partitions(await read_body(request))
    async with _manager(request).use(*_ids(request)) as instance:
        consumer = await instance.client()
        await _kafka(_assign(consumer, tps))
    return no_content()


async def _assign(consumer: Consumer, tps: list[TopicPartition]) -> None:
    consumer.assign(tps)


async def assignments(request: web.Request) -> web.Response:
    async with _manager(request).use(*_ids(request)) as instance:
        tps = sorted(instance.consumer.assignment())
    return json_answer(request, {"partitions": [{"topic": t, "partition": p} for t, p in tps]})


# --- positions --------------------------------------------------------------------------------

def _timestamp(item: Any) -> int:
    """A seek timestamp: ISO-8601 text (Jackson's Instant) or epoch milliseconds."""
    value = item.get("timestamp") if isinstance(item, dict) else None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
        except ValueError:
            pass
    raise errors.unprocessable(f"timestamp must be ISO-8601 text or epoch milliseconds, not "
                               f"{value!r}")


async def seek(request: web.Request) -> web.Response:
    body = await read_body(request)
    offsets = [(_tp(item), _offset(item)) for item in _list(body, "offsets")]
    stamps = {_tp(item): _timestamp(item) for item in _list(body, "timestamps")}
    async with _manager(request).use(*_ids(request)) as instance:
        consumer = await instance.client()
        assigned(consumer, [tp for tp, _ in offsets] + list(stamps))
        for tp, offset in offsets:
            consumer.seek(tp, offset)
        if stamps:
            found = await _kafka(consumer.offsets_for_times(stamps))
            later = [tp for tp, hit in found.items() if hit is None]
            for tp, hit in found.items():
                if hit is not None:
                    consumer.seek(tp, hit[0])
            if later:  # no record at or after the time: the end
                for tp, end in (await _kafka(consumer.end_offsets(later))).items():
                    consumer.seek(tp, end)
    return no_content()


async def seek_beginning(request: web.Request) -> web.Response:
    return await _seek_to(request, beginning=True)


async def seek_end(request: web.Request) -> web.Response:
    return await _seek_to(request, beginning=False)


async def _seek_to(request: web.Request, *, beginning: bool) -> web.Response:
    tps = _partitions(await read_body(request))
    async with _manager(request).use(*_ids(request)) as instance:
        consumer = await instance.client()
        assigned(consumer, tps)
        if beginning:
            consumer.seek_to_beginning(tps)
        else:
            consumer.seek_to_end(tps)
    return no_content()


# --- offsets ----------------------------------------------------------------------------------

async def commit(request: web.Request) -> web.Response:
    body = await read_body(request, optional=True)
    given: dict[TopicPartition, OffsetAndMetadata] | None = None
    if body is not None and _list(body, "offsets"):
        given = {}
        for item in _list(body, "offsets"):
            metadata = item.get("metadata")
            given[_tp(item)] = OffsetAndMetadata(_offset(item) + 1,
                                                 metadata if isinstance(metadata, str) else "")
    # ?async=... (any value, as Confluent's) commits everything read without waiting
    asynchronous = given is None and "async" in request.query
    async with _manager(request).use(*_ids(request)) as instance:
        consumer = await instance.client()
        await RestContext.kafka(consumer.commit(given, asynchronous=asynchronous))
    return json_answer(request, [])


async def committed(request: web.Request) -> web.Response:
    body = await read_body(request, optional=True)
    if body is None:
        raise errors.partition_not_found()
    tps = _partitions(body)
    async with _manager(request).use(*_ids(request)) as instance:
        consumer = await instance.client()
        found = await RestContext.kafka(consumer.committed(tps))
    return json_answer(request, {"offsets": [
        {"topic": tp.topic, "partition": tp.partition, "offset": value.offset,
         "metadata": value.metadata}
        for tp in tps if (value := found.get(tp)) is not None]})


# --- records ----------------------------------------------------------------------------------

def _query_long(request: web.Request, name: str) -> int:
    text = request.query.get(name)
    if text is None or text == "":
        return -1
    try:
        return int(text)
    except ValueError:
        raise errors.HttpError(404, 404, "HTTP 404 Not Found") from None


async def records(request: web.Request) -> web.Response:
    timeout_ms, max_bytes = _query_long(request, "timeout"), _query_long(request, "max_bytes")
    manager = _manager(request)
    own = manager.get(*_ids(request)).format
    wanted, media = records_format(request, own)
    if wanted != own:
        raise errors.format_mismatch()
    async with manager.use(*_ids(request)) as instance:
        answer = await read(instance, manager.config, timeout_ms, max_bytes)
    return json_answer(request, answer, media=media)


def register(app: web.Application, ctx: RestContext, route: Any) -> None:
    """The consumer routes and their instance manager (started and closed with the proxy)."""
    manager = InstanceManager(ctx)
    app[MANAGER_KEY] = manager
    ctx.starters.append(manager.start)
    ctx.closers.append(manager.stop)
    base = "/consumers/{group}/instances/{instance}"
    route(app, "POST", "/consumers/{group}", create)
    route(app, "DELETE", base, delete)
    route(app, "POST", f"{base}/subscription", subscribe)
    route(app, "GET", f"{base}/subscription", subscription)
    route(app, "DELETE", f"{base}/subscription", unsubscribe)
    route(app, "POST", f"{base}/assignments", assign)
    route(app, "GET", f"{base}/assignments", assignments)
    route(app, "POST", f"{base}/positions", seek)
    route(app, "POST", f"{base}/positions/beginning", seek_beginning)
    route(app, "POST", f"{base}/positions/end", seek_end)
    route(app, "POST", f"{base}/offsets", commit)
    route(app, "GET", f"{base}/offsets", committed)
    route(app, "GET", f"{base}/records", records)
