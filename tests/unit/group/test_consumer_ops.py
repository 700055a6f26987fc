"""ConsumerGroupHeartbeat flows (KIP-848) on a manual clock."""

from typing import Any

import pytest

from moldau.broker.group.consumer_group import ConsumerGroup
from moldau.broker.group.consumer_ops import HeartbeatRequest
from moldau.broker.group.errors import GroupError
from moldau.broker.group.offsets import OffsetToCommit
from moldau.protocol.errors import ErrorCode as E

from .helpers import World, cfg, run, settle

SESSION = 45_000


class Member:
    """A well-behaved KIP-848 client: acknowledges by reporting what it owns."""

    def __init__(self, world: World, group: str, member_id: str, topics: list[str] | None,
                 regex: str | None = None, instance: str | None = None) -> None:
        self.world, self.group, self.member_id = world, group, member_id
        self.topics, self.regex, self.instance = topics, regex, instance
        self.epoch = 0
        self.owned: dict[Any, set[int]] = {}

    async def beat(self, *, full: bool = False, owned: bool = True) -> Any:
        joining = self.epoch == 0
        req = HeartbeatRequest(
            self.group, self.member_id, self.epoch, instance_id=self.instance,
            rebalance_timeout_ms=60_000 if joining or full else -1,
            subscribed_topic_names=self.topics if joining or full else None,
            subscribed_topic_regex=self.regex if joining or full else None,
            owned={t: set(p) for t, p in self.owned.items()} if owned or joining else None,
            client_id=self.member_id, client_host="/127.0.0.1")
        coordinator = self.world.coordinator
        shard = self.world.shard(self.group)
        result = await coordinator.consumer.heartbeat(shard, req, 1)
        self.epoch = result.member_epoch
        if result.assignment is not None:
            self.owned = {t: set(p) for t, p in result.assignment.items() if p}
        return result

    def partitions(self) -> set[int]:
        return {p for ps in self.owned.values() for p in ps}


def group_of(world: World, group_id: str) -> ConsumerGroup:
    group = world.shard(group_id).groups[group_id]
    assert isinstance(group, ConsumerGroup)
    return group


async def settle_members(members: list[Member], rounds: int = 6) -> None:
    for _ in range(rounds):
        for m in members:
            await m.beat()


def test_three_members_share_six_partitions_without_double_ownership() -> None:
    async def scenario() -> None:
        world = await World().start()
        world.add_topic("t", 6)
        members = [Member(world, "g", f"m{i}", ["t"]) for i in range(3)]
        first = await members[0].beat()
        assert first.member_epoch == 1 and members[0].partitions() == set(range(6))
        for m in members[1:]:
            await m.beat()
        for _ in range(6):
            for m in members:
                await m.beat()
                owned = [p for x in members for p in x.partitions()]
                assert len(owned) == len(set(owned)), "a partition had two owners"
        assert sorted(len(m.partitions()) for m in members) == [2, 2, 2]
        group = group_of(world, "g")
        assert group.state_name() == "Stable"
        assert {m.epoch for m in members} == {group.assignment_epoch}
    run(scenario())


def test_leave_and_session_timeout_move_partitions() -> None:
    async def scenario() -> None:
        world = await World().start()
        world.add_topic("t", 6)
        members = [Member(world, "g", f"m{i}", ["t"]) for i in range(3)]
        await settle_members(members)
        members[2].epoch = -1
        await members[2].beat()
        await settle_members(members[:2])
        assert sorted(len(m.partitions()) for m in members[:2]) == [3, 3]
        # m1 goes silent: after the session timeout m0 owns everything.
        await world.advance(SESSION - 1000)
        await members[0].beat()
        await world.advance(2000)
        await settle_members(members[:1])
        assert members[0].partitions() == set(range(6))
        with pytest.raises(GroupError) as err:
            await members[1].beat()
        assert err.value.code == E.unknown_member_id
    run(scenario())


def test_fenced_member_epoch() -> None:
    async def scenario() -> None:
        world = await World().start()
        world.add_topic("t", 2)
        m = Member(world, "g", "m", ["t"])
        await m.beat()
        m.epoch += 5
        with pytest.raises(GroupError) as err:
            await m.beat()
        assert err.value.code == E.fenced_member_epoch
    run(scenario())


def test_new_partitions_and_topics_reach_members() -> None:
    async def scenario() -> None:
        world = await World().start()
        world.add_topic("t", 2)
        a, b = Member(world, "g", "a", ["t", "later"]), Member(world, "g", "b", ["t", "later"])
        await settle_members([a, b])
        epoch = group_of(world, "g").group_epoch
        world.add_partitions("t", 4)
        world.add_topic("later", 2)
        await settle_members([a, b])
        assert group_of(world, "g").group_epoch == epoch + 1
        assert len(a.partitions() | b.partitions()) == 4  # partition numbers overlap topics
        assert sum(len(p) for m in (a, b) for p in m.owned.values()) == 6
    run(scenario())


def test_regex_subscription() -> None:
    async def scenario() -> None:
        world = await World().start()
        world.add_topic("orders-eu", 1)
        world.add_topic("orders-us", 1)
        world.add_topic("payments", 1)
        m = Member(world, "g", "m", None, regex="orders-.*")
        await settle_members([m])
        assert set(m.owned) == {world.topic_id("orders-eu"), world.topic_id("orders-us")}
        world.add_topic("orders-asia", 1)
        await settle_members([m])
        assert world.topic_id("orders-asia") in m.owned
    run(scenario())


