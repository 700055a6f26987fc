"""Produce: ``POST /v3/clusters/{cluster_id}/topics/{topic_name}/records``.

The body is one produce request, or many concatenated (``{...}{...}``, whitespace between
allowed) sent on one connection with ``Transfer-Encoding: chunked`` for as long as the client
likes: Confluent's streaming mode. Each request is ``partition_id`` (optional), ``headers``
(``[{"name": ..., "value": base64 or null}]``), ``key``/``value`` (see :mod:`.record_data`)
and ``timestamp`` (ISO 8601; now when absent). For every request one result is written back,
in the same order, as soon as Kafka acknowledged the record (and all before it), while later
requests are still being read::

    {"error_code":200,"cluster_id":"...","topic_name":"t","partition_id":0,"offset":41,
     "timestamp":"2026-12-01T22:21:56.123Z","key":{"type":"BINARY","size":3},"value":null}

or ``{"error_code": ..., "message": ...}`` for a request that failed (400 bad data or a
request that is not JSON, 40403 unknown partition, 50002 / 50003 Kafka errors, 500 / 50002
registry trouble). The HTTP status is 200 once the first request was read (Confluent: "as
long as the connection is successfully established"); each result is one JSON object
followed by ``\r\n``, as Confluent's proxy writes them (its chunk separator; clients such as
kafi split the answer on it).

Answered with an HTTP error instead, before anything is produced: unknown cluster (404 / 404),
unknown topic (404 / 40403), a ``Content-Type`` other than JSON (415), an empty body or a
body that does not start with a JSON object (400 / 400). A request after which the stream
cannot be followed (not an object, over the size limit: the application's request size
limit per record) ends the stream with one error result.

Back-pressure: at most :data:`IN_FLIGHT` records per connection are waiting for Kafka; the
proxy stops reading the connection until the oldest is answered, so a fast client is slowed
down by TCP instead of filling the proxy's memory.

Unlike Confluent's proxy, a request that is valid JSON but not a valid produce request gets
its error result and the stream goes on with the next one.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
from collections import deque
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from moldau.client import RecordMetadata
from moldau.client.types import Header
from moldau.http.errors import MAX_SIZE_KEY

from .body import check_content_type
from .context import check_cluster, describe_topic, state
from .errors import (
    JSON,
    V3Error,
    bad_request,
    body,
    endpoint,
    from_exception,
    log,
)
from .json_stream import BadObject, ObjectSplitter, StreamError
from .record_data import NOTHING, Encoded, SchemaEncoder, encode_plain, needs_registry

#: records per connection waiting for Kafka before the proxy stops reading the connection
IN_FLIGHT = 4096
DEFAULT_MAX_RECORD_BYTES = 1024 * 1024
#: written after every result (Confluent's proxy: a Jersey ChunkedOutput with "\r\n")
SEPARATOR = b"\r\n"

_DONE = object()
_COMPACT = json.JSONEncoder(separators=(",", ":")).encode
_SECONDS: dict[int, str] = {}  # epoch second -> its ISO text (a few recent ones)


def iso_timestamp(ms: int) -> str:
    """Epoch milliseconds as Java's ``Instant.toString()`` writes them."""
    second, millis = divmod(ms, 1000)
    text = _SECONDS.get(second)
    if text is None:
        if len(_SECONDS) > 64:
            _SECONDS.clear()
        text = _SECONDS[second] = datetime.fromtimestamp(second, UTC).strftime(
            "%Y-%m-%dT%H:%M:%S")
    return f"{text}.{millis:03d}Z" if millis else f"{text}Z"


def parse_timestamp(value: Any) -> int | None:
    """A request's ``timestamp`` (ISO 8601 text, or epoch milliseconds) as epoch ms."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            return int(moment.timestamp() * 1000)
    raise bad_request(f"timestamp must be an ISO 8601 date-time, not {json.dumps(value)}.")


def parse_headers(value: Any) -> list[Header]:
    """``[{"name": ..., "value": base64 or null}]`` as record headers."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad_request("headers must be a list of {\"name\", \"value\"} objects.")
    out: list[Header] = []
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise bad_request("every header needs a name.")
        raw = item.get("value")
        if raw is None:
            out.append((item["name"], None))
            continue
        if not isinstance(raw, str):
            raise bad_request(f"header {item['name']!r}: value must be base64 text.")
        try:
            out.append((item["name"], base64.b64decode(raw, validate=True)))
        except (binascii.Error, ValueError):
            raise bad_request(f"header {item['name']!r}: value is not valid base64.") from None
    return out


