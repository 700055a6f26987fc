"""moldau.broker.zk.aio on a real ZooKeeper: results, watches and session state reach the
asyncio loop's own thread; errors keep kazoo's types; a session expiry fires pending watches;
a start against nothing fails within its timeout and leaves no kazoo thread behind."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError, NoNodeError, OperationTimeoutError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType
from kazoo.retry import KazooRetry

from moldau.broker.zk.aio import RECONNECT, AsyncZooKeeper, TransactionFailed
from moldau.testing.processes import closed_port
from moldau.testing.zookeeper import ZooKeeperEnsemble, expire_session


def _run(connect: str, body: Callable[[AsyncZooKeeper], Awaitable[Any]],
         session_timeout_ms: int = 10000) -> Any:
    async def main() -> Any:
        zk = AsyncZooKeeper(connect, session_timeout_ms=session_timeout_ms)
        await zk.start(30)
        try:
            return await body(zk)
        finally:
            await zk.stop()

    return asyncio.run(main())


def test_operations_and_errors(zookeeper_connect: str) -> None:
    async def body(zk: AsyncZooKeeper) -> None:
        assert await zk.exists("/") is not None  # start created the chroot
        assert await zk.create("/a/b", b"1", makepath=True) == "/a/b"
        data, stat = await zk.get("/a/b")
        assert (data, stat.version) == (b"1", 0)
        assert (await zk.set("/a/b", b"2", version=0)).version == 1
        assert await zk.get_children("/a") == ["b"]
        seq = await zk.create("/a/n-", b"", sequence=True)
        assert seq.startswith("/a/n-") and len(seq) == len("/a/n-") + 10
        with pytest.raises(NodeExistsError):
            await zk.create("/a/b")
        with pytest.raises(NoNodeError):
            await zk.get("/missing")
        await zk.delete("/a/b", version=1)
        assert await zk.exists("/a/b") is None
        txn = zk.transaction()
        txn.create("/a/x", b"")
        txn.create("/a/x", b"")
        with pytest.raises(TransactionFailed) as info:
            await zk.commit(txn)
        assert isinstance(info.value.cause, NodeExistsError)
        assert await zk.exists("/a/x") is None

    _run(zookeeper_connect, body)


def test_watches_and_callbacks_run_on_the_loop_thread(zookeeper_connect: str) -> None:
    other = KazooClient(hosts=zookeeper_connect)

    async def body(zk: AsyncZooKeeper) -> None:
        loop_thread = threading.get_ident()
        await zk.ensure_path("/brokers/ids")
        children, changed = await zk.get_children_watched("/brokers/ids")
        assert children == [] and not changed.done()
        stat, appeared = await zk.exists_watched("/controller")
        assert stat is None

        seen: list[tuple[int, str]] = []
        done = asyncio.Event()

        async def on_event(event: Any) -> None:  # a coroutine callback becomes a task
            seen.append((threading.get_ident(), event.type))
            done.set()

        # another session (in kazoo's threads) changes things
        await asyncio.to_thread(other.start, 30)
        await asyncio.to_thread(other.create, "/brokers/ids/1", b"{}", ephemeral=True)
        event = await asyncio.wait_for(changed, 30)
        assert event.type == EventType.CHILD and event.path == "/brokers/ids"
        # any kazoo callback wrapped by on_loop runs on the loop, here kazoo's own watch API
        await asyncio.to_thread(zk.client.get, "/brokers/ids/1", zk.on_loop(on_event))
        await asyncio.to_thread(other.set, "/brokers/ids/1", b'{"v":2}')
        await asyncio.wait_for(done.wait(), 30)
        assert seen == [(loop_thread, EventType.CHANGED)]
        await asyncio.to_thread(other.create, "/controller", b"{}", ephemeral=True)
        assert (await asyncio.wait_for(appeared, 30)).type == EventType.CREATED

    try:
        _run(zookeeper_connect, body)
    finally:
        other.stop()
        other.close()


def test_session_expiry_fires_watches_and_reaches_the_state_listener(
        zookeeper_connect: str) -> None:
    async def body(zk: AsyncZooKeeper) -> None:
        states: list[tuple[str, int]] = []
        lost = asyncio.Event()

        def on_state(state: str) -> None:
            states.append((state, threading.get_ident()))
            if state == KazooState.LOST:
                lost.set()

        zk.add_state_listener(on_state)
        await zk.create("/brokers/ids/1", b"{}", ephemeral=True, makepath=True)
        _, _, watch = await zk.get_watched("/brokers/ids/1")
        old_session = zk.session_id
        # expire the session the standard way: a second client joins it and closes it
        session_id, password = zk.client.client_id
        await asyncio.to_thread(expire_session, zk.hosts, (session_id, password))
        event = await asyncio.wait_for(watch, 30)
        assert event.type == EventType.NONE  # "re-read everything": the session is gone
        await asyncio.wait_for(lost.wait(), 30)
        assert {thread for _, thread in states} == {threading.get_ident()}
        # kazoo reconnects with a new session; the ephemeral registration is gone
        deadline = time.monotonic() + 30
        while zk.state != KazooState.CONNECTED:
            assert time.monotonic() < deadline, states
            await asyncio.sleep(0.05)
        assert zk.session_id != old_session
        assert await zk.exists("/brokers/ids/1") is None

    _run(zookeeper_connect, body, session_timeout_ms=4000)


def test_start_against_no_server_fails_in_time_and_leaves_no_threads() -> None:
    async def main() -> None:
        with closed_port() as port:
            zk = AsyncZooKeeper(f"127.0.0.1:{port}")
            started = time.monotonic()
            with pytest.raises(KazooTimeoutError):
                await zk.start(timeout=1.0)
            assert time.monotonic() - started < 20

    before = threading.active_count()
    asyncio.run(main())
    deadline = time.monotonic() + 10
    while threading.active_count() > before:
        assert time.monotonic() < deadline, [t.name for t in threading.enumerate()]
        time.sleep(0.05)


def test_callbacks_after_the_loop_closed_are_dropped(zookeeper_connect: str) -> None:
    holder: dict[str, Any] = {}

    async def body(zk: AsyncZooKeeper) -> None:
        holder["wrapped"] = zk.on_loop(lambda *args: holder.setdefault("called", args))

    _run(zookeeper_connect, body)
    holder["wrapped"]("late")  # as kazoo's thread would, after asyncio.run closed the loop
    assert "called" not in holder


def test_until_connected_rides_out_the_death_of_the_ensemble_leader(
        zookeeper_ensemble: ZooKeeperEnsemble, zookeeper_chroot: str) -> None:
    ensemble = zookeeper_ensemble
    leader = ensemble.leader()
    others = [n for n in ensemble.nodes if n is not leader]
    hosts = ",".join(n.address for n in [leader, *others]) + zookeeper_chroot

    async def main() -> None:
        # leader first and no shuffling: the connection dies with the leader
        zk = AsyncZooKeeper(hosts, client=KazooClient(
            hosts=hosts, timeout=10.0, randomize_hosts=False,
            connection_retry=KazooRetry(**RECONNECT)))
        await zk.start(30)
        try:
            await zk.create("/brokers/ids/1", b"{}", ephemeral=True, makepath=True)
            session = zk.session_id
            ensemble.kill_node(leader)
            stat = await zk.until_connected(zk.set, "/brokers/ids/1", b'{"v":1}', version=0,
                                            deadline_s=30)
            assert stat.version == 1
            assert zk.session_id == session
            # no quorum left: kazoo holds the request without failing it; the deadline ends
            # the wait with an error that says what to check
            ensemble.stop_node(others[0])
            started = time.monotonic()
            with pytest.raises(OperationTimeoutError, match="quorum"):
                await zk.until_connected(zk.set, "/brokers/ids/1", b"{}", deadline_s=2)
            assert time.monotonic() - started < 15
        finally:
            await zk.stop()

    asyncio.run(main())
