"""Offset commits, fetches, deletion, expiry and reloading from __consumer_offsets."""

from moldau.broker.group.classic import ClassicGroup
from moldau.broker.group.offsets import OffsetToCommit
from moldau.broker.group.records import OffsetKey, decode_key
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.records.codec import decode_batch

from .helpers import World, cfg, result, run, settle
from .test_classic_protocol import stable_group

MINUTE = 60_000


def offsets(*items: tuple[str, int, int]) -> list[OffsetToCommit]:
    return [OffsetToCommit(t, p, o, -1, f"meta-{o}") for t, p, o in items]


async def commit(world: World, group: str, items: list[OffsetToCommit], generation: int = -1,
                 member: str = "", version: int = 8, **kw: object) -> list[int]:
    return await world.coordinator.offsets.commit(world.shard(group), group, generation,
                                                  member, None, items, version=version, **kw)


def fetch(world: World, group: str, topics: list[tuple[str, list[int]]] | None = None,
          **kw: object) -> dict[tuple[str, int], tuple[int, str]]:
    got = world.coordinator.offsets.fetch(world.shard(group), group, topics, **kw)
    return {(t, p): (f.offset, f.metadata) for t, entries in got for p, f in entries}


def test_simple_commit_and_fetch() -> None:
    async def scenario() -> None:
        world = await World().start()
        assert await commit(world, "simple", offsets(("t", 0, 10), ("t", 1, 20))) == [0, 0]
        assert fetch(world, "simple") == {("t", 0): (10, "meta-10"), ("t", 1): (20, "meta-20")}
        # Unknown partitions answer -1 with empty metadata; unknown groups too.
        assert fetch(world, "simple", [("t", [0, 5])]) == {("t", 0): (10, "meta-10"),
                                                           ("t", 5): (-1, "")}
        assert fetch(world, "nobody", [("t", [0])]) == {("t", 0): (-1, "")}
        assert fetch(world, "nobody") == {}
    run(scenario())


def test_commit_validation_for_classic_groups() -> None:
    async def scenario() -> None:
        world = await World().start()
        generation, ids, _ = await stable_group(world, "g", 2)
        assert await commit(world, "g", offsets(("t", 0, 1)), generation, ids[0]) == [0]
        assert await commit(world, "g", offsets(("t", 0, 1)), generation + 1, ids[0]) == \
            [E.illegal_generation]
        assert await commit(world, "g", offsets(("t", 0, 1)), generation, "ghost") == \
            [E.unknown_member_id]
        # A simple commit is refused while the group has members.
        assert await commit(world, "g", offsets(("t", 0, 1))) == [E.unknown_member_id]
        # Unknown group with a generation: ILLEGAL_GENERATION before v9, GROUP_ID_NOT_FOUND.
        assert await commit(world, "x", offsets(("t", 0, 1)), 3, "m", version=8) == \
            [E.illegal_generation]
        assert await commit(world, "x", offsets(("t", 0, 1)), 3, "m", version=9) == \
            [E.group_id_not_found]
    run(scenario())


def test_commit_during_completing_rebalance_is_refused() -> None:
    async def scenario() -> None:
        world = await World().start()
        member = await world.join_member("g")
        joined = await result(world.join("g", member), world, 1)
        assert await commit(world, "g", offsets(("t", 0, 1)), joined.generation_id, member) \
            == [E.rebalance_in_progress]
    run(scenario())


def test_metadata_too_large_is_per_partition() -> None:
    async def scenario() -> None:
        world = await World(cfg(offset_metadata_max_bytes=5)).start()
        items = [OffsetToCommit("t", 0, 1, -1, "short"), OffsetToCommit("t", 1, 2, -1, "x" * 6)]
        assert await commit(world, "g", items) == [E.none, E.offset_metadata_too_large]
        assert fetch(world, "g") == {("t", 0): (1, "short")}
    run(scenario())


def test_failed_write_reports_coordinator_errors() -> None:
    async def scenario() -> None:
        world = await World().start()
        world.log.fail_with = E.not_leader_or_follower
        assert await commit(world, "g", offsets(("t", 0, 1))) == [E.not_coordinator]
        world.log.fail_with = E.message_too_large
        assert await commit(world, "g", offsets(("t", 0, 1))) == [E.invalid_commit_offset_size]
        world.log.fail_with = None
        assert fetch(world, "g") == {}
    run(scenario())


