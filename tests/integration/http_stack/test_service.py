"""moldau.http served on a free port, spoken to with a real HTTP client (aiohttp's)."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from moldau.http import (
    HttpError,
    HttpService,
    MediaTypes,
    json_response,
    parse_listeners,
    query_bool,
    read_json,
)
from moldau.http.server import build_app

TYPES = MediaTypes(
    produces=("application/vnd.schemaregistry.v1+json", "application/json"),
    consumes=("application/vnd.schemaregistry.v1+json", "application/json",
              "application/octet-stream"),
)


def _app() -> web.Application:
    app = build_app(TYPES, client_max_size=100_000)

    async def echo(request: web.Request) -> web.Response:
        return json_response(request, {"got": await read_json(request),
                                       "flag": query_bool(request, "flag")})

    async def refuse(request: web.Request) -> web.Response:
        raise HttpError(404, 40401, "Subject 'x' not found.")

    async def boom(request: web.Request) -> web.Response:
        raise RuntimeError("a secret detail")

    app.router.add_post("/echo", echo)
    app.router.add_get("/refuse", refuse)
    app.router.add_get("/boom", boom)
    return app


async def _call(base: str, method: str, path: str, **kwargs: Any) -> tuple[int, str, Any]:
    async with aiohttp.ClientSession() as session, session.request(
            method, base + path, **kwargs) as response:
        text = await response.text()
        return response.status, response.headers.get("Content-Type", ""), json.loads(text)


def test_errors_are_json_bodies_and_types_are_negotiated(caplog: pytest.LogCaptureFixture
                                                         ) -> None:
    async def run() -> None:
        service = HttpService(_app(), parse_listeners("http://127.0.0.1:0"), name="test")
        await service.start()
        base = f"http://127.0.0.1:{service.port}"
        try:
            status, ctype, body = await _call(base, "POST", "/echo?flag=TRUE", json={"a": 1})
            assert (status, body) == (200, {"got": {"a": 1}, "flag": True})
            assert ctype == "application/vnd.schemaregistry.v1+json"
            status, ctype, body = await _call(base, "POST", "/echo?flag=False", data=b"[1]",
                                              headers={"Accept": "application/json"})
            assert (status, ctype, body) == (200, "application/json",
                                             {"got": [1], "flag": False})
            cases = [
                ("POST", "/echo", {"data": b"{not json"}, 400, 400),
                ("POST", "/echo", {"data": b""}, 400, 400),
                ("POST", "/echo", {"data": b"[" + b"1," * 60_000 + b"1]"}, 413, 413),
                # hostile JSON a parser can choke on: 400, not a 500 with a traceback
                ("POST", "/echo", {"data": b"[" * 50_000 + b"]" * 50_000}, 400, 400),
                ("POST", "/echo", {"data": b"9" * 5_000}, 400, 400),
                ("POST", "/echo", {"data": b"{}", "headers": {"Content-Type": "text/xml"}},
                 415, 415),
                ("GET", "/echo", {}, 405, 405),
                ("GET", "/no/such/route", {}, 404, 404),
                ("GET", "/refuse", {}, 404, 40401),
                ("GET", "/refuse", {"headers": {"Accept": "text/html"}}, 406, 406),
                ("GET", "/boom", {}, 500, 50001),
            ]
            for method, path, kwargs, want_status, want_code in cases:
                status, ctype, body = await _call(base, method, path, **kwargs)
                assert (status, body["error_code"]) == (want_status, want_code), (path, body)
                assert set(body) == {"error_code", "message"}
                assert ctype == "application/vnd.schemaregistry.v1+json"
            status, _, body = await _call(base, "GET", "/boom")
            assert "secret" not in body["message"] and "Traceback" not in body["message"]
        finally:
            await service.stop()

    with caplog.at_level(logging.ERROR, logger="moldau.http"):
        asyncio.run(run())
    assert "a secret detail" in caplog.text  # the cause is logged server-side


def test_service_reports_bound_ports_and_names_the_listener_it_cannot_bind() -> None:
    async def run() -> None:
        service = HttpService(_app(), parse_listeners("http://127.0.0.1:0,http://127.0.0.1:0"))
        await service.start()
        try:
            ports = [port for _, port in service.bound]
            assert len(set(ports)) == 2 and all(ports)
            taken = parse_listeners(f"http://127.0.0.1:{ports[0]}")
            with pytest.raises(OSError) as info:
                await HttpService(_app(), taken, name="second").start()
            assert f"http://127.0.0.1:{ports[0]}" in str(info.value)
        finally:
            await service.stop()

    asyncio.run(run())

