"""A schema registry on its own event loop thread, for tests that use synchronous clients
(confluent-kafka's SchemaRegistryClient, http.client) against an in-process broker."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import uuid
from typing import Any

from moldau.registry.app import SchemaRegistry
from moldau.registry.config import build_config


def unique(prefix: str = "s") -> str:
    """A subject or topic name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


class RunningRegistry:
    """``SchemaRegistry`` on 127.0.0.1:<free port>, its loop in a background thread."""

    def __init__(self, bootstrap: str, **settings: Any) -> None:
        raw = {"kafkastore.bootstrap.servers": bootstrap, "listeners": "http://127.0.0.1:0",
               "kafkastore.topic": unique("_schemas"), "kafkastore.timeout.ms": "10000",
               "kafkastore.init.timeout.ms": "30000"}
        raw.update({k.replace("_", "."): str(v) for k, v in settings.items()})
        self.config = build_config(raw)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                       name="moldau-registry")
        self.registry: SchemaRegistry | None = None

    def call(self, coro: Any, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> RunningRegistry:
        self.thread.start()

        async def boot() -> SchemaRegistry:
            registry = SchemaRegistry(self.config)
            await registry.start()
            return registry

        self.registry = self.call(boot())
        return self

    @property
    def port(self) -> int:
        assert self.registry is not None
        return self.registry.port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def topic(self) -> str:
        return str(self.config["kafkastore.topic"])

    def stop(self) -> None:
        if self.registry is not None:
            self.call(self.registry.stop())
            self.registry = None
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def __enter__(self) -> RunningRegistry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- a plain HTTP client ------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None, *,
                raw: bytes | None = None, headers: dict[str, str] | None = None
                ) -> tuple[int, str, Any]:
        """(status, content type, parsed JSON body or text) of one HTTP request."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            sent = headers or {}
            data = raw
            if body is not None:
                data = json.dumps(body).encode()
                sent = {"Content-Type": "application/vnd.schemaregistry.v1+json", **sent}
            conn.request(method, path, body=data, headers=sent)
            response = conn.getresponse()
            text = response.read().decode()
            ctype = response.getheader("Content-Type", "")
        finally:
            conn.close()
        try:
            return response.status, ctype, json.loads(text)
        except json.JSONDecodeError:
            return response.status, ctype, text
