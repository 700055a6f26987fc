"""Issue 13, acceptance 4, for the two clients of the compat suite that
test_group_durability.py does not drive: kcat (``kcat -G``, librdkafka 2.0.2) and the moldau
client. A consumer group of three keeps its committed offsets when the broker of its
coordinator is killed (the scenario: group_scenario.py): every member owns a partition before
any record is sent; the group reads and commits; the broker leading the group's
``__consumer_offsets`` partition gets kill -9; OffsetFetch through the new coordinator answers
the offsets committed before the kill; and the same three members go on from them, reading
every new record and none of those read before the kill.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from moldau.testing.processes import terminate
from moldau.testing.tail import complete_lines

from .clients import require
from .conftest import ClusterFactory
from .group_scenario import PARTITIONS, PER_PARTITION, Scenario, run_scenario

#: kcat's rebalance callback (verbosity 1, on stderr): "% Group g rebalanced (memberid m):
#: assigned: t [0], t [2]" or "...: revoked: t [0]".
_REBALANCE = re.compile(r"rebalanced \(memberid [^)]*\): (assigned|revoked): ?(.*)$")
_PARTITION = re.compile(r"\[(\d+)\]")


def kcat_owned(err: Path) -> set[int]:
    """The partitions a ``kcat -G`` process owns, from the last rebalance line of its stderr
    (a revocation leaves it none until the next assignment)."""
    owned: set[int] = set()
    if not err.exists():
        return owned
    for line in complete_lines(err):
        match = _REBALANCE.search(line)
        if match is not None:
            owned = ({int(p) for p in _PARTITION.findall(match[2])}
                     if match[1] == "assigned" else set())
    return owned


def test_kcat_group_keeps_its_offsets_when_the_coordinator_broker_is_killed(
        cluster_factory: ClusterFactory, tmp_path: Path) -> None:
    """Three ``kcat -G`` processes print ``partition offset value`` per record; kcat commits
    what it has printed with librdkafka's auto-commit (every 200 ms here), so a phase ends
    when the records are read and OffsetFetch answers every partition's end."""
    require("kcat")
    scenario = Scenario(cluster_factory, "durable-kcat")
    outs = [tmp_path / f"kcat-{n}.out" for n in range(3)]
    errs = [tmp_path / f"kcat-{n}.err" for n in range(3)]
    members = []
    for out, err in zip(outs, errs, strict=True):
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            members.append(subprocess.Popen(
                # -u: unbuffered, each record is in the file when printed
                ["kcat", "-b", scenario.bootstrap, "-G", scenario.group, "-u",
                 "-f", "%p %o %s\\n", "-X", "auto.offset.reset=earliest",
                 "-X", "auto.commit.interval.ms=200", "-X", "session.timeout.ms=10000",
                 "-X", "heartbeat.interval.ms=500", scenario.topic],
                stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr))
    seen = [0] * len(outs)

    def consume(want: set[str], timeout: float) -> list[str]:
        phase = 2 if any(v.startswith("second") for v in want) else 1
        read: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            for n, out in enumerate(outs):
                lines = complete_lines(out)
                for line in lines[seen[n]:]:
                    partition, offset, value = line.split(" ", 2)
                    assert value.endswith(f"-{partition}-{int(offset) % PER_PARTITION}"), line
                    read.append(value)
                seen[n] = len(lines)
            if set(read) >= want and scenario.committed_now() == dict.fromkeys(
                    range(PARTITIONS), phase * PER_PARTITION):
                return read
            exited = [n for n, m in enumerate(members) if m.poll() is not None]
            assert not exited, f"kcat {exited[0]} exited: " + errs[exited[0]].read_text(
                errors="replace")[-2000:]
            assert time.monotonic() < deadline, (
                f"read {len(set(read) & want)}/{len(want)}, committed "
                f"{scenario.committed_now()}")
            time.sleep(0.2)

    try:
        run_scenario(scenario, consume, lambda: [kcat_owned(err) for err in errs])
    finally:
        for member in members:
            terminate(member, 20)


def test_moldau_client_group_keeps_its_offsets_when_the_coordinator_broker_is_killed(
        cluster_factory: ClusterFactory) -> None:
    from moldau.client import Consumer, TopicPartition
    from moldau.client.errors import ClientError

    scenario = Scenario(cluster_factory, "durable-moldau")
    loop = asyncio.new_event_loop()

    async def start() -> list[Any]:
        members = [Consumer({"bootstrap.servers": scenario.bootstrap,
                             "group.id": scenario.group, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, "session.timeout.ms": 10000,
                             "heartbeat.interval.ms": 500, "fetch.max.wait.ms": 200})
                   for _ in range(3)]
        for member in members:
            await member.start()
            member.subscribe([scenario.topic])
        return members

    members = loop.run_until_complete(start())

    async def consume_async(want: set[str], timeout: float) -> list[str]:
        read: list[str] = []
        committed_ok = dict.fromkeys(range(PARTITIONS), True)
        deadline = time.monotonic() + timeout
        while not (set(read) >= want and all(committed_ok.values())):
            assert time.monotonic() < deadline, (
                f"read {len(set(read) & want)}/{len(want)}, commits ok {committed_ok}")
            for member in members:
                try:
                    records = await member.poll(0.2)
                except ClientError:
                    continue
                ends: dict[int, int] = {}
                for record in records:
                    read.append(record.value.decode())
                    ends[record.partition] = record.offset + 1
                for partition, end in ends.items():
                    try:
                        await member.commit({TopicPartition(scenario.topic, partition): end})
                        committed_ok[partition] = True
                    except ClientError:
                        committed_ok[partition] = False
        return read

    async def owned_async() -> list[set[int]]:
        for member in members:
            try:
                # joins and rebalances happen in poll()
                assert not await member.poll(0.2), "a record before any was sent"
            except ClientError:
                pass
        return [{tp.partition for tp in member.assignment()} for member in members]

    try:
        run_scenario(scenario,
                     lambda want, timeout: loop.run_until_complete(consume_async(want, timeout)),
                     lambda: loop.run_until_complete(owned_async()))
    finally:
        for member in members:
            loop.run_until_complete(member.close())
        loop.close()
