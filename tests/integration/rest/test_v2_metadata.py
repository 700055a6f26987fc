"""API v2 topics, partitions, offsets and brokers, content types and trailing slashes, against
an in-process broker, with aiohttp's HTTP client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from moldau.client import NewTopic
from moldau.testing.runner import InProcessBroker

from .rest_harness import BINARY, JSON_V2, V2, Client, proxy, run, unique


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker(settings={"auto.create.topics.enable": "true"}) as node:
        yield node


async def _topic(client: Client, partitions: int = 2) -> str:
    name = unique("topic")
    admin = await client.proxy.ctx.admin()
    await admin.create_topics([NewTopic(name, partitions, 1, {"retention.ms": "3600000"})])
    return name


def test_topics_partitions_offsets_brokers(broker: InProcessBroker) -> None:
    async def scenario() -> None:
        async with proxy(broker.bootstrap) as client:
            name = await _topic(client)
            answer = await client.call("GET", "/topics")
            assert answer.status == 200 and answer.ctype == V2
            assert name in answer.body and "__consumer_offsets" not in answer.body
            topic = await client.ok("GET", f"/topics/{name}")
            assert topic["name"] == name and topic["configs"]["retention.ms"] == "3600000"
            assert topic["partitions"] == [
                {"partition": p, "leader": 1,
                 "replicas": [{"broker": 1, "leader": True, "in_sync": True}]}
                for p in (0, 1)]
            assert await client.ok("GET", f"/topics/{name}/partitions") == topic["partitions"]
            assert await client.ok("GET", f"/topics/{name}/partitions/1") == \
                topic["partitions"][1]
            assert await client.ok("GET", f"/topics/{name}/partitions/0/offsets") == \
                {"beginning_offset": 0, "end_offset": 0}
            await client.ok("POST", f"/topics/{name}/partitions/0",
                            {"records": [{"value": "YQ=="}, {"value": "Yg=="}]}, ctype=BINARY)
            assert await client.ok("GET", f"/topics/{name}/partitions/0/offsets") == \
                {"beginning_offset": 0, "end_offset": 2}
            assert await client.ok("GET", "/brokers") == {"brokers": [1]}
            assert await client.ok("GET", "/") == {}

    run(scenario())


def test_unknown_topics_and_partitions(broker: InProcessBroker) -> None:
    async def scenario() -> None:
        async with proxy(broker.bootstrap) as client:
            name = await _topic(client, 1)
            missing = unique("missing")
            for path in (f"/topics/{missing}", f"/topics/{missing}/partitions",
                         f"/topics/{missing}/partitions/0",
                         f"/topics/{missing}/partitions/0/offsets"):
                assert (await client.call("GET", path)).error() == (404, 40401), path
            for path in (f"/topics/{name}/partitions/1", f"/topics/{name}/partitions/x",
                         f"/topics/{name}/partitions/1/offsets"):
                assert (await client.call("GET", path)).error() == (404, 40402), path
            answer = await client.call("POST", f"/topics/{name}/partitions/3",
                                       {"records": [{"value": "YQ=="}]}, ctype=BINARY)
            assert answer.error() == (404, 40402)
            answer = await client.call("POST", f"/topics/{name}",
                                       {"records": [{"value": "YQ==", "partition": 5}]},
                                       ctype=BINARY)
            assert answer.error() == (404, 40402)
            assert (await client.call("GET", "/nothing/here")).error() == (404, 404)
            assert (await client.call("PUT", "/topics")).error() == (405, 405)

    run(scenario())


def test_auto_create_off_is_40401(tmp_path: object) -> None:
    with InProcessBroker(settings={"auto.create.topics.enable": "false"}) as node:
        async def scenario() -> None:
            async with proxy(node.bootstrap) as client:
                answer = await client.call("POST", f"/topics/{unique('absent')}",
                                           {"records": [{"value": {"a": 1}}]}, ctype=JSON_V2)
                assert answer.error() == (404, 40401)

        run(scenario())


def test_content_types_and_trailing_slashes(broker: InProcessBroker) -> None:
    async def scenario() -> None:
        async with proxy(broker.bootstrap) as client:
            name = await _topic(client, 1)
            for accept in (V2, "application/vnd.kafka+json", "application/json", "*/*",
                           JSON_V2, f"text/html, {V2}; q=0.5"):
                answer = await client.call("GET", "/topics", accept=accept)
                assert answer.status == 200, accept
                expected = V2 if accept in ("*/*",) or accept.startswith("text/") else accept
                assert answer.ctype == expected
            answer = await client.call("GET", "/topics", accept="text/plain")
            assert answer.error() == (406, 406)
            for path in ("/topics/", f"/topics/{name}/", f"/topics/{name}/partitions/",
                         f"/topics/{name}/partitions/0/", "/brokers/"):
                assert (await client.call("GET", path)).status == 200, path
            # produce: the body's type names the format; a type v2 does not read is 415
            answer = await client.call("POST", f"/topics/{name}/", {"records": [{"value": "x"}]},
                                       ctype="text/plain")
            assert answer.error() == (415, 415)
            for ctype in (V2, "application/json", None):  # no embedded format: binary
                offsets = await client.ok("POST", f"/topics/{name}",
                                          {"records": [{"value": "aGk="}]}, ctype=ctype)
                assert offsets["offsets"][0]["error_code"] is None
            answer = await client.call("POST", f"/topics/{name}", raw=b"{not json",
                                       ctype=BINARY)
            assert answer.error() == (400, 400)
            answer = await client.call("POST", f"/topics/{name}", {"records": []}, ctype=BINARY)
            assert answer.error() == (422, 422)
            answer = await client.call("POST", f"/topics/{name}", {}, ctype=BINARY)
            assert answer.error() == (422, 422)

    run(scenario())


def test_request_size_limit(broker: InProcessBroker) -> None:
    async def scenario() -> None:
        async with proxy(broker.bootstrap, request_max_bytes=4096) as client:
            name = await _topic(client, 1)
            big = {"records": [{"value": "QUFB" * 2000}]}
            answer = await client.call("POST", f"/topics/{name}", big, ctype=BINARY)
            assert answer.error() == (413, 413)
            assert "4096" in answer.body["message"]
            small = await client.ok("POST", f"/topics/{name}", {"records": [{"value": "QQ=="}]},
                                    ctype=BINARY)
            assert small["offsets"][0]["offset"] == 0

    run(scenario())
