"""API v2 consumer instances against an in-process broker: subscription (topics and pattern),
assignments, seeks (offset, beginning, end, timestamp), commits (given and everything read),
committed offsets, reads with timeout, max_bytes and fetch.min.bytes, base_uri, and every
documented error code."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Iterator

import pytest

from moldau.client import NewTopic
from moldau.testing.runner import InProcessBroker

from .rest_harness import BINARY, JSON_V2, V2, Client, proxy, run, unique


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker() as node:
        yield node


async def _topic(client: Client, partitions: int = 1, name: str | None = None) -> str:
    name = name or unique("con")
    admin = await client.proxy.ctx.admin()
    await admin.create_topics([NewTopic(name, partitions, 1)])
    return name


async def _produce(client: Client, topic: str, values: list[bytes], partition: int = 0) -> None:
    body = {"records": [{"value": base64.b64encode(v).decode()} for v in values]}
    answer = await client.ok("POST", f"/topics/{topic}/partitions/{partition}", body,
                             ctype=BINARY)
    assert all(o["error_code"] is None for o in answer["offsets"])


def _values(records: list[dict[str, object]]) -> list[bytes]:
    return [base64.b64decode(str(r["value"])) for r in records]


def test_commit_and_committed_offsets(broker: InProcessBroker) -> None:
    async def scenario() -> None:
        async with proxy(broker.bootstrap) as client:
            topic, group = await _topic(client), unique("g")
            await _produce(client, topic, [b"r%d" % i for i in range(5)])
            path = await client.consumer(group, **{"auto.offset.reset": "earliest",
                                                   "auto.commit.enable": "false"})
            await client.ok("POST", f"{path}/subscription/", {"topics": [topic]}, status=204)
            assert await client.ok("GET", f"{path}/subscription") == {"topics": [topic]}
            got = await client.records(path, want=5)
            assert _values(got) == [b"r%d" % i for i in range(5)]
            assert [r["offset"] for r in got] == list(range(5))
            tp = {"topic": topic, "partition": 0}
            assert await client.ok("GET", f"{path}/offsets", {"partitions": [tp]}) == \
                {"offsets": []}
            # the offset given is the last one processed: the group stores offset + 1
            assert await client.ok("POST", f"{path}/offsets",
                                   {"offsets": [{**tp, "offset": 2, "metadata": "m"}]}) == []
            assert await client.ok("GET", f"{path}/offsets", {"partitions": [tp]}) == \
                {"offsets": [{**tp, "offset": 3, "metadata": "m"}]}
            # no body: everything read so far
            assert await client.ok("POST", f"{path}/offsets", raw=b"", ctype=V2) == []
            assert (await client.ok("GET", f"{path}/offsets",
                                    {"partitions": [tp]}))["offsets"][0]["offset"] == 5
            assert (await client.call("GET", f"{path}/offsets")).error() == (404, 40402)
            # ?async: the commit of everything read is sent without waiting for it
            await client.ok("POST", f"{path}/offsets", {"offsets": [{**tp, "offset": 0}]})
            assert await client.ok("POST", f"{path}/offsets?async=true") == []
            for _ in range(50):
                found = await client.ok("GET", f"{path}/offsets", {"partitions": [tp]})
                if found["offsets"][0]["offset"] == 5:
                    break
                await asyncio.sleep(0.05)
            assert found["offsets"][0]["offset"] == 5
            await client.ok("DELETE", path, status=204)
            # a new member of the group starts at the committed offset
            await _produce(client, topic, [b"r5"])
            path = await client.consumer(group)
            await client.ok("POST", f"{path}/subscription", {"topics": [topic]}, status=204)
            got = await client.records(path)
            assert [r["offset"] for r in got] == [5]
            await client.ok("DELETE", f"{path}/", status=204)

    run(scenario())


def test_assignments_and_seeks(broker: InProcessBroker) -> None:
    async def scenario() -> None:
        async with proxy(broker.bootstrap) as client:
            topic = await _topic(client, 2)
            await _produce(client, topic, [b"a%d" % i for i in range(6)])
            path = await client.consumer(unique("g"), **{"auto.offset.reset": "latest"})
            tps = [{"topic": topic, "partition": 0}]
            assert await client.ok("GET", f"{path}/assignments") == {"partitions": []}
            await client.ok("POST", f"{path}/assignments", {"partitions": tps}, status=204)
            assert await client.ok("GET", f"{path}/assignments") == {"partitions": tps}
            await client.ok("POST", f"{path}/positions",
                            {"offsets": [{**tps[0], "offset": 4}]}, status=204)
            assert [r["offset"] for r in await client.records(path, want=2)] == [4, 5]
            await client.ok("POST", f"{path}/positions/beginning", {"partitions": tps},
                            status=204)
            assert [r["offset"] for r in await client.records(path, want=6)] == list(range(6))
            await client.ok("POST", f"{path}/positions/end", {"partitions": tps}, status=204)
            answer = await client.call("GET", f"{path}/records?timeout=300", accept=BINARY)
            assert answer.status == 200 and answer.body == []
            stamp = int(time.time() * 1000) - 60_000
            await client.ok("POST", f"{path}/positions",
                            {"timestamps": [{**tps[0], "timestamp": stamp}]}, status=204)
            assert len(await client.records(path, want=6)) == 6
            future = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 86400))
            await client.ok("POST", f"{path}/positions",
                            {"timestamps": [{**tps[0], "timestamp": future}]}, status=204)
            await _produce(client, topic, [b"late"])
            assert _values(await client.records(path)) == [b"late"]
            # seeking a partition the instance does not hold: 40903, as the Java consumer
            other = {"topic": topic, "partition": 1}
            for sub, body in (("positions", {"offsets": [{**other, "offset": 0}]}),
                              ("positions/beginning", {"partitions": [other]}),
                              ("positions/end", {"partitions": [other]})):
                answer = await client.call("POST", f"{path}/{sub}", body)
                assert answer.error() == (409, 40903), sub
            # subscribe after assign, assign after subscribe: 40903
            answer = await client.call("POST", f"{path}/subscription", {"topics": [topic]})
            assert answer.error() == (409, 40903)
            await client.ok("POST", f"{path}/assignments", {"partitions": []}, status=204)
            await client.ok("POST", f"{path}/subscription", {"topics": [topic]}, status=204)
            answer = await client.call("POST", f"{path}/assignments", {"partitions": tps})
            assert answer.error() == (409, 40903)
            await client.ok("DELETE", f"{path}/subscription", status=204)
            assert await client.ok("GET", f"{path}/subscription") == {"topics": []}
            answer = await client.call("GET", f"{path}/records", accept=BINARY)
            assert answer.error() == (409, 40903)

    run(scenario())


def test_reads_timeout_max_bytes_and_min_bytes(broker: InProcessBroker) -> None:
    async def scenario() -> None:
        async with proxy(broker.bootstrap) as client:
            topic = await _topic(client)
            await _produce(client, topic, [b"0123456789"] * 5)
            tps = {"partitions": [{"topic": topic, "partition": 0}]}
            path = await client.consumer(unique("g"), **{"auto.offset.reset": "earliest"})
            await client.ok("POST", f"{path}/assignments", tps, status=204)
            # max_bytes: a record that would reach the limit stays for the next read
            got = await client.records(path, query="?max_bytes=25", want=1)
            assert [r["offset"] for r in got] == [0, 1]
            got = await client.records(path, query="?max_bytes=25", want=1)
            assert [r["offset"] for r in got] == [2, 3]
            # the default read waits consumer.request.timeout.ms (1 s) for more
            started = time.monotonic()
            assert [r["offset"] for r in await client.records(path)] == [4]
            assert time.monotonic() - started >= 0.9
            started = time.monotonic()
            answer = await client.call("GET", f"{path}/records?timeout=200", accept=BINARY)
            assert answer.body == [] and time.monotonic() - started < 0.9
            # fetch.min.bytes=1: answer as soon as records are there
            quick = await client.consumer(unique("g"), **{"auto.offset.reset": "earliest",
                                                          "fetch.min.bytes": 1,
                                                          "consumer.request.timeout.ms": 5000})
            await client.ok("POST", f"{quick}/assignments", tps, status=204)
            await client.records(quick, want=5)  # first reads may wait for the position
            await _produce(client, topic, [b"x"])
            started = time.monotonic()
            assert _values(await client.records(quick)) == [b"x"]
            assert time.monotonic() - started < 2.0

    run(scenario())


def test_topic_pattern_and_errors(broker: InProcessBroker) -> None:
    async def scenario() -> None:
        async with proxy(broker.bootstrap) as client:
            prefix = unique("pat")
            first = await _topic(client, name=f"{prefix}-a")
            second = await _topic(client, name=f"{prefix}-b")
            await _produce(client, first, [b"1"])
            await _produce(client, second, [b"2"])
            group = unique("g")
            path = await client.consumer(group, format="binary",
                                         **{"auto.offset.reset": "earliest"})
            await client.ok("POST", f"{path}/subscription",
                            {"topic_pattern": f"{prefix}-.*"}, status=204)
            got = await client.records(path, want=2)
            assert sorted(_values(got)) == [b"1", b"2"]
            assert await client.ok("GET", f"{path}/subscription") == \
                {"topics": sorted([first, second])}
            name = path.rsplit("/", 1)[1]
            answer = await client.call("POST", f"/consumers/{group}", {"name": name})
            assert answer.error() == (409, 40902)
            answer = await client.call("GET", f"{path}/records", accept=JSON_V2)
            assert answer.error() == (406, 40601)
            for body, expected in (({"format": "xml"}, (422, 422)),
                                   ({"auto.offset.reset": "sometimes"}, (422, 42204)),
                                   ({"auto.commit.enable": "maybe"}, (422, 42204)),
                                   ({"fetch.min.bytes": 20000000}, (422, 40001))):
                answer = await client.call("POST", f"/consumers/{group}", body)
                assert answer.error() == expected, body
            answer = await client.call("POST", f"{path}/subscription", {"topic_pattern": "(("})
            assert answer.error() == (422, 422)
            gone = f"/consumers/{group}/instances/nobody"
            for method, sub, body in (("DELETE", "", None), ("GET", "/subscription", None),
                                      ("POST", "/subscription", {"topics": [first]}),
                                      ("DELETE", "/subscription", None),
                                      ("GET", "/assignments", None),
                                      ("POST", "/assignments", {"partitions": []}),
                                      ("POST", "/positions", {"offsets": []}),
                                      ("POST", "/positions/beginning", {"partitions": []}),
                                      ("POST", "/positions/end", {"partitions": []}),
                                      ("POST", "/offsets", None),
                                      ("GET", "/offsets", {"partitions": []}),
                                      ("GET", "/records", None)):
                answer = await client.call(method, gone + sub, body)
                assert answer.error() == (404, 40403), (method, sub)

    run(scenario())


def test_base_uri(broker: InProcessBroker) -> None:
    async def scenario() -> None:
        async with proxy(broker.bootstrap) as client:
            made = await client.ok("POST", "/consumers/g1", {"name": "n1"})
            assert made == {"instance_id": "n1",
                            "base_uri": f"{client.base}/consumers/g1/instances/n1"}
            made = await client.ok("POST", "/consumers/g%20x", {"name": "a/b"},
                                   headers={"Host": "proxy.example:9999"})
            assert made["base_uri"] == "http://proxy.example:9999/consumers/g%20x/instances/a%2Fb"
            made = await client.ok("POST", "/consumers/g1")  # no body: generated name
            assert made["instance_id"].startswith("rest-consumer-")
        async with proxy(broker.bootstrap, host_name="myhost", id="p7") as client:
            made = await client.ok("POST", "/consumers/g1", {"name": "n1"})
            port = client.proxy.port
            assert made["base_uri"] == f"http://myhost:{port}/consumers/g1/instances/n1"
            made = await client.ok("POST", "/consumers/g1", {"format": "json"})
            assert made["instance_id"].startswith("rest-consumer-p7-")
        async with proxy(broker.bootstrap, advertised_listeners="http://adv.example:1234",
                         host_name="ignored") as client:
            made = await client.ok("POST", "/consumers/g1", {"name": "n1"})
            assert made["base_uri"] == "http://adv.example:1234/consumers/g1/instances/n1"

    run(scenario())
