"""Consumer groups with this client (classic protocol) against a moldau broker: sharing,
takeover after close and kill -9, commits (sync, async, auto, metadata), static membership,
patterns and new partitions, max.poll.interval.ms, cooperative rebalancing."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from moldau.client import AdminClient, ClientError, ConfigError, Consumer, TopicPartition
from moldau.client.group import CommitFailedError, OffsetAndMetadata
from moldau.testing.runner import BrokerProcess

from .groups_support import (
    SESSION_MS,
    Polling,
    broker,
    config,
    create_topic,
    disjoint_cover,
    name,
    partitions_of,
    produce,
)

__all__ = ["broker"]  # the fixture, imported for pytest

pytestmark = pytest.mark.timeout(120)


def test_three_members_share_then_take_over_on_close(broker: BrokerProcess) -> None:
    async def main() -> None:
        topic, group = name("share"), name("g")
        await create_topic(broker, topic, 6)
        await produce(broker, topic, 120, 6)
        consumers = [Consumer(config(broker, group, **{"client.id": f"c{i}"}))
                     for i in range(3)]
        for c in consumers:
            await c.start()
            c.subscribe([topic])
        polling = Polling(consumers)
        everything = partitions_of(topic, 6)
        await polling.until(lambda: all(len(c.assignment()) == 2 for c in consumers)
                            and len(polling.values()) >= 120, what="2 partitions each")
        assert disjoint_cover([c.assignment() for c in consumers], everything)
        assert sorted(polling.values()) == list(range(120))
        leaver = consumers[0]
        await leaver.close()  # LeaveGroup: the others take over at once, no session wait
        polling.remove(leaver)
        elapsed = await polling.until(
            lambda: all(len(c.assignment()) == 3 for c in consumers[1:]), what="takeover")
        assert elapsed < SESSION_MS / 1000, "a clean leave must not wait for the session"
        assert disjoint_cover([c.assignment() for c in consumers[1:]], everything)
        # the leaver auto-committed on close: nothing is read again
        await produce(broker, topic, 60, 6, start=120)
        await polling.until(lambda: len(polling.values()) >= 180, what="new records")
        assert sorted(polling.values()) == list(range(180))
        for c in consumers[1:]:
            await c.close()

    asyncio.run(main())


def _reader(proc: subprocess.Popen[str], lines: list[str]) -> threading.Thread:
    def run() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.strip())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_kill_9_member_at_least_once_with_sync_commits(broker: BrokerProcess,
                                                       tmp_path: Path) -> None:
    """A member in another process is killed -9 mid-stream: the others own its partitions
    within the session timeout, every record is consumed, and the only records consumed
    twice are the killed member's records after its last commit."""
    topic, group = name("kill"), name("g")
    total, count = 600, 6
    asyncio.run(create_topic(broker, topic, count))
    asyncio.run(produce(broker, topic, total, count))
    member_config = config(broker, group, **{"enable.auto.commit": False,
                                             "max.poll.records": 5, "client.id": "victim"})
    script = Path(__file__).with_name("group_member_proc.py")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    proc = subprocess.Popen(
        [sys.executable, str(script), json.dumps(member_config), topic, "0.1"],
        stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    lines: list[str] = []
    _reader(proc, lines)
    try:
        # The victim joins first (a new process starts slowly: survivors joining before it
        # would read and commit everything and leave it nothing to be killed in the middle of).
        deadline = time.monotonic() + 30
        while not any(ln.startswith("R ") for ln in lines):
            assert proc.poll() is None and time.monotonic() < deadline, lines
            time.sleep(0.05)
        asyncio.run(_survivors(broker, topic, group, total, count, proc, lines))
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


async def _survivors(broker: BrokerProcess, topic: str, group: str, total: int, count: int,
                     proc: subprocess.Popen[str], lines: list[str]) -> None:
    consumers = [Consumer(config(broker, group, **{
        "enable.auto.commit": False, "max.poll.records": 5, "client.id": f"s{i}"}))
        for i in range(2)]
    seen: list[tuple[int, int]] = []
    for c in consumers:
        await c.start()
        c.subscribe([topic])

    async def round_() -> None:
        for c in consumers:
            records = await c.poll(0.1)
            seen.extend((r.partition, r.offset) for r in records)
            if records:
                await c.commit()  # at-least-once: commit after processing
            await asyncio.sleep(0.02)

    deadline = time.monotonic() + 30
    victim_records = lambda: [ln for ln in lines if ln.startswith("R ")]  # noqa: E731
    while not (all(len(c.assignment()) == 2 for c in consumers)
               and len(victim_records()) >= 20):
        assert time.monotonic() < deadline, f"no 3-way split: {lines[-5:]}"
        await round_()
    last_assignment = [ln for ln in lines if ln.startswith("A ")][-1]
    victim_parts = {int(p) for p in last_assignment[2:].split(",") if p}
    assert len(victim_parts) == 2
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    killed_at = time.monotonic()
    # The takeover waits for the session timeout; the bound only has to tell that from a
    # member that is never expired (or waits out a rebalance timeout), not measure it.
    while not all(len(c.assignment()) == 3 for c in consumers):
        assert time.monotonic() - killed_at < SESSION_MS / 1000 + 15, "no takeover"
        await round_()
    while len(set(seen) | _victim_seen(lines)) < total:
        assert time.monotonic() - killed_at < 60, "records missing"
        await round_()
    for c in consumers:
        await c.close()
    victim = _victim_seen(lines)
    committed = {int(ln.split()[1]): int(ln.split()[2]) for ln in lines if ln.startswith("C ")}
    everything = set(seen) | victim
    assert len(everything) == total
    twice = [rec for rec in seen if rec in victim]
    assert len(seen) == len(set(seen)), "a survivor read a record twice"
    for partition, offset in twice:
        assert partition in victim_parts
        assert offset >= committed.get(partition, 0), (
            f"{partition}:{offset} was committed by the victim but read again")


def _victim_seen(lines: list[str]) -> set[tuple[int, int]]:
    return {(int(ln.split()[1]), int(ln.split()[2])) for ln in lines if ln.startswith("R ")}


def test_commits_sync_async_metadata_and_committed(broker: BrokerProcess) -> None:
    async def main() -> None:
        topic, group = name("commit"), name("g")
        await create_topic(broker, topic, 2)
        await produce(broker, topic, 40, 2)
        c = Consumer(config(broker, group, **{"enable.auto.commit": False}))
        await c.start()
        c.subscribe([topic])
        polling = Polling([c])
        await polling.until(lambda: len(polling.values()) == 40, what="all records")
        tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
        committed = await c.commit()
        assert committed == {tp0: OffsetAndMetadata(20), tp1: OffsetAndMetadata(20)}
        done: list[Any] = []
        task = await c.commit({tp0: OffsetAndMetadata(7, "seven")}, asynchronous=True,
                              callback=lambda offsets, error: done.append((offsets, error)))
        await task
        assert done == [({tp0: OffsetAndMetadata(7, "seven")}, None)]
        assert await c.committed([tp0, tp1, TopicPartition(topic, 5)]) == {
            tp0: OffsetAndMetadata(7, "seven"), tp1: OffsetAndMetadata(20),
            TopicPartition(topic, 5): None}
        async with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            listed = await admin.list_group_offsets(group)
        assert listed[tp0].metadata == "seven" and listed[tp1].offset == 20
        await c.close()
        # a new member starts at the committed offsets
        again = Consumer(config(broker, group))
        await again.start()
        again.subscribe([topic])
        polling = Polling([again])
        await polling.until(lambda: len(polling.values()) == 13, what="re-read from 7")
        assert sorted(polling.values()) == sorted(range(14, 40, 2))
        await again.close()

    asyncio.run(main())


def test_assign_with_group_id_starts_at_committed_offsets(broker: BrokerProcess) -> None:
    """assign() plus group.id: the committed offset first, auto.offset.reset only where the
    group has none, and an explicit seek_to_beginning() wins over both (Kafka's order)."""
    async def main() -> None:
        topic, group = name("assign"), name("g")
        await create_topic(broker, topic, 3)
        await produce(broker, topic, 30, 3)
        tp0, tp1, tp2 = (TopicPartition(topic, p) for p in range(3))
        first = Consumer(config(broker, group, **{"enable.auto.commit": False}))
        await first.start()
        await first.commit({tp0: OffsetAndMetadata(4), tp2: OffsetAndMetadata(9)})
        await first.close()
        c = Consumer(config(broker, group, **{"enable.auto.commit": False,
                                              "auto.offset.reset": "latest"}))
        await c.start()
        c.assign([tp0, tp1, tp2])
        assert [await c.position(tp) for tp in (tp0, tp1, tp2)] == [4, 10, 9]
        got: list[tuple[int, int]] = []
        deadline = time.monotonic() + 20
        while len(got) < 7 and time.monotonic() < deadline:
            got += [(r.partition, r.offset) for r in await c.poll(0.5)]
        assert sorted(got) == [(0, o) for o in range(4, 10)] + [(2, 9)]
        c.seek_to_beginning([tp0])
        assert await c.position(tp0) == 0
        await c.close()

    asyncio.run(main())


def test_auto_commit_commits_what_poll_returned(broker: BrokerProcess) -> None:
    """Auto-commit commits positions when poll() is called again (the records it handed
    out before), so a crash while processing a batch redelivers that batch."""
    async def main() -> None:
        topic, group = name("auto"), name("g")
        await create_topic(broker, topic, 1)
        await produce(broker, topic, 50, 1)
        tp = TopicPartition(topic, 0)
        c = Consumer(config(broker, group, **{"auto.commit.interval.ms": 0,
                                              "max.poll.records": 10}))
        await c.start()
        c.subscribe([topic])
        first: list[Any] = []
        while not first:
            first = await c.poll(0.5)
        assert [r.offset for r in first] == list(range(10))
        second = await c.poll(0.5)  # commits 10 (what the first poll returned)
        assert [r.offset for r in second] == list(range(10, 20))
        async with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            deadline = time.monotonic() + 10
            while (await admin.list_group_offsets(group)).get(tp) != OffsetAndMetadata(10):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            # "crash": nothing more is committed; a new member re-reads from 10
            await c.group._stop_tasks()  # type: ignore[union-attr]
            c.group.coordinator.close()  # type: ignore[union-attr]
            c.group._closed = True  # type: ignore[union-attr]
            await c.close()
            assert (await admin.list_group_offsets(group))[tp].offset == 10
            other = Consumer(config(broker, group, **{"auto.commit.interval.ms": 100}))
            await other.start()
            other.subscribe([topic])
            polling = Polling([other])
            # after the crashed member's session expires, it starts at 10
            await polling.until(lambda: len(polling.values()) == 40, what="redelivery")
            assert polling.values()[0] == 10
            await other.close()  # closing auto-commits the final position
            assert (await admin.list_group_offsets(group))[tp].offset == 50

    asyncio.run(main())


def test_static_membership_restart_keeps_assignment(broker: BrokerProcess) -> None:
    async def main() -> None:
        topic, group = name("static"), name("g")
        await create_topic(broker, topic, 4)
        events: list[str] = []
        a = Consumer(config(broker, group, **{"group.instance.id": "inst-a"}))
        b = Consumer(config(broker, group, **{"group.instance.id": "inst-b"}))
        for c in (a, b):
            await c.start()
        a.subscribe([topic])
        b.subscribe([topic], on_revoke=lambda p: events.append(f"revoke {sorted(p)}"),
                    on_assign=lambda p: events.append(f"assign {sorted(p)}"))
        polling = Polling([a, b])
        await polling.until(lambda: len(a.assignment()) == len(b.assignment()) == 2)
        before_a, before_b, events_before = a.assignment(), b.assignment(), list(events)
        await a.close()  # static: no LeaveGroup, the group waits for inst-a
        polling.remove(a)
        await polling.until(lambda: True)  # b keeps polling meanwhile
        a2 = Consumer(config(broker, group, **{"group.instance.id": "inst-a"}))
        await a2.start()
        a2.subscribe([topic])
        polling.add(a2)
        await polling.until(lambda: len(a2.assignment()) == 2, what="static rejoin")
        assert a2.assignment() == before_a and b.assignment() == before_b
        await polling.until(lambda: True)
        assert events == events_before, "the other member saw a rebalance"
        for c in (a2, b):
            await c.close()

    asyncio.run(main())


def test_fenced_instance_id_is_fatal(broker: BrokerProcess) -> None:
    async def main() -> None:
        topic, group = name("fence"), name("g")
        await create_topic(broker, topic, 1)
        old = Consumer(config(broker, group, **{"group.instance.id": "same"}))
        new = Consumer(config(broker, group, **{"group.instance.id": "same"}))
        await old.start()
        await new.start()
        old.subscribe([topic])
        await Polling([old]).until(lambda: len(old.assignment()) == 1)
        new.subscribe([topic])
        await Polling([new]).until(lambda: len(new.assignment()) == 1)
        with pytest.raises(ClientError, match="FENCED_INSTANCE_ID"):
            await Polling([old]).until(lambda: False, timeout=10)
        await new.close()
        await old.close()

    asyncio.run(main())


def test_pattern_subscription_and_new_partitions(broker: BrokerProcess) -> None:
    async def main() -> None:
        prefix, group = name("pat"), name("g")
        await create_topic(broker, f"{prefix}-a", 2)
        c = Consumer(config(broker, group, **{"metadata.max.age.ms": 300}))
        await c.start()
        c.subscribe(f"^{prefix}-.*")
        polling = Polling([c])
        await polling.until(lambda: c.assignment() == partitions_of(f"{prefix}-a", 2))
        await create_topic(broker, f"{prefix}-b", 1)  # a new matching topic: rejoin
        await polling.until(lambda: TopicPartition(f"{prefix}-b", 0) in c.assignment(),
                            what="new topic assigned")
        assert c.subscription_topics() == {f"{prefix}-a", f"{prefix}-b"}
        async with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            await admin.create_partitions({f"{prefix}-a": 4})
        await polling.until(lambda: len(c.assignment()) == 5, what="new partitions")
        await produce(broker, f"{prefix}-a", 8, 4)
        await polling.until(lambda: len(polling.values()) == 8)
        await c.close()

    asyncio.run(main())


def test_max_poll_interval_exceeded_leaves_and_loses(broker: BrokerProcess) -> None:
    async def main() -> None:
        topic, group = name("slow"), name("g")
        await create_topic(broker, topic, 2)
        lost: list[set[TopicPartition]] = []
        slow = Consumer(config(broker, group, **{"max.poll.interval.ms": 1500}))
        fast = Consumer(config(broker, group))
        await slow.start()
        await fast.start()
        slow.subscribe([topic], on_lost=lost.append)
        fast.subscribe([topic])
        both = Polling([slow, fast])
        await both.until(lambda: len(slow.assignment()) == len(fast.assignment()) == 1)
        # slow stops polling: it leaves after max.poll.interval.ms, fast takes over
        await Polling([fast]).until(lambda: len(fast.assignment()) == 2, timeout=15,
                                    what="takeover from the slow member")
        with pytest.raises(CommitFailedError):
            await slow.commit({TopicPartition(topic, 0): 0})
        await both.until(lambda: len(slow.assignment()) == 1 and lost != [],
                         what="slow member back")
        assert len(lost[0]) == 1
        for c in (slow, fast):
            await c.close()

    asyncio.run(main())


def test_cooperative_sticky_keeps_partitions_through_rebalance(broker: BrokerProcess) -> None:
    async def main() -> None:
        topic, group = name("coop"), name("g")
        await create_topic(broker, topic, 6)
        strategy = {"partition.assignment.strategy": "cooperative-sticky"}
        revoked: list[set[TopicPartition]] = []
        first = Consumer(config(broker, group, **strategy))
        await first.start()
        first.subscribe([topic], on_revoke=revoked.append)
        polling = Polling([first])
        await polling.until(lambda: len(first.assignment()) == 6)
        second = Consumer(config(broker, group, **strategy))
        await second.start()
        second.subscribe([topic])
        polling.add(second)
        await polling.until(lambda: len(first.assignment()) == len(second.assignment()) == 3,
                            what="incremental rebalance")
        # only the three partitions that moved were revoked, never all six
        assert [len(r) for r in revoked] == [3]
        assert disjoint_cover([first.assignment(), second.assignment()],
                              partitions_of(topic, 6))
        for c in (first, second):
            await c.close()

    asyncio.run(main())


def test_usage_errors() -> None:
    with pytest.raises(ConfigError, match=r"needs group\.id"):
        Consumer({"bootstrap.servers": "127.0.0.1:1"}).subscribe(["t"])
    with pytest.raises(ConfigError, match=r"must be lower than session\.timeout\.ms"):
        Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g",
                  "heartbeat.interval.ms": 5000, "session.timeout.ms": 5000})
    c = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    c.subscribe(["t"])
    with pytest.raises(ClientError, match="unsubscribe"):
        c.assign([TopicPartition("t", 0)])