class _Stream:
    """One produce connection: reads requests, produces, writes results in order."""

    def __init__(self, request: web.Request, cluster_id: str, topic: str) -> None:
        st = state(request)
        self.request = request
        self.cluster_id = cluster_id
        self.topic = topic
        self.producer = st.producer
        self.encoder = SchemaEncoder(st.registry, st.serializers)
        self.pending: deque[Any] = deque()
        self.ready = asyncio.Event()
        self.space = asyncio.Event()
        self.response: web.StreamResponse | None = None
        self.writer: asyncio.Task[None] | None = None

    async def _part(self, req: dict[str, Any], name: str) -> Encoded:
        part = req.get(name)
        if part is None:
            return NOTHING
        if not isinstance(part, dict):
            raise bad_request(f"{name} must be an object with type and data.")
        if needs_registry(part):
            return await self.encoder.encode(self.topic, part, name == "key", name)
        return encode_plain(str(part["type"]).upper(), part.get("data"), name)

    async def submit(self, req: dict[str, Any] | BadObject) -> tuple[Any, ...]:
        """Produce one request; what the writer needs to answer it."""
        try:
            if isinstance(req, BadObject):
                raise V3Error(400, 400, req.message)
            key = await self._part(req, "key")
            value = await self._part(req, "value")
            partition = req.get("partition_id")
            if partition is not None and (isinstance(partition, bool)
                                          or not isinstance(partition, int)):
                raise bad_request("partition_id must be an integer.")
            headers = parse_headers(req.get("headers"))
            ts = parse_timestamp(req.get("timestamp"))
            future = self.producer.send(self.topic, value.data, key=key.data, headers=headers,
                                        partition=partition, timestamp_ms=ts)
        except RecursionError:
            return (body(bad_request("data is nested too deeply.")),)
        except Exception as exc:
            return (body(from_exception(exc)),)
        return future, key.info, value.info

    def result(self, item: tuple[Any, ...]) -> dict[str, Any]:
        """The answer of one request once its future is done."""
        if len(item) == 1:
            return item[0]  # type: ignore[no-any-return]
        future, key, value = item
        try:
            meta: RecordMetadata = future.result()
        except Exception as exc:
            return body(from_exception(exc))
        return {"error_code": 200, "cluster_id": self.cluster_id, "topic_name": self.topic,
                "partition_id": meta.partition, "offset": meta.offset,
                "timestamp": iso_timestamp(meta.timestamp) if meta.timestamp >= 0 else None,
                "key": key, "value": value}

    async def start(self) -> None:
        """Send the 200 head and start the writer (on the first request)."""
        response = web.StreamResponse(status=200)
        response.content_type = JSON
        await response.prepare(self.request)
        self.response = response
        self.writer = asyncio.create_task(self._write(response))

    async def _write(self, response: web.StreamResponse) -> None:
        """Write results in request order, batching those already answered."""
        pending = self.pending
        while True:
            while not pending:
                self.ready.clear()
                await self.ready.wait()
            first = pending[0]
            if first is not _DONE and len(first) > 1 and not first[0].done():
                await asyncio.wait([first[0]])
            out = []
            finished = False
            while pending:
                item = pending[0]
                if item is _DONE:
                    finished = True
                    break
                if len(item) > 1 and not item[0].done():
                    break
                pending.popleft()
                out.append(_COMPACT(self.result(item)).encode() + SEPARATOR)
            if len(pending) < IN_FLIGHT:
                self.space.set()
            if out:
                await response.write(b"".join(out))
            if finished:
                return

    async def push(self, item: Any) -> None:
        """Queue an answer for the writer; waits while :data:`IN_FLIGHT` are queued (and
        fails when the writer did: the client went away)."""
        while len(self.pending) >= IN_FLIGHT:
            self.space.clear()
            assert self.writer is not None
            waiter = asyncio.ensure_future(self.space.wait())
            await asyncio.wait([waiter, self.writer], return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            if self.writer.done():
                self.writer.result()
                raise ConnectionResetError("the client stopped reading")
        self.pending.append(item)
        self.ready.set()

    async def run(self) -> web.StreamResponse:
        """Read, produce and answer until the body ends (or the client goes away)."""
        try:
            await self._pump()
            if self.response is None:
                raise V3Error(400, 400, "Bad Request: Request body is empty. Data is required.")
            await self.push(_DONE)
            assert self.writer is not None
            await self.writer
            await self.response.write_eof()
            return self.response
        except Exception:
            if self.response is None:
                raise
            # the 200 head is out: nothing else can be said (the client went away, or
            # writing failed); what was produced stays produced
            log.debug("produce stream to %s ended early", self.topic, exc_info=True)
            return self.response
        finally:
            await self._abandon()

    async def _pump(self) -> None:
        """Cut requests out of the body as it arrives and produce each."""
        limit = self.request.app.get(MAX_SIZE_KEY, DEFAULT_MAX_RECORD_BYTES)
        splitter = ObjectSplitter(limit)
        async for chunk in self.request.content.iter_any():
            for req in splitter.feed(chunk):
                if self.response is None:
                    await self.start()
                await self.push(await self.submit(req))
            if splitter.error is not None:
                await self._stream_error(splitter.error)
                return
        try:
            splitter.finish()
        except StreamError as exc:
            await self._stream_error(exc)

    async def _stream_error(self, exc: StreamError) -> None:
        if self.response is None:
            raise V3Error(exc.status, exc.status, str(exc))
        await self.push((body(V3Error(exc.status, exc.status, str(exc))),))

    async def _abandon(self) -> None:
        """After a failure: stop the writer; answers still owed are dropped quietly."""
        if self.writer is not None and not self.writer.done():
            self.writer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.writer
        while self.pending:
            item = self.pending.popleft()
            if item is not _DONE and len(item) > 1:
                item[0].add_done_callback(_consume)


def _consume(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


async def _known_topic(request: web.Request, topic: str) -> None:
    """404 (40403) for a topic the cluster does not have."""
    known = state(request).producer.cluster.topics.get(topic)
    if known is None or not known.partitions:
        await describe_topic(request, topic)


@endpoint
async def produce(request: web.Request) -> web.StreamResponse:
    """Produce the request's records (see the module docstring)."""
    cluster_id = await check_cluster(request)
    topic = request.match_info["topic_name"]
    await _known_topic(request, topic)
    check_content_type(request)
    return await _Stream(request, cluster_id, topic).run()


ROUTES = [
    ("POST", "/v3/clusters/{cluster_id}/topics/{topic_name}/records", produce),
]
