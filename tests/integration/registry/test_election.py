"""The registry's primary election against a real broker: several members in one process
and in separate processes; one primary (the eligible member with the lowest URL), failover
when the primary leaves (at once) or is killed (after its session timeout), ineligible
members never primary, and a primary that catches up with the store before it acts."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from moldau.client import AdminClient
from moldau.client.group import requests
from moldau.protocol.api_keys import ApiKey
from moldau.registry.election import Identity, PrimaryElection
from moldau.testing.runner import InProcessBroker

pytestmark = pytest.mark.timeout(120)

SETTINGS = {"group.min.session.timeout.ms": 500, "group.initial.rebalance.delay.ms": 0,
            "offsets.topic.num.partitions": 3}


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker(settings=SETTINGS) as running:
        yield running


def group_name() -> str:
    return f"sr-{uuid.uuid4().hex[:8]}"


def member(broker: InProcessBroker, group: str, port: int, *, eligible: bool = True,
           session_ms: int = 3000, catch_up: Callable[[], Awaitable[Any]] | None = None
           ) -> PrimaryElection:
    election = PrimaryElection(
        {"bootstrap.servers": broker.bootstrap, "retry.backoff.max.ms": 300},
        Identity("127.0.0.1", port, eligible=eligible), group_id=group,
        session_timeout_ms=session_ms, heartbeat_interval_ms=min(300, session_ms // 4),
        catch_up=catch_up)
    election.views = []  # type: ignore[attr-defined]
    election.add_listener(lambda e: e.views.append((e.is_primary, e.primary_url)))
    return election


def agreed(elections: Sequence[PrimaryElection]) -> str | bool | None:
    """The primary URL every member agrees on (None: agreed there is none), or False while
    they disagree, a rebalance is still running or the named primary still catches up."""
    if any(not e.member.stable or e.generation != e.member.generation for e in elections):
        return False  # rebalancing, or the new assignment is not applied yet
    if any(e.catching_up for e in elections):
        return False  # primary_url is None until the promotion task ends: not "no primary"
    if len({e.generation for e in elections}) != 1:
        return False
    primaries = [e for e in elections if e.is_primary]
    if len(primaries) > 1:
        raise AssertionError(f"two primaries: {[e.identity.url for e in primaries]}")
    urls = {e.primary_url for e in elections}
    if len(urls) != 1:
        return False
    (url,) = urls
    if url is None:
        return None if not primaries else False
    return url if primaries and primaries[0].identity.url == url else False


async def settle(elections: Sequence[PrimaryElection], timeout: float = 20) -> str | None:
    deadline = time.monotonic() + timeout
    while True:
        state = agreed(elections)
        if state is not False:
            return state  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError("members did not agree: " + str([
                (e.identity.url, e.generation, e.is_primary, e.primary_url)
                for e in elections]))
        await asyncio.sleep(0.05)


def test_one_primary_then_failover_at_once_when_it_leaves(broker: InProcessBroker) -> None:
    async def run() -> None:
        group = group_name()
        # A long session: a member that leaves must not make the others wait for it.
        a, b, c = (member(broker, group, port, session_ms=20000) for port in (9101, 9102, 9103))
        for e in (c, a, b):  # join order does not matter
            await e.start()
        try:
            assert await settle([a, b, c]) == "http://127.0.0.1:9101"
            assert a.is_primary and not b.is_primary and not c.is_primary
            started = time.monotonic()
            await a.stop()
            assert not a.is_primary and a.primary_url is None
            assert await settle([b, c]) == "http://127.0.0.1:9102"
            assert time.monotonic() - started < 10
            await b.stop()
            assert await settle([c]) == "http://127.0.0.1:9103"
        finally:
            for e in (a, b, c):
                await e.stop()

    asyncio.run(run())


def test_ineligible_members_never_become_primary(broker: InProcessBroker) -> None:
    async def run() -> None:
        group = group_name()
        low = member(broker, group, 9201, eligible=False)
        mid = member(broker, group, 9202, eligible=False)
        high = member(broker, group, 9203)
        members = [low, mid, high]
        for e in members:
            await e.start()
        try:
            assert await settle(members) == "http://127.0.0.1:9203"
            await high.stop()
            assert await settle([low, mid]) is None
            assert [v for e in (low, mid) for v in e.views if v[0]] == []
            again = member(broker, group, 9299)
            await again.start()
            members = [low, mid, again]
            assert await settle(members) == "http://127.0.0.1:9299"
            assert not low.is_primary and not mid.is_primary
        finally:
            for e in (*members, high):
                await e.stop()

    asyncio.run(run())


def test_the_primary_catches_up_before_it_acts(broker: InProcessBroker) -> None:
    async def run() -> None:
        group = group_name()
        release = asyncio.Event()
        calls: list[str] = []

        async def catch_up() -> None:
            calls.append("called")
            if len(calls) == 1:
                raise TimeoutError("store not reached yet")  # retried
            await release.wait()

        primary = member(broker, group, 9301, catch_up=catch_up)
        other = member(broker, group, 9302)
        await primary.start()
        await other.start()
        try:
            deadline = time.monotonic() + 20
            while other.primary_url != "http://127.0.0.1:9301" or len(calls) < 2:
                assert time.monotonic() < deadline, (other.primary_url, calls)
                await asyncio.sleep(0.05)
            # Elected, still reading the store: neither primary nor a target for writes.
            assert not primary.is_primary and primary.primary_url is None
            assert await primary.wait_for_primary(0.2) is None
            release.set()
            assert await primary.wait_for_primary(10) == "http://127.0.0.1:9301"
            assert primary.is_primary
            assert primary.views[-1] == (True, "http://127.0.0.1:9301")
            assert all(not is_primary for is_primary, _url in primary.views[:-1])
        finally:
            await other.stop()
            await primary.stop()

    asyncio.run(run())


def test_the_group_as_the_broker_describes_it(broker: InProcessBroker) -> None:
    async def run() -> None:
        group = group_name()
        elections = [member(broker, group, 9401), member(broker, group, 9402, eligible=False)]
        for e in elections:
            await e.start()
        try:
            await settle(elections)
            async with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
                found = await admin.cluster.find_coordinators([group])
                response = await admin.cluster.request(
                    found[group].node_id, ApiKey.DESCRIBE_GROUPS,
                    requests.describe_groups([group]))
            (described,) = response.groups
            assert (described.group_state, described.protocol_type,
                    described.protocol_data) == ("Stable", "sr", "v0")
            identities = sorted((json.loads(bytes(m.member_metadata))
                                 for m in described.members), key=lambda i: i["port"])
            assert identities == [e.identity.to_dict() for e in elections]
            primary_id = elections[0].member.member_id
            for m in described.members:
                assignment = json.loads(bytes(m.member_assignment))
                assert assignment["master"] == primary_id
                assert assignment["master_identity"]["port"] == 9401
                assert assignment["error"] == 0
        finally:
            for e in elections:
                await e.stop()

    asyncio.run(run())


# --- separate processes -------------------------------------------------------------------

class Proc:
    """An election member process and the views it reported."""

    def __init__(self, broker: InProcessBroker, group: str, port: int, session_ms: int,
                 eligible: bool = True) -> None:
        script = Path(__file__).with_name("election_proc.py")
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            [sys.executable, str(script), broker.bootstrap, group, "127.0.0.1", str(port),
             "1" if eligible else "0", str(session_ms)],
            stdout=subprocess.PIPE, text=True, env=env)
        self.views: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.views.append(json.loads(line))

    @property
    def last(self) -> dict[str, Any]:
        return self.views[-1] if self.views else {}

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def wait_for(condition: Callable[[], bool], timeout: float, what: str,
             procs: Sequence[Proc]) -> float:
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"{what} not reached in {timeout}s: "
                                 f"{[(p.url, p.last) for p in procs]}")
        time.sleep(0.05)
    return time.monotonic() - start


def agree(procs: Sequence[Proc], url: str) -> Callable[[], bool]:
    def check() -> bool:
        views = [p.last for p in procs]
        if any(not v for v in views) or len({v["generation"] for v in views}) != 1:
            return False
        return all(v["url"] == url and v["primary"] == (p.url == url)
                   for p, v in zip(procs, views, strict=True))
    return check


def test_processes_fail_over_after_kill_9_and_at_once_after_sigterm(
        broker: InProcessBroker) -> None:
    group, session_ms = group_name(), 3000
    procs = [Proc(broker, group, port, session_ms) for port in (9501, 9502, 9503)]
    try:
        first, second, third = procs
        wait_for(agree(procs, first.url), 60, "one primary", procs)
        seen = len(third.views)
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
        # The killed member cannot leave: the others wait for its session to time out.
        took = wait_for(agree([second, third], second.url), 30, "failover after kill -9",
                        procs)
        assert took > 1.0, took
        # The third member (not the lowest URL of the survivors) was never primary since.
        assert not any(v["primary"] for v in third.views[seen:])
        second.proc.send_signal(signal.SIGTERM)
        assert second.proc.wait(20) == 0
        took = wait_for(agree([third], third.url), 30, "failover after SIGTERM", procs)
        assert took < session_ms / 1000, took
    finally:
        for p in procs:
            p.close()
