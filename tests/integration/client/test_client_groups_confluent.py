"""Groups shared with confluent-kafka (librdkafka) consumers: either side leads and assigns
for the other (range and cooperative-sticky); the admin client's group methods on groups
librdkafka created; the sync facade's group API."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer as CKConsumer

from moldau.client import AdminClient, SyncAdminClient, SyncConsumer, TopicPartition
from moldau.client.admin_types import AdminError, GroupDescription
from moldau.client.group import OffsetAndMetadata
from moldau.testing.runner import BrokerProcess

from .groups_support import broker, config, create_topic, disjoint_cover, name, produce

__all__ = ["broker"]

pytestmark = pytest.mark.timeout(120)


def ck_consumer(broker: BrokerProcess, group: str, client_id: str, **extra: Any) -> CKConsumer:
    return CKConsumer({
        "bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": client_id,
        "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300, "log_level": 2, "fetch.wait.max.ms": 100, **extra,
    })


def ck_assignment(c: CKConsumer) -> set[TopicPartition]:
    return {TopicPartition(tp.topic, tp.partition) for tp in c.assignment()}


class Members:
    """Ours (SyncConsumer) and librdkafka's in one polling loop on this thread."""

    def __init__(self) -> None:
        self.ours: list[SyncConsumer] = []
        self.theirs: list[CKConsumer] = []
        self.values: list[int] = []

    def assignments(self) -> list[set[TopicPartition]]:
        return [c.assignment() for c in self.ours] + [ck_assignment(c) for c in self.theirs]

    def round(self) -> None:
        for c in self.ours:
            self.values.extend(int(r.value) for r in c.poll(0.05))
        for k in self.theirs:
            msg = k.poll(0.05)
            if msg is not None and msg.error() is None:
                self.values.append(int(msg.value()))

    def until(self, condition: Callable[[], bool], timeout: float = 30,
              each_round: Callable[[], None] | None = None) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self.round()
            if each_round is not None:
                each_round()
            if condition():
                return
            assert time.monotonic() < deadline, f"not reached: {self.assignments()}"

    def close(self) -> None:
        for c in self.ours:
            c.close()
        for k in self.theirs:
            k.close()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
@pytest.mark.parametrize("ours_first", [True, False], ids=["we-lead", "they-lead"])
def test_mixed_group_shares_partitions(broker: BrokerProcess, strategy: str,
                                       ours_first: bool) -> None:
    topic, group = name("mixed"), name("g")
    asyncio.run(create_topic(broker, topic, 6))
    asyncio.run(produce(broker, topic, 60, 6))
    everything = {TopicPartition(topic, p) for p in range(6)}
    members = Members()
    cooperative = strategy == "cooperative-sticky"

    def check_disjoint() -> None:
        # Cooperative rebalancing never lets two members hold a partition at once.
        flat = [tp for a in members.assignments() for tp in a]
        if cooperative:
            assert len(flat) == len(set(flat)), members.assignments()

    def add_ours() -> None:
        c = SyncConsumer(config(broker, group, **{
            "partition.assignment.strategy": strategy, "client.id": "moldau"}))
        c.subscribe([topic])
        members.ours.append(c)

    def add_theirs(i: int) -> None:
        k = ck_consumer(broker, group, f"ck-{i}", **{"partition.assignment.strategy": strategy})
        k.subscribe([topic])
        members.theirs.append(k)

    try:
        if ours_first:
            add_ours()
            members.until(lambda: len(members.ours[0].assignment()) == 6)
            add_theirs(0)
        else:
            add_theirs(0)
            members.until(lambda: len(ck_assignment(members.theirs[0])) == 6)
            add_ours()
        members.until(lambda: sorted(len(a) for a in members.assignments()) == [3, 3],
                      each_round=check_disjoint)
        before = members.assignments()
        add_theirs(1)
        members.until(lambda: [len(a) for a in members.assignments()] == [2, 2, 2]
                      and disjoint_cover(members.assignments(), everything),
                      each_round=check_disjoint)
        if strategy == "cooperative-sticky":
            # sticky: the two earlier members kept two of their three partitions each
            after = members.assignments()
            assert after[0] <= before[0] and after[1] <= before[1]
        members.until(lambda: len(members.values) >= 60)
        assert set(members.values) == set(range(60))
        # a librdkafka member leaves: the rest take its partitions
        members.theirs.pop(0).close()
        members.until(lambda: [len(a) for a in members.assignments()] == [3, 3]
                      and disjoint_cover(members.assignments(), everything),
                      each_round=check_disjoint)
        with SyncAdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            description = admin.describe_groups([group])[group]
        assert description.protocol == strategy
        assert sorted(m.client_id for m in description.members) == ["ck-1", "moldau"]
        assert disjoint_cover([set(m.assignment) for m in description.members], everything)
    finally:
        members.close()


def test_admin_on_a_confluent_group(broker: BrokerProcess) -> None:
    topic, group = name("adm"), name("g")
    asyncio.run(create_topic(broker, topic, 3))
    tps = [TopicPartition(topic, p) for p in range(3)]
    members = Members()
    members.theirs = [ck_consumer(broker, group, f"ck-{i}", **{"enable.auto.commit": False})
                      for i in range(2)]
    for k in members.theirs:
        k.subscribe([topic])
    # Settle the group first, so no partition is read twice by two owners in turn.
    members.until(lambda: disjoint_cover(members.assignments(), set(tps))
                  and sorted(len(a) for a in members.assignments()) == [1, 2])
    asyncio.run(produce(broker, topic, 30, 3))
    members.until(lambda: len(members.values) == 30)
    assert sorted(members.values) == list(range(30))
    for k in members.theirs:
        k.commit(asynchronous=False)
    asyncio.run(produce(broker, topic, 6, 3, start=30))  # 2 more per partition: lag 2
    try:
        asyncio.run(_admin_checks(broker, group, topic, tps, members))
    finally:
        for k in members.theirs:
            k.close()