def test_static_member_leave_and_return_keeps_partitions() -> None:
    async def scenario() -> None:
        world = await World().start()
        world.add_topic("t", 4)
        a = Member(world, "g", "a1", ["t"], instance="ia")
        b = Member(world, "g", "b1", ["t"], instance="ib")
        await settle_members([a, b])
        kept = a.partitions()
        a.epoch = -2
        assert (await a.beat()).member_epoch == -2
        await settle_members([b])
        assert b.partitions().isdisjoint(kept)  # a's partitions are reserved
        # Another process with the same instance id while a is still in: refused.
        clash = Member(world, "g", "a-other", ["t"], instance="ib")
        with pytest.raises(GroupError) as err:
            await clash.beat()
        assert err.value.code == E.unreleased_instance_id
        back = Member(world, "g", "a2", ["t"], instance="ia")
        await back.beat()
        assert back.partitions() == kept
    run(scenario())


def test_validation_errors() -> None:
    async def scenario() -> None:
        world = await World().start()
        consumer = world.coordinator.consumer

        async def beat(**kw: Any) -> int:
            base = dict(group_id="g", member_id="m", member_epoch=0, rebalance_timeout_ms=1000,
                        subscribed_topic_names=["t"], owned={})
            base.update(kw)
            try:
                await consumer.heartbeat(world.shard("g"), HeartbeatRequest(**base), 1)
            except GroupError as exc:
                return exc.code
            return 0

        assert await beat(group_id="") == E.invalid_request
        assert await beat(rebalance_timeout_ms=-1) == E.invalid_request
        assert await beat(owned=None) == E.invalid_request
        assert await beat(subscribed_topic_names=None) == E.invalid_request
        assert await beat(server_assignor="sticky") == E.unsupported_assignor
        assert await beat(subscribed_topic_regex="(", subscribed_topic_names=None) == \
            E.invalid_regular_expression
        assert await beat(member_epoch=3, member_id="ghost") == E.unknown_member_id
        assert await beat(server_assignor="range") == 0
    run(scenario())


def test_member_epoch_checks_on_offset_commit() -> None:
    async def scenario() -> None:
        world = await World().start()
        world.add_topic("t", 2)
        m = Member(world, "g", "m", ["t"])
        await settle_members([m])
        offsets = world.coordinator.offsets
        items = [OffsetToCommit("t", 0, 5, -1, None)]
        shard = world.shard("g")
        assert await offsets.commit(shard, "g", m.epoch, "m", None, items, version=9) == [0]
        assert await offsets.commit(shard, "g", m.epoch - 1, "m", None, items, version=9) == \
            [E.stale_member_epoch]
        assert await offsets.commit(shard, "g", m.epoch, "x", None, items, version=9) == \
            [E.unknown_member_id]
        assert await offsets.commit(shard, "g", m.epoch, "m", None, items, version=8) == \
            [E.unsupported_version]
        with pytest.raises(GroupError) as err:
            offsets.fetch(shard, "g", None, "m", m.epoch + 3)
        assert err.value.code == E.stale_member_epoch
        assert offsets.fetch(shard, "g", None, None, -1)[0][1][0][1].offset == 5
    run(scenario())


def test_members_and_assignments_survive_restart() -> None:
    async def scenario() -> None:
        world = await World(cfg(consumer_session_timeout_ms=10_000)).start()
        world.add_topic("t", 4)
        members = [Member(world, "g", f"m{i}", ["t"]) for i in range(2)]
        await settle_members(members)
        before = {m.member_id: m.partitions() for m in members}
        epoch = group_of(world, "g").group_epoch
        later = await world.restarted().start()
        group = group_of(later, "g")
        assert set(group.members) == {"m0", "m1"}
        assert {m: {p for ps in x.assigned.values() for p in ps}
                for m, x in group.members.items()} == before
        # The members carry on: a new epoch, the same partitions.
        for m in members:
            m.world = later
        await settle_members(members)
        assert {m.member_id: m.partitions() for m in members} == before
        assert all(m.epoch > epoch for m in members)
        assert group.state_name() == "Stable"
        # A member that does not come back is fenced after the session timeout.
        await later.advance(6000)
        await members[0].beat()
        await later.advance(6000)
        await settle_members(members[:1])
        assert members[0].partitions() == {0, 1, 2, 3}
        await settle()
        # Its removal is durable too.
        again = await later.restarted().start()
        assert set(group_of(again, "g").members) == {"m0"}
    run(scenario())


def test_describe() -> None:
    async def scenario() -> None:
        world = await World().start()
        world.add_topic("t", 3)
        members = [Member(world, "g", f"m{i}", ["t"]) for i in range(2)]
        await settle_members(members)
        described = world.coordinator.consumer.describe(world.shard("g"), "g")
        assert described["group_state"] == "Stable"
        assert described["assignor_name"] == "uniform"
        parts = sorted(p for m in described["members"]
                       for tp in m["assignment"]["topic_partitions"] for p in tp["partitions"])
        assert parts == [0, 1, 2]
        assert described["members"][0]["assignment"]["topic_partitions"][0]["topic_name"] == "t"
        listed = world.coordinator.admin.list([], ["consumer"])
        assert listed == [{"group_id": "g", "protocol_type": "consumer",
                           "group_state": "Stable", "group_type": "consumer"}]
        # A classic JoinGroup on a non-empty consumer group is refused.
        assert world.join("g").error == E.inconsistent_group_protocol
    run(scenario())


def test_a_planning_copy_holds_the_whole_group_and_shares_no_map() -> None:
    async def scenario() -> None:
        world = await World().start()
        world.add_topic("t", 3)
        await settle_members([Member(world, "g", f"m{i}", ["t"]) for i in range(2)])
        group = group_of(world, "g")
        staged = group.copy()
        assert vars(staged) == vars(group)
        for name, value in vars(group).items():
            if isinstance(value, dict):
                assert getattr(staged, name) is not value, name
    run(scenario())
