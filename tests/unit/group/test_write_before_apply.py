"""Group changes are written before they are applied (issue 11, defect 15): a KIP-848 member
fenced by its session timeout, a classic group that nobody rejoined, a simple group created by a
commit. With a failing ``__consumer_offsets`` the group stays as it was (memory never runs ahead
of the log, so a restart shows the same group), the failure is logged and the write is retried.
Also: a failed append keeps its cause chained."""

from __future__ import annotations

import logging

import pytest

from moldau.broker.group.classic import ClassicState
from moldau.broker.group.classic_rebalance import EMPTY_RETRY_MS
from moldau.broker.group.consumer_ops import FENCE_RETRY_MS
from moldau.broker.group.errors import GroupError
from moldau.broker.group.offsets import OffsetToCommit
from moldau.broker.group.offsets_log import OffsetsLogError
from moldau.broker.group.records import GroupKey
from moldau.protocol.errors import ErrorCode as E

from .helpers import World, cfg, reloaded, run, settle
from .test_classic_protocol import group_of, stable_group
from .test_consumer_ops import Member, settle_members
from .test_consumer_ops import group_of as consumer_group

SESSION = 10_000


def test_a_failed_append_keeps_its_cause() -> None:
    async def scenario() -> None:
        world = await World().start()
        world.log.fail_with = E.kafka_storage_error
        with pytest.raises(GroupError) as raised:
            await world.coordinator.write(world.shard("g"), [(GroupKey("g"), None)])
        assert raised.value.code == E.not_coordinator
        assert isinstance(raised.value.__cause__, OffsetsLogError)
        assert raised.value.__cause__.code == E.kafka_storage_error
    run(scenario())


def test_a_fenced_member_is_removed_only_once_its_removal_is_written(
        caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        world = await World(cfg(consumer_session_timeout_ms=SESSION)).start()
        world.add_topic("t", 4)
        members = [Member(world, "g", f"m{i}", ["t"]) for i in range(2)]
        await settle_members(members)
        await settle()
        group = consumer_group(world, "g")
        epoch = group.group_epoch
        # m1 goes silent while __consumer_offsets cannot be written.
        world.log.fail_with = E.not_enough_replicas
        for _ in range(3):
            await world.advance(SESSION // 2)
            await members[0].beat()
        assert "m1" in group.members and group.group_epoch == epoch, "memory ran ahead"
        assert "Could not write the removal of member m1" in caplog.text
        # The log says the same: a restart would bring back exactly this group.
        restarted = await reloaded(world)
        assert set(consumer_group(restarted, "g").members) == {"m0", "m1"}
        # The log recovers: the retried fence is written, then applied.
        world.log.fail_with = None
        await world.advance(FENCE_RETRY_MS)
        assert set(group.members) == {"m0"} and group.group_epoch == epoch + 1
        assert not group.epoch_dirty
        await settle_members(members[:1])
        assert members[0].partitions() == {0, 1, 2, 3}
        await settle()
        again = await reloaded(world)
        assert set(consumer_group(again, "g").members) == {"m0"}
    caplog.set_level(logging.INFO, logger="moldau.broker.group")
    run(scenario())


def test_a_member_being_fenced_is_refused() -> None:
    async def scenario() -> None:
        world = await World(cfg(consumer_session_timeout_ms=SESSION)).start()
        world.add_topic("t", 2)
        member = Member(world, "g", "m0", ["t"])
        await member.beat()
        await settle()
        world.timer.advance(SESSION)  # the session timer fires; its write is still pending
        with pytest.raises(GroupError) as raised:
            await member.beat()
        assert raised.value.code == E.unknown_member_id
        await settle()
        assert consumer_group(world, "g").members == {}
    run(scenario())


def test_an_emptied_classic_group_enters_its_empty_generation_once_written(
        caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        world = await World().start()
        generation, ids, _ = await stable_group(world, "g", 1, session=6000)
        group = group_of(world, "g")
        world.log.fail_with = E.not_enough_replicas
        world.coordinator.classic.leave(world.shard("g"), "g", [(ids[0], None)])
        await settle()
        assert group.state == ClassicState.PREPARING_REBALANCE
        assert group.generation_id == generation, "memory ran ahead of the log"
        assert "could not write its empty generation" in caplog.text
        restarted = await reloaded(world)
        assert group_of(restarted, "g").generation_id == generation
        world.log.fail_with = None
        await world.advance(EMPTY_RETRY_MS)
        assert group.state == ClassicState.EMPTY and group.generation_id == generation + 1
        again = await reloaded(world)
        loaded = group_of(again, "g")
        assert (loaded.state, loaded.generation_id) == (ClassicState.EMPTY, generation + 1)
        assert not loaded.members
    caplog.set_level(logging.INFO, logger="moldau.broker.group")
    run(scenario())


def test_a_member_joining_while_the_empty_generation_is_written_starts_the_next() -> None:
    async def scenario() -> None:
        world = await World().start()
        generation, ids, _ = await stable_group(world, "g", 1)
        group = group_of(world, "g")
        world.coordinator.classic.leave(world.shard("g"), "g", [(ids[0], None)])
        # Before the empty generation's write completes, a new member arrives.
        newcomer = await world.join_member("g", client="late")
        answer = world.join("g", newcomer)
        await settle()
        joined = answer.result() if not hasattr(answer, "error") else answer
        assert joined.error == 0, joined
        assert group.state == ClassicState.COMPLETING_REBALANCE
        assert newcomer in group.members and group.generation_id > generation
    run(scenario())


def test_a_simple_commit_that_was_not_written_leaves_no_group() -> None:
    async def scenario() -> None:
        world = await World().start()
        shard = world.shard("simple")
        world.log.fail_with = E.not_enough_replicas
        errors = await world.coordinator.offsets.commit(
            shard, "simple", -1, "", None, [OffsetToCommit("t", 0, 5, -1, "")], version=8)
        assert errors == [E.coordinator_not_available]
        assert "simple" not in shard.groups  # the log holds nothing of it either
        world.log.fail_with = None
        too_big = OffsetToCommit("t", 0, 5, -1, "x" * 10_000)
        errors = await world.coordinator.offsets.commit(shard, "simple", -1, "", None,
                                                        [too_big], version=8)
        assert errors == [E.offset_metadata_too_large] and "simple" not in shard.groups
    run(scenario())


def test_timer_writes_failing_on_a_storage_error_are_retried_while_still_coordinator() -> None:
    """KAFKA_STORAGE_ERROR answers NOT_COORDINATOR, but the shard is still loaded: the fence and
    the empty generation must be retried, not abandoned as if the partition had moved."""
    async def scenario() -> None:
        world = await World(cfg(consumer_session_timeout_ms=SESSION)).start()
        world.add_topic("t", 2)
        member = Member(world, "cg", "m0", ["t"])
        await member.beat()
        _generation, ids, _ = await stable_group(world, "g", 1, session=6000)
        world.log.fail_with = E.kafka_storage_error
        world.coordinator.classic.leave(world.shard("g"), "g", [(ids[0], None)])
        await world.advance(SESSION)  # m0's session expires; its fence fails
        world.log.fail_with = None
        await world.advance(max(FENCE_RETRY_MS, EMPTY_RETRY_MS))
        assert consumer_group(world, "cg").members == {}
        assert group_of(world, "g").state == ClassicState.EMPTY
        restarted = await reloaded(world)
        assert consumer_group(restarted, "cg").members == {}
        assert group_of(restarted, "g").state == ClassicState.EMPTY
    run(scenario())