async def _admin_checks(broker: BrokerProcess, group: str, topic: str,
                        tps: list[TopicPartition], members: Members) -> None:
    async with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        listed = {g.group_id: g for g in await admin.list_groups()}
        assert listed[group].protocol_type == "consumer" and listed[group].state == "Stable"
        assert group in {g.group_id for g in await admin.list_groups(states=["stable"])}
        assert group not in {g.group_id for g in await admin.list_groups(states=["Empty"])}
        description = (await admin.describe_groups([group]))[group]
        assert isinstance(description, GroupDescription)
        assert (description.state, description.protocol) == ("Stable", "range")
        assert sorted(m.client_id for m in description.members) == ["ck-0", "ck-1"]
        assert all(m.host and m.topics == (topic,) for m in description.members)
        assert disjoint_cover([set(m.assignment) for m in description.members], set(tps))
        assert description.coordinator is not None
        committed = await admin.list_group_offsets(group)
        assert {tp: v.offset for tp, v in committed.items()} == {tp: 10 for tp in tps}
        assert all(v.leader_epoch == 0 for v in committed.values())  # librdkafka sends it
        lag = await admin.describe_group_lag(group)
        assert [(r.partition, r.committed, r.log_end_offset, r.lag) for r in lag] == [
            (p, 10, 12, 2) for p in range(3)]
        readers = {m.member_id for m in description.members}
        assert {r.member_id for r in lag} == readers and all(r.client_id for r in lag)
        # An active group's offsets cannot be changed, nor the group deleted.
        with pytest.raises(AdminError, match="active members"):
            await admin.alter_group_offsets(group, {tps[0]: 0})
        with pytest.raises(AdminError, match="NON_EMPTY_GROUP"):
            await admin.delete_groups([group])
        for k in members.theirs:
            k.close()
        members.theirs = []
        deadline = time.monotonic() + 15
        while (await admin.describe_groups([group]))[group].state != "Empty":  # type: ignore[union-attr]
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        # Empty now: reset partition 0 to the start (kafka-consumer-groups --reset-offsets)
        assert await admin.alter_group_offsets(group, {tps[0]: OffsetAndMetadata(0, "reset")}
                                               ) == {tps[0]: None}
        offsets = await admin.list_group_offsets(group, [tps[0], TopicPartition(topic, 9)])
        assert offsets == {tps[0]: OffsetAndMetadata(0, "reset"),
                           TopicPartition(topic, 9): None}
        assert await admin.delete_group_offsets(group, [tps[1]]) == {tps[1]: None}
        assert set(await admin.list_group_offsets(group)) == {tps[0], tps[2]}
        # a new librdkafka member re-reads partition 0 from the start
        again = ck_consumer(broker, group, "ck-again")
        again.assign([_ck_tp(tps[0])])
        first = None
        deadline = time.monotonic() + 15
        while first is None:
            assert time.monotonic() < deadline
            msg = again.poll(0.2)
            if msg is not None and msg.error() is None:
                first = msg.offset()
        again.close()
        assert first == 0
        assert await admin.delete_groups([group]) == {group: None}
        assert group not in {g.group_id for g in await admin.list_groups()}
        dead = (await admin.describe_groups([group]))[group]
        assert isinstance(dead, GroupDescription) and dead.state == "Dead"
        with pytest.raises(AdminError, match="GROUP_ID_NOT_FOUND"):
            await admin.delete_groups([group])


def _ck_tp(tp: TopicPartition) -> Any:
    from confluent_kafka import TopicPartition as CKTopicPartition

    return CKTopicPartition(tp.topic, tp.partition)


def test_sync_consumer_commits_in_on_revoke(broker: BrokerProcess) -> None:
    """Sync callbacks run on the polling thread and may call the consumer."""
    topic, group = name("sync"), name("g")
    asyncio.run(create_topic(broker, topic, 2))
    asyncio.run(produce(broker, topic, 20, 2))
    cfg = config(broker, group, **{"enable.auto.commit": False})
    first = SyncConsumer(cfg)
    revoked: list[dict[TopicPartition, OffsetAndMetadata]] = []
    first.subscribe([topic], on_revoke=lambda parts: revoked.append(first.commit()))
    got: list[Any] = []
    deadline = time.monotonic() + 20
    while len(got) < 20:
        assert time.monotonic() < deadline
        got.extend(first.poll(0.2))
    assert first.subscription() == {topic}
    assert first.member_id
    second = SyncConsumer(cfg)
    second.subscribe([topic])
    while not (len(first.assignment()) == len(second.assignment()) == 1):
        assert time.monotonic() < deadline + 20
        first.poll(0.1)
        second.poll(0.1)
    # range is eager: first revoked both partitions, committing their positions
    assert revoked[0] == {TopicPartition(topic, 0): OffsetAndMetadata(10),
                          TopicPartition(topic, 1): OffsetAndMetadata(10)}
    assert second.committed([TopicPartition(topic, 1)]) == {
        TopicPartition(topic, 1): OffsetAndMetadata(10)}
    # unsubscribe: on_revoke once more (its partition), then the other member gets both
    held = first.assignment()
    first.unsubscribe()
    assert first.assignment() == set() and first.subscription() == set()
    assert set(revoked[-1]) == held
    while len(second.assignment()) != 2:
        assert time.monotonic() < deadline + 40
        second.poll(0.1)
    first.close()
    second.close()
