"""API v3 on its own event loop thread against a broker, spoken to with aiohttp's client.

The application is the smallest one ``register_v3`` needs (``moldau.http``'s app with JSON
media types), so these tests do not depend on the proxy's full application.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

import aiohttp

from moldau.client import AdminClient, Producer
from moldau.http import HttpService, Listener, MediaTypes
from moldau.http.server import build_app
from moldau.registry.client import AsyncSchemaRegistryClient
from moldau.rest.v3 import register_v3

JSON = "application/json"


def unique(prefix: str = "t") -> str:
    """A topic or group name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@dataclass
class Ctx:
    """The context register_v3 reads."""

    admin: AdminClient
    producer: Producer
    registry: AsyncSchemaRegistryClient | None = None
    base_url: str | None = None


@dataclass
class Reply:
    """One HTTP answer."""

    status: int
    content_type: str
    headers: dict[str, str]
    text: str

    @property
    def json(self) -> Any:
        return json.loads(self.text)


def concatenated(text: str) -> list[Any]:
    """The JSON values of a body of concatenated JSON (Confluent's streaming answers)."""
    decoder = json.JSONDecoder()
    values, pos = [], 0
    while True:
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos >= len(text):
            return values
        value, pos = decoder.raw_decode(text, pos)
        values.append(value)


class RestV3:
    """``register_v3`` served on 127.0.0.1:<free port> for the broker at ``bootstrap``."""

    def __init__(self, bootstrap: str, *, registry_url: str | None = None,
                 client_max_size: int = 1024 * 1024, base_url: str | None = None) -> None:
        self.bootstrap = bootstrap
        self.registry_url = registry_url
        self.client_max_size = client_max_size
        self.base_url = base_url
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                       name="moldau-rest-v3")
        self.ctx: Ctx | None = None
        self.http: HttpService | None = None

    def call(self, coro: Any, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> RestV3:
        self.thread.start()
        self.call(self._boot())
        return self

    async def _boot(self) -> None:
        admin = await AdminClient({"bootstrap.servers": self.bootstrap}).start()
        producer = await Producer({"bootstrap.servers": self.bootstrap,
                                   "linger.ms": 1}).start()
        registry = (AsyncSchemaRegistryClient({"url": self.registry_url})
                    if self.registry_url else None)
        self.ctx = Ctx(admin, producer, registry, self.base_url)
        app = build_app(MediaTypes(produces=(JSON,), consumes=(JSON,)),
                        client_max_size=self.client_max_size)
        register_v3(app, self.ctx)
        self.http = HttpService(app, [Listener("http", "127.0.0.1", 0)], name="rest v3")
        await self.http.start()

    async def _shutdown(self) -> None:
        if self.http is not None:
            await self.http.stop()
        if self.ctx is not None:
            await self.ctx.producer.close()
            await self.ctx.admin.close()
            if self.ctx.registry is not None:
                await self.ctx.registry.close()

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.call(self._shutdown())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def __enter__(self) -> RestV3:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self.http is not None
        return f"http://127.0.0.1:{self.http.port}"

    @property
    def cluster_id(self) -> str:
        reply = self.request("GET", "/v3/clusters")
        return str(reply.json["data"][0]["cluster_id"])

    # --- the client side (runs in the test's thread, its own event loop) ---------------

    def request(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
                headers: dict[str, str] | None = None) -> Reply:
        """One request with aiohttp's client; ``body`` is sent as JSON (``raw`` without a
        ``Content-Type`` unless ``headers`` give one)."""
        return asyncio.run(self.request_async(method, path, body, raw=raw, headers=headers))

    async def request_async(self, method: str, path: str, body: Any = None, *,
                            raw: bytes | None = None,
                            headers: dict[str, str] | None = None) -> Reply:
        sent = dict(headers or {})
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            sent.setdefault("Content-Type", JSON)
        skip = () if "Content-Type" in sent or body is not None else ("Content-Type",)
        async with aiohttp.ClientSession() as session, session.request(
                method, self.url + path, data=data, headers=sent,
                skip_auto_headers=skip) as response:
            text = await response.text()
            return Reply(response.status, response.content_type, dict(response.headers), text)

    def produce(self, cluster_id: str, topic: str, records: Iterable[dict[str, Any]]
                ) -> list[dict[str, Any]]:
        """Send ``records`` concatenated in one body; the results in order."""
        raw = b"".join(json.dumps(r).encode() for r in records)
        reply = self.request("POST", f"/v3/clusters/{cluster_id}/topics/{topic}/records",
                             raw=raw, headers={"Content-Type": JSON})
        assert reply.status == 200, reply.text
        return concatenated(reply.text)


async def chunks(items: Iterable[bytes]) -> AsyncIterator[bytes]:
    """An async body for aiohttp's client (sent with Transfer-Encoding: chunked)."""
    for item in items:
        yield item


async def stream_produce(url: str, pieces: Iterable[bytes], *, lockstep: bool = False,
                         chunked_reply: list[int] | None = None) -> tuple[int, list[Any]]:
    """Send ``pieces`` as one chunked request body on one connection, reading the answer
    while sending. With ``lockstep``, each piece (one record) is sent only after the result
    of the one before it came back: the proof that results stream back per record.
    ``chunked_reply`` collects the sizes of the answer's chunks as they arrive."""
    results: list[Any] = []
    arrived = asyncio.Event()
    items = list(pieces)
    decoder = json.JSONDecoder()

    async def body() -> AsyncIterator[bytes]:
        for index, item in enumerate(items):
            if lockstep and index:
                while len(results) < index:
                    arrived.clear()
                    await asyncio.wait_for(arrived.wait(), 30)
            yield item

    async with aiohttp.ClientSession() as session, session.post(
            url, data=body(), headers={"Content-Type": JSON}) as response:
        assert response.headers.get("Content-Type", "").startswith(JSON)
        text = ""
        async for chunk in response.content.iter_any():
            if chunked_reply is not None:
                chunked_reply.append(len(chunk))
            text += chunk.decode()
            pos = 0
            while True:
                while pos < len(text) and text[pos] in " \t\r\n":
                    pos += 1
                try:
                    value, end = decoder.raw_decode(text, pos)
                except json.JSONDecodeError:
                    break
                results.append(value)
                pos = end
            text = text[pos:]
            arrived.set()
        assert not text.strip(), text
        return response.status, results
