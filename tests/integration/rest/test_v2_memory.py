"""1,000 consumer instances created and abandoned: after consumer.instance.timeout.ms they are
gone, and so is the memory they took.

Measured two ways, in this process (the proxy runs in the test's event loop, the broker in a
thread): tracemalloc's count of live Python allocations must come back to its level before the
instances (it measured them while they lived, so the test knows they were real), and the
process RSS must not grow over a second round of 1,000 (Python keeps freed memory in its own
pools instead of giving it to the OS, so RSS shows reuse, not return). 100 of each 1,000 are
real group members (subscribed, read once: connected, joined); the others are created and
touched only, as most abandoned instances of a careless client are.

What stays after expiry (about 2 % of the instances' 65 MiB when measured) is the HTTP
client's keep-alive connections of this test and their server-side parsers, the instance
table's dict (Python dicts do not shrink) and the broker's records of the 100 now empty
groups (the broker runs in this process too).
"""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest

from moldau.client import NewTopic
from moldau.rest.v2.consumers import MANAGER_KEY
from moldau.testing.runner import InProcessBroker

from .rest_harness import BINARY, Client, proxy, run, unique

INSTANCES = 1000
MEMBERS = 100


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker() as node:
        yield node


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/self/status")


async def _round(client: Client, topic: str, count: int, members: int) -> None:
    """``count`` instances made and touched; the first ``members`` of them subscribed and
    read once (each in a group of its own: one member, no rebalance waits)."""
    joined = await asyncio.gather(*(client.consumer(unique("mem")) for _ in range(members)))
    await asyncio.gather(*(client.ok("POST", f"{p}/subscription", {"topics": [topic]},
                                     status=204) for p in joined))
    answers = await asyncio.gather(*(client.call("GET", f"{p}/records?timeout=200",
                                                 accept=BINARY) for p in joined))
    assert all(a.status == 200 for a in answers)
    for start in range(members, count, 100):
        made = await asyncio.gather(*(client.consumer(unique("mem")) for _ in range(
            start, min(count, start + 100))))
        await asyncio.gather(*(client.ok("GET", f"{p}/subscription") for p in made))


async def _all_expired(client: Client) -> None:
    manager = client.proxy.app[MANAGER_KEY]
    for _ in range(600):
        if not manager.instances and not manager._closing:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{len(manager.instances)} instances still there")


@pytest.mark.slow  # ~40 s
def test_thousand_abandoned_instances_give_their_memory_back(broker: InProcessBroker) -> None:
    async def scenario() -> dict[str, Any]:
        async with proxy(broker.bootstrap, consumer_instance_timeout_ms=10000) as client:
            topic = unique("mem")
            admin = await client.proxy.ctx.admin()
            await admin.create_topics([NewTopic(topic, 1, 1)])
            manager = client.proxy.app[MANAGER_KEY]
            await _round(client, topic, 50, 5)  # warm up caches, pools, code paths
            await _all_expired(client)
            gc.collect()
            tracemalloc.start()
            try:
                base = tracemalloc.get_traced_memory()[0]
                await _round(client, topic, INSTANCES, MEMBERS)
                assert len(manager.instances) == INSTANCES
                gc.collect()
                alive = tracemalloc.get_traced_memory()[0]
                await _all_expired(client)
                await asyncio.sleep(0.5)  # closing connections finish their callbacks
                gc.collect()
                after = tracemalloc.get_traced_memory()[0]
            finally:
                tracemalloc.stop()
            gc.collect()
            rss_first = _rss_kib()
            await _round(client, topic, INSTANCES, MEMBERS)
            rss_peak = _rss_kib()
            await _all_expired(client)
            gc.collect()
            rss_second = _rss_kib()
            return {"base": base, "alive": alive, "after": after, "rss_first": rss_first,
                    "rss_peak": rss_peak, "rss_second": rss_second}

    m = run(scenario())
    grown, left = m["alive"] - m["base"], m["after"] - m["base"]
    report = (f"traced: base {m['base'] >> 10} KiB, with {INSTANCES} instances "
              f"+{grown >> 10} KiB, after expiry +{left >> 10} KiB; RSS after round 1 "
              f"{m['rss_first']} KiB, peak of round 2 {m['rss_peak']} KiB, after round 2 "
              f"{m['rss_second']} KiB")
    print(report)
    assert grown > INSTANCES * 2048, report  # the instances were really held...
    assert left < max(grown // 20, 1 << 20), report  # ...and are gone: under 5 % (or 1 MiB)
    assert m["rss_second"] - m["rss_first"] < 32 * 1024, report  # freed memory is reused
