"""A REST Proxy (and, when asked, a schema registry) in the test's event loop, spoken to with
aiohttp's HTTP client; the broker runs in its own thread (moldau.testing.runner).

Each test runs one coroutine with :func:`run`; :func:`proxy` starts a proxy on
127.0.0.1:<free port> and yields a :class:`Client`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp

from moldau.registry.app import SchemaRegistry
from moldau.registry.config import build_config as registry_config
from moldau.rest.app import RestProxy
from moldau.rest.config import build_config

T = TypeVar("T")

V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
JSON_V2 = "application/vnd.kafka.json.v2+json"
AVRO = "application/vnd.kafka.avro.v2+json"
JSONSCHEMA = "application/vnd.kafka.jsonschema.v2+json"
PROTOBUF = "application/vnd.kafka.protobuf.v2+json"


def unique(prefix: str = "t") -> str:
    """A topic, group or instance name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


@dataclass
class Answer:
    """One HTTP answer: status, content type, parsed JSON (or text, or None when empty)."""

    status: int
    ctype: str
    body: Any
    headers: Any

    def error(self) -> tuple[int, int]:
        """(status, error_code) of an error answer."""
        assert isinstance(self.body, dict) and set(self.body) == {"error_code", "message"}, \
            self.body
        return self.status, self.body["error_code"]


class Client:
    """A proxy under test and an aiohttp session to it."""

    def __init__(self, proxy: RestProxy, session: aiohttp.ClientSession) -> None:
        self.proxy = proxy
        self.session = session
        self.base = f"http://127.0.0.1:{proxy.port}"

    async def call(self, method: str, path: str, body: Any = None, *,
                   ctype: str | None = V2, accept: str | None = None,
                   raw: bytes | None = None, headers: dict[str, str] | None = None) -> Answer:
        sent = dict(headers or {})
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
        if data is not None and ctype is not None:
            sent["Content-Type"] = ctype
        if accept is not None:
            sent["Accept"] = accept
        async with self.session.request(method, self.base + path, data=data,
                                        headers=sent) as response:
            text = await response.text()
            try:
                parsed: Any = json.loads(text) if text else None
            except json.JSONDecodeError:
                parsed = text
            return Answer(response.status, response.content_type, parsed, response.headers)

    async def ok(self, method: str, path: str, body: Any = None, status: int = 200,
                 **kwargs: Any) -> Any:
        answer = await self.call(method, path, body, **kwargs)
        assert answer.status == status, (method, path, answer)
        return answer.body

    # --- helpers for consumers ----------------------------------------------------------------

    async def consumer(self, group: str, name: str | None = None, **settings: Any) -> str:
        """A new instance; its path (/consumers/GROUP/instances/NAME)."""
        body = {"name": name or unique("c"), **settings}
        made = await self.ok("POST", f"/consumers/{group}", body)
        return f"/consumers/{group}/instances/{made['instance_id']}"

    async def records(self, path: str, accept: str = BINARY, *, want: int = 1,
                      rounds: int = 40, query: str = "") -> list[dict[str, Any]]:
        """Read until ``want`` records came (an instance that just joined may answer [])."""
        got: list[dict[str, Any]] = []
        for _ in range(rounds):
            answer = await self.call("GET", f"{path}/records{query}", accept=accept)
            assert answer.status == 200, answer
            got.extend(answer.body)
            if len(got) >= want:
                return got
        raise AssertionError(f"only {len(got)} of {want} records after {rounds} reads: {got}")


@contextlib.asynccontextmanager
async def proxy(bootstrap: str, **settings: Any) -> AsyncIterator[Client]:
    """A started proxy with ``settings`` (dots as underscores: consumer_instance_timeout_ms)."""
    raw = {"bootstrap.servers": bootstrap, "listeners": "http://127.0.0.1:0"}
    raw.update({k.replace("__", "-").replace("_", "."): str(v) for k, v in settings.items()})
    proxy_ = RestProxy(build_config(raw))
    await proxy_.start()
    try:
        async with aiohttp.ClientSession() as session:
            yield Client(proxy_, session)
    finally:
        await proxy_.stop()


@contextlib.asynccontextmanager
async def registry(bootstrap: str) -> AsyncIterator[str]:
    """A schema registry with a store topic of its own; yields its URL."""
    reg = SchemaRegistry(registry_config({
        "kafkastore.bootstrap.servers": bootstrap, "listeners": "http://127.0.0.1:0",
        "kafkastore.topic": unique("_schemas"), "kafkastore.timeout.ms": "10000"}))
    await reg.start()
    try:
        yield f"http://127.0.0.1:{reg.port}"
    finally:
        await reg.stop()