def test_offsets_and_leader_epochs_survive_restart() -> None:
    async def scenario() -> None:
        world = await World().start()
        await commit(world, "a", [OffsetToCommit("t", 0, 7, 3, None)])
        await commit(world, "a", [OffsetToCommit("t", 0, 9, 4, "latest")])
        later = await world.restarted().start()
        got = later.coordinator.offsets.fetch(later.shard("a"), "a", None)
        entry = got[0][1][0][1]
        assert (entry.offset, entry.leader_epoch, entry.metadata) == (9, 4, "latest")
        # Offsets-only groups come back as empty classic groups.
        assert isinstance(later.shard("a").groups["a"], ClassicGroup)
    run(scenario())


def test_out_of_order_replay_never_rolls_back() -> None:
    async def scenario() -> None:
        world = await World().start()
        shard = world.shard("g")
        from moldau.broker.group.records import OffsetValue

        key = OffsetKey("g", "t", 0)
        shard.offsets.replay(key, OffsetValue(20, "", 0), 5)
        shard.offsets.replay(key, OffsetValue(10, "", 0), 4)
        assert shard.offsets.of("g")[("t", 0)].offset == 20
        shard.offsets.replay(key, None, 3)
        assert ("t", 0) in shard.offsets.of("g")
        shard.offsets.replay(key, None, 6)
        assert shard.offsets.of("g") == {}
    run(scenario())


def test_simple_group_offsets_expire_after_retention_from_commit() -> None:
    async def scenario() -> None:
        world = await World(cfg(offsets_retention_ms=10 * MINUTE)).start()
        await commit(world, "s", offsets(("t", 0, 1)))
        await world.advance(5 * MINUTE)
        await commit(world, "s", offsets(("t", 1, 2)))
        await world.advance(6 * MINUTE)
        assert await world.coordinator.expire_all() == 1
        assert fetch(world, "s") == {("t", 1): (2, "meta-2")}
        await world.advance(5 * MINUTE)
        assert await world.coordinator.expire_all() == 1
        assert "s" not in world.shard("s").groups  # empty and offset-less: deleted
        # Tombstones (null values) were written for the offsets and the group.
        partition = world.coordinator.partition_of("s")
        tombstones = [decode_key(r.key) for raw in world.log.read_batches(partition)
                      for r in decode_batch(raw).records if r.value is None]
        assert OffsetKey("s", "t", 0) in tombstones and OffsetKey("s", "t", 1) in tombstones
        later = await world.restarted().start()
        assert fetch(later, "s") == {}
    run(scenario())


def test_empty_consumer_group_offsets_expire_from_when_it_became_empty() -> None:
    async def scenario() -> None:
        world = await World(cfg(offsets_retention_ms=10 * MINUTE,
                                max_session_timeout_ms=60 * MINUTE)).start()
        generation, ids, _ = await stable_group(world, "g", 1, session=30 * MINUTE)
        await commit(world, "g", offsets(("t", 0, 5)), generation, ids[0])
        for _ in range(3):  # active for 15 minutes: nothing expires
            await world.advance(5 * MINUTE)
            world.heartbeat("g", generation, ids[0])
            assert await world.coordinator.expire_all() == 0
        world.coordinator.classic.leave(world.shard("g"), "g", [(ids[0], None)])
        await settle()
        await world.advance(9 * MINUTE)
        assert await world.coordinator.expire_all() == 0
        await world.advance(2 * MINUTE)
        assert await world.coordinator.expire_all() == 1
        assert fetch(world, "g") == {}
    run(scenario())


def test_stable_group_expires_only_unsubscribed_topics() -> None:
    async def scenario() -> None:
        from moldau.broker.group.consumer_protocol import encode_subscription

        world = await World(cfg(offsets_retention_ms=10 * MINUTE,
                                max_session_timeout_ms=60 * MINUTE)).start()
        sub = [("range", encode_subscription(["t"]))]
        generation, ids, _ = await stable_group(world, "g", 1, session=60 * MINUTE,
                                                protocols=sub)
        await commit(world, "g", offsets(("t", 0, 5), ("old", 0, 3)), generation, ids[0])
        await world.advance(11 * MINUTE)
        assert await world.coordinator.expire_all() == 1
        assert fetch(world, "g") == {("t", 0): (5, "meta-5")}
    run(scenario())


