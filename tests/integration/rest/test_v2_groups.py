"""API v2 consumer instances as real group members: two instances of one group share a
topic's partitions and rebalance when one leaves; idle instances expire (leaving the group),
busy ones do not."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from typing import Any

import pytest

from moldau.client import NewTopic
from moldau.testing.runner import InProcessBroker

from .rest_harness import BINARY, Client, proxy, run, unique


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker() as node:
        yield node


async def _members(client: Client, group: str) -> tuple[str, int]:
    admin = await client.proxy.ctx.admin()
    found: Any = await admin.describe_groups([group])
    description = found[group]
    return description.state, len(description.members)


async def _assignment(client: Client, path: str) -> list[int]:
    body = await client.ok("GET", f"{path}/assignments")
    return sorted(p["partition"] for p in body["partitions"])


async def _poll_until(client: Client, paths: list[str], wanted: list[list[int]]
                      ) -> list[list[int]]:
    """Read on every instance at once (a rebalance waits for every member to poll) until
    their assignments are ``wanted`` (in any order); the assignments, in ``paths`` order."""
    for _ in range(60):
        await asyncio.gather(*(client.call("GET", f"{p}/records?timeout=300", accept=BINARY)
                               for p in paths))
        found = [await _assignment(client, p) for p in paths]
        if sorted(found) == sorted(wanted):
            return found
    raise AssertionError(f"assignments {[await _assignment(client, p) for p in paths]}, "
                         f"wanted {wanted}")


def test_two_instances_share_and_rebalance(broker: InProcessBroker) -> None:
    async def scenario() -> None:
        async with proxy(broker.bootstrap) as client:
            topic, group = unique("reb"), unique("g")
            admin = await client.proxy.ctx.admin()
            await admin.create_topics([NewTopic(topic, 2, 1)])
            settings = {"auto.offset.reset": "earliest"}
            first = await client.consumer(group, "first", **settings)
            await client.ok("POST", f"{first}/subscription", {"topics": [topic]}, status=204)
            await _poll_until(client, [first], [[0, 1]])
            second = await client.consumer(group, "second", **settings)
            await client.ok("POST", f"{second}/subscription", {"topics": [topic]}, status=204)
            owned = await _poll_until(client, [first, second], [[0], [1]])
            assert await _members(client, group) == ("Stable", 2)
            # each instance reads only its own partition
            for partition in (0, 1):
                body = {"records": [{"value": base64.b64encode(b"p%d" % partition).decode()}]}
                await client.ok("POST", f"/topics/{topic}/partitions/{partition}", body,
                                ctype=BINARY)
            got_first = await client.records(first)
            got_second = await client.records(second)
            value = {0: "cDA=", 1: "cDE="}
            for got, mine in ((got_first, owned[0][0]), (got_second, owned[1][0])):
                assert [(r["partition"], r["value"]) for r in got] == [(mine, value[mine])]
            # the second leaves: the first takes both partitions again
            await client.ok("DELETE", second, status=204)
            await _poll_until(client, [first], [[0, 1]])
            assert await _members(client, group) == ("Stable", 1)

    run(scenario())


def test_idle_instances_expire_and_leave_their_group(broker: InProcessBroker) -> None:
    async def scenario() -> None:
        async with proxy(broker.bootstrap, consumer_instance_timeout_ms=1500) as client:
            topic, group = unique("exp"), unique("g")
            admin = await client.proxy.ctx.admin()
            await admin.create_topics([NewTopic(topic, 1, 1)])
            path = await client.consumer(group, "idle")
            await client.ok("POST", f"{path}/subscription", {"topics": [topic]}, status=204)
            await _poll_until(client, [path], [[0]])
            assert await _members(client, group) == ("Stable", 1)
            # a read longer than the timeout keeps it alive while it runs
            busy = await client.consumer(unique("g"), "busy",
                                         **{"consumer.request.timeout.ms": 2500})
            await client.ok("POST", f"{busy}/subscription", {"topics": [topic]}, status=204)
            answer = await client.call("GET", f"{busy}/records", accept=BINARY)
            assert answer.status == 200
            assert (await client.call("GET", f"{busy}/subscription")).status == 200
            await asyncio.sleep(2.5)
            for name in (path, busy):
                answer = await client.call("GET", f"{name}/subscription")
                assert answer.error() == (404, 40403)
            for _ in range(50):
                if await _members(client, group) == ("Empty", 0):
                    break
                await asyncio.sleep(0.1)
            assert await _members(client, group) == ("Empty", 0)
            assert client.proxy.app is not None and not _instances(client)

    run(scenario())


def _instances(client: Client) -> dict[Any, Any]:
    from moldau.rest.v2.consumers import MANAGER_KEY

    return client.proxy.app[MANAGER_KEY].instances


def test_instances_get_kafkas_default_client_id(broker: InProcessBroker) -> None:
    # Confluent's proxy leaves client.id unset, so the Java consumer calls itself
    # consumer-<group>-<n>; v3's consumer listing shows it (kafi's suite checks the prefix).
    # A client.id in the proxy's settings wins.
    async def members(client: Client, group: str, topic: str) -> list[str]:
        path = await client.consumer(group)
        await client.ok("POST", f"{path}/subscription", {"topics": [topic]}, status=204)
        await _poll_until(client, [path], [[0]])
        cid = (await client.ok("GET", "/v3/clusters"))["data"][0]["cluster_id"]
        listed = await client.ok("GET", f"/v3/clusters/{cid}/consumer-groups/{group}/consumers")
        return [member["client_id"] for member in listed["data"]]

    async def scenario() -> None:
        topic, group, other = unique("cid"), unique("g"), unique("g")
        async with proxy(broker.bootstrap) as client:
            admin = await client.proxy.ctx.admin()
            await admin.create_topics([NewTopic(topic, 1, 1)])
            [client_id] = await members(client, group, topic)
            assert client_id.startswith(f"consumer-{group}-"), client_id
            assert client_id.removeprefix(f"consumer-{group}-").isdigit()
        async with proxy(broker.bootstrap, consumer_client_id="mine") as client:
            assert await members(client, other, topic) == ["mine"]

    run(scenario())
