"""Secondaries forward writes to the primary over real HTTP (aiohttp on both sides): what
passes through (method, raw path and query, body, Confluent's headers, the primary's answer
and errors unchanged), 50003 when the primary cannot be reached or is too slow, 50004 when
no primary is known, no second hop, and the whole seam with real elections."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from moldau.http.server import build_app
from moldau.registry.app import MEDIA_TYPES
from moldau.registry.election import Identity, PrimaryElection
from moldau.registry.forwarding import FORWARDED_HEADER, Forwarder, operation_for
from moldau.testing.processes import closed_port
from moldau.testing.runner import InProcessBroker

pytestmark = pytest.mark.timeout(120)

V1 = "application/vnd.schemaregistry.v1+json"
V1_TEXT = V1 + "; charset=utf-8"  # as aiohttp labels a text body of that type


class View:
    """A stand-in for the election: who the primary is, set by the test."""

    def __init__(self, url: str | None = None, primary: bool = False) -> None:
        self.primary_url = url
        self.is_primary = primary
        self.changed = asyncio.Event()

    def set(self, url: str | None, primary: bool = False) -> None:
        self.primary_url, self.is_primary = url, primary
        self.changed.set()

    async def wait_for_primary(self, timeout: float) -> str | None:
        if self.primary_url is None:
            try:
                async with asyncio.timeout(timeout):
                    await self.changed.wait()
            except TimeoutError:
                pass
        return self.primary_url


@asynccontextmanager
async def serve(handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                ) -> AsyncIterator[str]:
    """An aiohttp server on a free port answering every path with ``handler`` (with the
    registry's error bodies and content negotiation)."""
    app = build_app(MEDIA_TYPES, client_max_size=1 << 20)
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def echo(request: web.Request) -> web.StreamResponse:
    """The primary: tells what it got; /slow answers late, /error answers 409."""
    if request.path == "/slow":
        await asyncio.sleep(3)
    if request.path == "/error":
        return web.Response(status=409, content_type=V1, text=json.dumps(
            {"error_code": 409, "message": "Schema being registered is incompatible"}))
    return web.json_response({
        "method": request.method, "raw_path": request.raw_path,
        "body": (await request.read()).decode(),
        "headers": {k: v for k, v in request.headers.items()
                    if k.lower() not in ("host", "content-length", "user-agent",
                                         "accept-encoding")},
    }, content_type=V1)


def secondary(forwarder: Forwarder, operation: str = "register"
              ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        answer = await forwarder.forward(request, operation=operation)
        if answer is None:
            return web.json_response({"local": True})
        return answer
    return handle


async def call(url: str, method: str = "POST", **kwargs: Any
               ) -> tuple[int, str | None, Any]:
    async with aiohttp.ClientSession() as session, session.request(method, url,
                                                                    **kwargs) as r:
        ctype = r.headers.get("Content-Type")
        return r.status, ctype, json.loads(await r.read())


def test_a_write_passes_through_to_the_primary_and_back() -> None:
    async def run() -> None:
        async with serve(echo) as primary:
            forwarder = Forwarder(View(primary), headers_whitelist=["X-Trace"])
            try:
                async with serve(secondary(forwarder)) as url:
                    body = json.dumps({"schema": '"string"'})
                    status, ctype, got = await call(
                        url + "/subjects/a%2Fb/versions?normalize=False&x=%C3%A9", data=body,
                        headers={"Content-Type": V1, "Accept": V1, "Authorization": "Basic eA==",
                                 "X-Request-ID": "r-1", "X-Trace": "t", "X-Other": "o"})
                    assert (status, ctype) == (200, V1_TEXT)
                    assert got == {
                        "method": "POST", "body": body,
                        "raw_path": "/subjects/a%2Fb/versions?normalize=False&x=%C3%A9",
                        "headers": {"Content-Type": V1, "Accept": V1,
                                    "Authorization": "Basic eA==", "X-Request-ID": "r-1",
                                    "X-Trace": "t", FORWARDED_HEADER: "1"}}
                    # The primary's refusal comes back unchanged (status, code, content type).
                    assert await call(url + "/error", data="{}") == (409, V1_TEXT, {
                        "error_code": 409,
                        "message": "Schema being registered is incompatible"})
                    status, _ctype, got = await call(url + "/config/s", "DELETE")
                    assert (status, got["method"], got["body"]) == (200, "DELETE", "")
            finally:
                await forwarder.close()

    asyncio.run(run())


def test_no_primary_known_is_50004_after_a_short_wait() -> None:
    async def run() -> None:
        view = View()
        forwarder = Forwarder(view, unknown_primary_wait_ms=300)
        try:
            async with serve(secondary(forwarder, "update_config")) as url:
                started = time.monotonic()
                assert await call(url + "/config", "PUT", data="{}") == (500, V1, {
                    "error_code": 50004, "message": "Failed to update compatibility level"})
                assert time.monotonic() - started >= 0.3
                # A primary elected during the wait gets the request.
                async with serve(echo) as primary:
                    asyncio.get_running_loop().call_later(0.1, view.set, primary)
                    view.changed.clear()
                    view.primary_url = None
                    status, _ctype, got = await call(url + "/config", "PUT", data="{}")
                    assert (status, got["method"]) == (200, "PUT")
                # This instance elected during the wait: it writes itself.
                view.set(None)
                view.changed.clear()
                asyncio.get_running_loop().call_later(0.1, view.set, "http://me:1", True)
                assert await call(url + "/config", "PUT", data="{}") == (
                    200, "application/json; charset=utf-8", {"local": True})
        finally:
            await forwarder.close()

    asyncio.run(run())


def test_an_unreachable_or_slow_primary_is_50003() -> None:
    async def run() -> None:
        failed = {"error_code": 50003,
                  "message": "Error while forwarding register schema request to the leader"}
        with closed_port() as port:
            forwarder = Forwarder(View(f"http://127.0.0.1:{port}"))
            try:
                async with serve(secondary(forwarder)) as url:
                    assert await call(url + "/subjects/s/versions", data="{}") == (
                        500, V1, failed)
            finally:
                await forwarder.close()
        async with serve(echo) as primary:
            forwarder = Forwarder(View(primary), read_timeout_ms=300)
            try:
                async with serve(secondary(forwarder)) as url:
                    started = time.monotonic()
                    assert await call(url + "/slow", data="{}") == (500, V1, failed)
                    assert time.monotonic() - started < 2.5
            finally:
                await forwarder.close()

    asyncio.run(run())


def test_a_request_is_not_bounced_between_instances() -> None:
    async def run() -> None:
        seen: list[str] = []

        async def primary_handler(request: web.Request) -> web.StreamResponse:
            seen.append(request.path)
            return await echo(request)

        async with serve(primary_handler) as primary:
            forwarder = Forwarder(View(primary))
            try:
                async with serve(secondary(forwarder, "delete_version")) as url:
                    status, _ctype, got = await call(url + "/subjects/s/versions/1", "DELETE",
                                                     headers={FORWARDED_HEADER: "1"})
                    assert (status, got["headers"][FORWARDED_HEADER]) == (200, "2")
                    assert await call(url + "/subjects/s/versions/1", "DELETE",
                                      headers={FORWARDED_HEADER: "2"}) == (500, V1, {
                        "error_code": 50003, "message": "Error while forwarding delete schema "
                                                        "version request to the leader"})
                    assert seen == ["/subjects/s/versions/1"]
            finally:
                await forwarder.close()

    asyncio.run(run())


# --- with real elections --------------------------------------------------------------------

def test_writes_follow_the_elected_primary(tmp_path: Any) -> None:
    """Two instances (HTTP server + election + forwarder): a write to either lands on the
    primary; when the primary leaves, the other serves writes itself."""
    settings = {"group.min.session.timeout.ms": 500, "group.initial.rebalance.delay.ms": 0,
                "offsets.topic.num.partitions": 1}
    with InProcessBroker(tmp_path / "data", settings) as broker:
        asyncio.run(_two_instances(broker))


async def _two_instances(broker: InProcessBroker) -> None:
    group = f"sr-{uuid.uuid4().hex[:8]}"
    served: list[tuple[str, str | None]] = []
    instances: list[tuple[PrimaryElection, Forwarder, Any]] = []
    for _ in range(2):
        holder: dict[str, Any] = {}

        async def handle(request: web.Request, holder: dict[str, Any] = holder
                         ) -> web.StreamResponse:
            answer = await holder["forwarder"].forward(request, operation="register")
            if answer is not None:
                return answer
            served.append((holder["url"], request.headers.get(FORWARDED_HEADER)))
            return web.json_response({"id": 1, "served_by": holder["url"]})

        context = serve(handle)
        url = await context.__aenter__()
        election = PrimaryElection(
            {"bootstrap.servers": broker.bootstrap}, Identity.for_listener(url),
            group_id=group, session_timeout_ms=3000, heartbeat_interval_ms=300)
        holder.update(url=url, forwarder=Forwarder(election))
        instances.append((election, holder["forwarder"], context))
    try:
        for election, _f, _c in instances:
            await election.start()
        first, second = sorted(instances, key=lambda i: i[0].identity.url)
        deadline = time.monotonic() + 20
        while not (first[0].is_primary and second[0].primary_url == first[0].identity.url):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        for target in (first, second):
            status, _ctype, got = await call(target[0].identity.url + "/subjects/s/versions",
                                             data="{}")
            assert (status, got["served_by"]) == (200, first[0].identity.url)
        assert served == [(first[0].identity.url, None), (first[0].identity.url, "1")]
        await first[0].stop()
        deadline = time.monotonic() + 20
        while not second[0].is_primary:  # it learns of the rebalance from a heartbeat
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        status, _ctype, got = await call(second[0].identity.url + "/subjects/s/versions",
                                         data="{}")
        assert (status, got["served_by"]) == (200, second[0].identity.url)
    finally:
        for election, forwarder, context in instances:
            await election.stop()
            await forwarder.close()
            await context.__aexit__(None, None, None)


@pytest.mark.parametrize(("method", "path", "operation"), [
    ("POST", "/subjects/orders-value/versions", "register"),
    ("POST", "/subjects/a%2Fb/versions/?normalize=true", "register"),
    ("DELETE", "/subjects/s/versions/3?permanent=true", "delete_version"),
    ("DELETE", "/subjects/s/versions/latest", "delete_version"),
    ("DELETE", "/subjects/s", "delete_subject"),
    ("PUT", "/config", "update_config"),
    ("PUT", "/config/s", "update_config"),
    ("DELETE", "/config/s", "delete_config"),
    ("PUT", "/mode/s?force=true", "update_mode"),
    ("DELETE", "/mode", "delete_mode"),
    ("POST", "/subjects/s", "write"),  # a lookup, not a write: never forwarded by the API
])
def test_operations_of_write_requests(method: str, path: str, operation: str) -> None:
    assert operation_for(method, path) == operation