def test_commit_retention_time_sets_expiry() -> None:
    async def scenario() -> None:
        world = await World().start()
        await commit(world, "s", offsets(("t", 0, 1)), version=2, retention_ms=MINUTE)
        await world.advance(2 * MINUTE)
        assert await world.coordinator.expire_all() == 1
    run(scenario())


def test_delete_groups() -> None:
    async def scenario() -> None:
        world = await World().start()
        admin = world.coordinator.admin
        _generation, _ids, _ = await stable_group(world, "busy", 1)
        await commit(world, "idle", offsets(("t", 0, 1)))
        assert await admin.delete(world.shard("busy"), "busy") == E.non_empty_group
        assert await admin.delete(world.shard("none"), "none") == E.group_id_not_found
        assert await admin.delete(world.shard("idle"), "idle") == E.none
        assert fetch(world, "idle") == {}
        later = await world.restarted().start()
        assert "idle" not in later.shard("idle").groups
        assert fetch(later, "idle") == {}
    run(scenario())


def test_offset_delete_refuses_subscribed_topics() -> None:
    async def scenario() -> None:
        from moldau.broker.group.consumer_protocol import encode_subscription

        world = await World().start()
        sub = [("range", encode_subscription(["t"]))]
        generation, ids, _ = await stable_group(world, "g", 1, protocols=sub)
        await commit(world, "g", offsets(("t", 0, 5), ("old", 0, 3)), generation, ids[0])
        manager = world.coordinator.offsets
        error, rows = await manager.delete(world.shard("g"), "g", [("t", [0]), ("old", [0])])
        assert error == 0 and rows == [[E.group_subscribed_to_topic], [E.none]]
        assert fetch(world, "g") == {("t", 0): (5, "meta-5")}
        error, _ = await manager.delete(world.shard("nope"), "nope", [("t", [0])])
        assert error == E.group_id_not_found
        # Members with a non-consumer protocol: subscriptions are unknown.
        await stable_group(world, "connect", 1, protocol_type="connect")
        error, _ = await manager.delete(world.shard("connect"), "connect", [("t", [0])])
        assert error == E.non_empty_group
    run(scenario())


def test_list_and_describe_groups() -> None:
    async def scenario() -> None:
        world = await World().start()
        await stable_group(world, "busy", 2)
        await commit(world, "simple", offsets(("t", 0, 1)))
        admin = world.coordinator.admin
        listed = {g["group_id"]: g for g in admin.list([], [])}
        assert listed["busy"]["group_state"] == "Stable"
        assert listed["busy"]["protocol_type"] == "consumer"
        assert listed["simple"]["group_state"] == "Empty"
        assert listed["simple"]["protocol_type"] == ""
        assert {g["group_id"] for g in admin.list(["stable"], [])} == {"busy"}
        assert admin.list([], ["consumer"]) == []
        described = admin.describe(world.shard("busy"), "busy")
        assert described["group_state"] == "Stable" and described["protocol_data"] == "range"
        assert len(described["members"]) == 2
        assert all(m["member_assignment"] for m in described["members"])
        assert admin.describe(world.shard("zzz"), "zzz")["group_state"] == "Dead"
    run(scenario())


def test_unreadable_records_are_skipped_when_loading() -> None:
    async def scenario() -> None:
        from moldau.broker.group.offsets_log import records_batch

        world = await World().start()
        await commit(world, "g", offsets(("t", 0, 4)))
        partition = world.coordinator.partition_of("g")
        # A record of an unknown type and a batch whose records do not decode.
        await world.log.append(partition, records_batch([(b"\x00\x63junk", b"x")], 0))
        broken = bytearray(records_batch([(b"k", b"v")], 0))
        broken[61:] = b"\xff" * (len(broken) - 61)
        world.log.partitions[partition].append(bytes(broken))
        later = await world.restarted().start()
        assert fetch(later, "g") == {("t", 0): (4, "meta-4")}
    run(scenario())
