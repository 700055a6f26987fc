"""Hostile and careless input to every API v2 route: each answer is a JSON error body with a
4xx status (never an unexpected 500, never a stack trace), and the proxy keeps serving.
Concurrent produce requests beyond the producer's buffer.memory wait for room and succeed."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from typing import Any

import pytest

from moldau.client import NewTopic
from moldau.testing.runner import InProcessBroker

from .rest_harness import BINARY, JSON_V2, V2, proxy, run, unique

BODIES: list[Any] = [
    b"\x00\xff garbage", b"[", b"{}", b"[]", b"null", b'"text"', b"12",
    b'{"records": "x"}', b'{"records": [1, 2]}', b'{"records": [{"partition": "zero"}]}',
    b'{"records": [{"partition": -1, "value": "eA=="}]}',
    b'{"partitions": 5}', b'{"partitions": [{"topic": 1, "partition": 0}]}',
    b'{"partitions": [{"topic": "t", "partition": true}]}',
    b'{"offsets": [{"topic": "t", "partition": 0}]}',
    b'{"offsets": [{"topic": "t", "partition": 0, "offset": -4}]}',
    b'{"timestamps": [{"topic": "t", "partition": 0, "timestamp": "yesterday"}]}',
    b'{"topics": "t"}', b'{"topics": [1]}', b'{"topic_pattern": 5}',
    b'{"name": 7}', b'{"name": ""}', b'{"format": 3}', b'{"fetch.min.bytes": "many"}',
    b'{"consumer.request.timeout.ms": []}',
    b'{"value_schema": 5, "records": [{"value": 1}]}',
    b'{"value_schema_id": "one", "records": [{"value": 1}]}',
    b"[" * 5000 + b"]" * 5000,
    b'{"records": [{"value": ' + b"9" * 5000 + b"}]}",
]


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker() as node:
        yield node


def test_every_route_refuses_garbage_cleanly(broker: InProcessBroker) -> None:
    async def scenario() -> None:
        async with proxy(broker.bootstrap) as client:
            topic, group = unique("bad"), unique("g")
            admin = await client.proxy.ctx.admin()
            await admin.create_topics([NewTopic(topic, 1, 1)])
            path = await client.consumer(group, "victim")
            await client.ok("POST", f"{path}/assignments",
                            {"partitions": [{"topic": topic, "partition": 0}]}, status=204)
            routes = [("POST", f"/topics/{topic}"), ("POST", f"/topics/{topic}/partitions/0"),
                      ("POST", f"/consumers/{group}"), ("POST", f"{path}/subscription"),
                      ("POST", f"{path}/assignments"), ("POST", f"{path}/positions"),
                      ("POST", f"{path}/positions/beginning"),
                      ("POST", f"{path}/positions/end"), ("POST", f"{path}/offsets"),
                      ("GET", f"{path}/offsets")]
            seen: set[int] = set()
            for method, route in routes:
                for ctype in (JSON_V2, BINARY, V2):
                    for raw in BODIES:
                        answer = await client.call(method, route, raw=raw, ctype=ctype)
                        seen.add(answer.status)
                        if answer.status >= 300:
                            answer.error()  # a JSON error body, nothing else
                            assert answer.status < 500, (method, route, raw[:60], answer)
                            assert "Traceback" not in answer.body["message"]
            assert seen >= {400, 422}
            # still serving, the instance still there and sane
            assert topic in await client.ok("GET", "/topics")
            assert await client.ok("GET", f"{path}/assignments") == \
                {"partitions": [{"topic": topic, "partition": 0}]}

    run(scenario())


def test_hostile_paths_and_queries(broker: InProcessBroker) -> None:
    async def scenario() -> None:
        async with proxy(broker.bootstrap) as client:
            for path in ("/topics/%00", "/topics/" + "x" * 3000, "/topics/a%2Fb/partitions",
                         "/consumers/g/instances/i/records?timeout=abc",
                         "/consumers/g/instances/i/records?max_bytes=-1",
                         "/topics/t/partitions/99999999999999999999999",
                         "/consumers/%ff/instances/%fe/subscription"):
                answer = await client.call("GET", path)
                assert 400 <= answer.status < 500, (path, answer)
                answer.error()
            assert await client.ok("GET", "/brokers") == {"brokers": [1]}

    run(scenario())


def test_produce_back_pressure(broker: InProcessBroker) -> None:
    async def scenario() -> None:
        async with proxy(broker.bootstrap, producer_buffer_memory=4096) as client:
            topic = unique("bp")
            admin = await client.proxy.ctx.admin()
            await admin.create_topics([NewTopic(topic, 1, 1)])
            state = client.proxy.app[_produce_key()]
            value = base64.b64encode(b"v" * 1500).decode()
            peak = 0

            async def watch() -> None:
                nonlocal peak
                while True:
                    peak = max(peak, state.budget.used)
                    await asyncio.sleep(0)

            watcher = asyncio.create_task(watch())
            answers = await asyncio.gather(*(
                client.ok("POST", f"/topics/{topic}", {"records": [{"value": value}] * 2},
                          ctype=BINARY) for _ in range(20)))
            watcher.cancel()
            offsets = sorted(o["offset"] for a in answers for o in a["offsets"])
            assert offsets == list(range(40))
            assert 0 < peak <= 4096 and state.budget.used == 0

    run(scenario())


def _produce_key() -> Any:
    from moldau.rest.v2.produce import PRODUCE_KEY

    return PRODUCE_KEY
