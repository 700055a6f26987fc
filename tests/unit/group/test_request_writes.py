"""Requests write their records before they change the group (issue 11, defect 15, request
half): ConsumerGroupHeartbeat (join, reconcile, leave, static leave, taking over an empty
classic group), a classic JoinGroup taking over an empty consumer group, a static member
rejoining a stable classic group, DeleteGroups and a simple group's first commit. Each is driven
with a failing ``__consumer_offsets``: the client gets Kafka's error for the failed append and
memory still equals what a coordinator restarted from the same log loads. A log that stalls
shows that nothing is applied while the write is in flight."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from moldau.broker.group.classic import ClassicGroup, ClassicState
from moldau.broker.group.consumer_group import ConsumerGroup
from moldau.broker.group.offsets import OffsetToCommit
from moldau.broker.handlers.consumer_group_heartbeat import handle_consumer_group_heartbeat
from moldau.broker.handlers.delete_groups import handle_delete_groups
from moldau.protocol.errors import ErrorCode as E

from .helpers import GatedLog, World, cfg, persisted, reloaded, result, run, settle


def context(world: World, version: int = 1) -> Any:
    """What the handlers use of a RequestContext; responses stay plain data."""
    broker = SimpleNamespace(group_coordinator=world.coordinator)
    return SimpleNamespace(broker=broker, version=version, client_host="127.0.0.1",
                           header=SimpleNamespace(client_id="client", api_version=version),
                           respond=lambda data: data)


class CgMember:
    """A KIP-848 client talking to the ConsumerGroupHeartbeat handler."""

    def __init__(self, world: World, group: str, member_id: str, topics: list[str],
                 instance: str | None = None) -> None:
        self.world, self.group, self.member_id = world, group, member_id
        self.topics, self.instance = topics, instance
        self.epoch = 0
        self.owned: dict[Any, set[int]] = {}

    async def beat(self, epoch: int | None = None,
                   subscribe: list[str] | None = None) -> dict[str, Any]:
        epoch = self.epoch if epoch is None else epoch
        full = epoch == 0 or subscribe is not None
        self.topics = subscribe or self.topics
        owned = [SimpleNamespace(topic_id=t, partitions=sorted(p))
                 for t, p in self.owned.items()]
        request = SimpleNamespace(
            group_id=self.group, member_id=self.member_id, member_epoch=epoch,
            instance_id=self.instance, rack_id=None,
            rebalance_timeout=60_000 if full else -1,
            subscribed_topic_names=self.topics if full else None,
            subscribed_topic_regex=None, server_assignor=None,
            topic_partitions=[] if epoch == 0 else owned)
        answer = await handle_consumer_group_heartbeat(context(self.world), request)
        if answer["error_code"] == 0 and epoch >= 0:
            self.epoch = answer["member_epoch"]
            if answer["assignment"] is not None:
                self.owned = {tp["topic_id"]: set(tp["partitions"])
                              for tp in answer["assignment"]["topic_partitions"]}
        return answer  # type: ignore[no-any-return]


async def joined(world: World, group: str, count: int, **kwargs: Any) -> list[CgMember]:
    members = [CgMember(world, group, f"m{i}", ["t"], **kwargs) for i in range(count)]
    for _ in range(6):
        for m in members:
            assert (await m.beat())["error_code"] == 0
    return members


async def same_as_restart(world: World, group_id: str) -> Any:
    state = persisted(world, group_id)
    assert state == persisted(await reloaded(world), group_id)
    return state


async def kip848_world() -> World:
    world = await World().start()
    world.add_topic("t", 4)
    return world


def test_a_consumer_join_that_was_not_written_leaves_the_group_as_it_was() -> None:
    async def scenario() -> None:
        world = await kip848_world()
        [m0] = await joined(world, "g", 1)
        before = await same_as_restart(world, "g")
        world.log.fail_with = E.not_enough_replicas
        answer = await CgMember(world, "g", "m1", ["t"]).beat()
        assert answer["error_code"] == E.coordinator_not_available
        assert await same_as_restart(world, "g") == before
        # A brand-new group whose first write failed does not exist either.
        answer = await CgMember(world, "fresh", "x", ["t"]).beat()
        assert answer["error_code"] == E.coordinator_not_available
        assert "fresh" not in world.shard("fresh").groups
        world.log.fail_with = None
        members = [m0, CgMember(world, "g", "m1", ["t"])]
        for _ in range(6):
            for m in members:
                assert (await m.beat())["error_code"] == 0
        assert {p for m in members for ps in m.owned.values() for p in ps} == {0, 1, 2, 3}
        assert set(persisted(world, "g")[2]) == {"m0", "m1"}
        await same_as_restart(world, "g")
    run(scenario())


def test_heartbeats_whose_writes_fail_never_move_memory_ahead_of_the_log() -> None:
    async def scenario() -> None:
        world = await kip848_world()
        members = await joined(world, "g", 2)
        late = CgMember(world, "g", "m2", ["t"])
        # Every other append fails while a third member joins and the others reconcile.
        failures = 0
        for step in range(24):
            world.log.fail_with = E.not_leader_or_follower if step % 2 else None
            for m in [*members, late]:
                epoch_before = m.epoch
                answer = await m.beat()
                if answer["error_code"]:
                    assert answer["error_code"] == E.not_coordinator
                    assert m.epoch == epoch_before
                    failures += 1
                await same_as_restart(world, "g")
        assert failures > 0
        world.log.fail_with = None
        for _ in range(6):
            for m in [*members, late]:
                await m.beat()
        owned = [p for m in [*members, late] for ps in m.owned.values() for p in ps]
        assert sorted(owned) == [0, 1, 2, 3]
        await same_as_restart(world, "g")
    run(scenario())


def test_a_leave_that_was_not_written_keeps_the_member() -> None:
    async def scenario() -> None:
        world = await kip848_world()
        members = await joined(world, "g", 2, instance=None)
        static = CgMember(world, "g", "s", ["t"], instance="inst")
        for _ in range(6):
            for m in [*members, static]:
                await m.beat()
        before = await same_as_restart(world, "g")
        world.log.fail_with = E.kafka_storage_error
        assert (await members[1].beat(epoch=-1))["error_code"] == E.not_coordinator
        assert (await static.beat(epoch=-2))["error_code"] == E.not_coordinator
        assert await same_as_restart(world, "g") == before
        world.log.fail_with = None
        assert (await members[1].beat(epoch=-1))["error_code"] == 0
        assert (await static.beat(epoch=-2))["error_code"] == 0
        state = await same_as_restart(world, "g")
        assert set(state[2]) == {"m0", "s"}
    run(scenario())


def test_an_empty_classic_group_becomes_a_consumer_group_only_once_written() -> None:
    async def scenario() -> None:
        world = await kip848_world()
        shard = world.shard("g")
        errors = await world.coordinator.offsets.commit(
            shard, "g", -1, "", None, [OffsetToCommit("t", 0, 7, -1, "")], version=8)
        assert errors == [E.none]
        before = await same_as_restart(world, "g")
        world.log.fail_with = E.not_enough_replicas
        answer = await CgMember(world, "g", "m0", ["t"]).beat()
        assert answer["error_code"] == E.coordinator_not_available
        assert isinstance(shard.groups["g"], ClassicGroup)
        assert await same_as_restart(world, "g") == before
        world.log.fail_with = None
        assert (await CgMember(world, "g", "m0", ["t"]).beat())["error_code"] == 0
        assert isinstance(shard.groups["g"], ConsumerGroup)
        state = await same_as_restart(world, "g")
        assert state[0] == "consumer" and state[3] == before[3]
    run(scenario())


def test_a_classic_join_takes_over_an_empty_consumer_group_only_once_written() -> None:
    async def scenario() -> None:
        world = await kip848_world()
        [m0] = await joined(world, "g", 1)
        assert (await m0.beat(epoch=-1))["error_code"] == 0
        before = await same_as_restart(world, "g")
        assert before[0] == "consumer" and before[2] == {}
        world.log.fail_with = E.not_enough_replicas
        failing = world.join("g", version=3)
        await settle()
        assert isinstance(world.shard("g").groups["g"], ConsumerGroup)
        assert await same_as_restart(world, "g") == before
        assert (await result(failing)).error == E.coordinator_not_available
        world.log.fail_with = None
        pending = world.join("g", version=3)
        await settle()  # the tombstone is written, then the join waits for its rebalance
        answer = await result(pending, world, 1)
        assert answer.error == 0 and answer.generation_id == 1
        group = world.shard("g").groups["g"]
        assert isinstance(group, ClassicGroup)
        # Until the first generation's sync is written the group lives in memory only (as in
        # Kafka); what a restart loads is no longer the consumer group.
        assert persisted(await reloaded(world), "g")[0] is None
        synced = await result(world.sync("g", 1, answer.member_id, {answer.member_id: b"a"}))
        assert synced.error == 0
        assert (await same_as_restart(world, "g"))[0] == "classic"
    run(scenario())


def test_a_static_rejoin_that_was_not_written_keeps_the_old_member() -> None:
    async def scenario() -> None:
        world = await World().start()
        first = await result(world.join("g", instance="i-a", session=10_000), world, 1)
        synced = await result(world.sync("g", first.generation_id, first.member_id,
                                         {first.member_id: b"mine"}, instance="i-a"))
        assert synced.error == 0
        group = world.shard("g").groups["g"]
        assert isinstance(group, ClassicGroup) and group.state == ClassicState.STABLE
        before = await same_as_restart(world, "g")
        world.log.fail_with = E.not_enough_replicas
        again = await result(world.join("g", instance="i-a", session=20_000, client="new"))
        assert again.error == E.coordinator_not_available
        assert await same_as_restart(world, "g") == before
        assert list(group.members) == [first.member_id]
        # The old incarnation is still the member, session timer included.
        assert world.heartbeat("g", first.generation_id, first.member_id, "i-a") == E.none
        assert world.timer.is_scheduled(("heartbeat", "g", first.member_id))
        world.log.fail_with = None
        again = await result(world.join("g", instance="i-a", session=20_000, client="new"))
        assert again.error == 0 and again.member_id != first.member_id
        assert list(group.members) == [again.member_id]
        assert group.members[again.member_id].session_timeout_ms == 20_000
        assert group.members[again.member_id].assignment == b"mine"
        assert world.heartbeat("g", first.generation_id, first.member_id, "i-a") \
            == E.fenced_instance_id
        await same_as_restart(world, "g")
    run(scenario())


def test_delete_groups_that_was_not_written_keeps_the_group() -> None:
    async def scenario() -> None:
        world = await World().start()
        await world.coordinator.offsets.commit(
            world.shard("g"), "g", -1, "", None, [OffsetToCommit("t", 0, 7, -1, "")],
            version=8)
        before = await same_as_restart(world, "g")
        request = SimpleNamespace(groups_names=["g"])
        for failure, answer in [(E.kafka_storage_error, E.not_coordinator),
                                (E.message_too_large, E.unknown_server_error)]:
            world.log.fail_with = failure
            response = await handle_delete_groups(context(world), request)
            assert response["results"] == [{"group_id": "g", "error_code": answer}]
            assert await same_as_restart(world, "g") == before
        world.log.fail_with = None
        response = await handle_delete_groups(context(world), request)
        assert response["results"] == [{"group_id": "g", "error_code": 0}]
        assert await same_as_restart(world, "g") == (None, {})
    run(scenario())


def test_a_group_write_too_large_for_the_log_is_an_unknown_server_error() -> None:
    async def scenario() -> None:
        world = await kip848_world()
        world.log.fail_with = E.message_too_large
        answer = await CgMember(world, "g", "m0", ["t"]).beat()
        assert answer["error_code"] == E.unknown_server_error
        assert persisted(world, "g") == (None, {})
    run(scenario())


def test_nothing_is_applied_while_the_write_is_in_flight() -> None:
    async def scenario() -> None:
        world = await World(log=GatedLog()).start()
        world.add_topic("t", 4)
        log = world.log
        assert isinstance(log, GatedLog)
        await joined(world, "g", 1)
        before = persisted(world, "g")
        log.gate.clear()
        # Two members join at once; their writes wait on the log.
        joins = [asyncio.ensure_future(CgMember(world, "g", f"n{i}", ["t"]).beat())
                 for i in range(2)]
        commit = asyncio.ensure_future(world.coordinator.offsets.commit(
            world.shard("simple"), "simple", -1, "", None,
            [OffsetToCommit("t", 0, 1, -1, "")], version=8))
        await settle()
        assert log.waiting >= 2
        assert persisted(world, "g") == before
        assert "simple" not in world.shard("simple").groups
        log.gate.set()
        answers = await asyncio.gather(*joins)
        assert [a["error_code"] for a in answers] == [0, 0]
        assert await commit == [E.none]
        state = await same_as_restart(world, "g")
        assert set(state[2]) == {"m0", "n0", "n1"}
        # Each join moved the group to its own epoch.
        assert state[1] == before[1] + 2
        await same_as_restart(world, "simple")
    run(scenario())


def test_offset_delete_sees_the_subscription_being_written() -> None:
    async def scenario() -> None:
        world = await World(log=GatedLog()).start()
        world.add_topic("t", 2)
        world.add_topic("x", 1)
        log = world.log
        assert isinstance(log, GatedLog)
        [m0] = await joined(world, "g", 1)
        shard = world.shard("g")
        errors = await world.coordinator.offsets.commit(
            shard, "g", m0.epoch, "m0", None, [OffsetToCommit("x", 0, 3, -1, "")], version=9)
        assert errors == [E.none]
        log.gate.clear()
        subscribing = asyncio.ensure_future(m0.beat(subscribe=["t", "x"]))
        await settle()
        deleting = asyncio.ensure_future(
            world.coordinator.offsets.delete(shard, "g", [("x", [0])]))
        await settle()
        assert not deleting.done()  # it waits for the subscription being written
        log.gate.set()
        assert (await subscribing)["error_code"] == 0
        assert await deleting == (E.none, [[E.group_subscribed_to_topic]])
        assert persisted(world, "g")[3] == {("x", 0): (3, -1, "", world.timer.now_ms(), -1)}
        await same_as_restart(world, "g")
    run(scenario())


def test_expiry_leaves_a_group_alone_while_a_join_into_it_is_written() -> None:
    async def scenario() -> None:
        world = await World(cfg(offsets_retention_ms=60_000), log=GatedLog()).start()
        world.add_topic("t", 2)
        log = world.log
        assert isinstance(log, GatedLog)
        [m0] = await joined(world, "g", 1)
        shard = world.shard("g")
        errors = await world.coordinator.offsets.commit(
            shard, "g", m0.epoch, "m0", None, [OffsetToCommit("t", 0, 3, -1, "")], version=9)
        assert errors == [E.none]
        assert (await m0.beat(epoch=-1))["error_code"] == 0
        await world.advance(120_000)  # the empty group's offsets have expired
        log.gate.clear()
        joining = asyncio.ensure_future(CgMember(world, "g", "m1", ["t"]).beat())
        await settle()
        expiring = asyncio.ensure_future(world.coordinator.offsets.expire(shard))
        await settle()
        log.gate.set()
        assert (await joining)["error_code"] == 0
        await expiring
        state = await same_as_restart(world, "g")
        assert state[0] == "consumer" and set(state[2]) == {"m1"}
    run(scenario())


def test_a_request_that_goes_away_during_its_write_still_applies_it() -> None:
    """A client that disconnects while its change waits for the ISR: the batch is in the log,
    so memory must have it too."""
    async def scenario() -> None:
        world = await World(log=GatedLog(after_append=True)).start()
        world.add_topic("t", 2)
        log = world.log
        assert isinstance(log, GatedLog)
        await joined(world, "g", 1)
        await world.coordinator.offsets.commit(
            world.shard("idle"), "idle", -1, "", None, [OffsetToCommit("t", 0, 1, -1, "")],
            version=8)
        log.gate.clear()
        requests = [
            asyncio.ensure_future(CgMember(world, "g", "m1", ["t"]).beat()),
            asyncio.ensure_future(world.coordinator.offsets.commit(
                world.shard("c"), "c", -1, "", None, [OffsetToCommit("t", 0, 5, -1, "")],
                version=8)),
            asyncio.ensure_future(handle_delete_groups(context(world),
                                                       SimpleNamespace(groups_names=["idle"]))),
        ]
        await settle()
        assert log.waiting == 3
        for request in requests:
            request.cancel()
        await settle()
        log.gate.set()
        await settle()
        assert set((await same_as_restart(world, "g"))[2]) == {"m0", "m1"}
        assert (await same_as_restart(world, "c"))[3] != {}
        assert await same_as_restart(world, "idle") == (None, {})
    run(scenario())
