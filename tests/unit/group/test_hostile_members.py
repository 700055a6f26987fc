"""Group requests the live fuzzer found crashing the coordinator: a member joining with a
protocol the group does not support through the KIP-394 pending-member path, member ids
that do not fit a classic string, and records too long for ``__consumer_offsets``."""

import uuid

from moldau.broker.group.classic_protocol import new_member_id
from moldau.broker.group.errors import GroupError
from moldau.broker.group.records import ConsumerMemberKey, OffsetKey, OffsetValue
from moldau.broker.group.wire import MAX_CLASSIC_STRING
from moldau.protocol.errors import ErrorCode as E

from .helpers import World, result, run
from .test_classic_protocol import group_of, stable_group
from .test_offsets import commit, fetch, offsets


def test_a_pending_member_with_a_protocol_the_group_lacks_is_refused() -> None:
    async def scenario() -> None:
        world = await World().start()
        _, [a], _ = await stable_group(world, "g", 1)
        b = await world.join_member("g", client="b")  # pending (KIP-394), any protocol yet
        refused = world.join("g", b, protocols=[("roundrobin", b"")])
        assert (await result(refused)).error == E.inconsistent_group_protocol
        # The group goes on: A rejoins and, once B's pending id expires (its session
        # timeout), gets a generation with the protocol it has.
        rejoined = await result(world.join("g", a), world, 10_001)
        assert rejoined.error == 0 and rejoined.protocol_name == "range"
        assert list(group_of(world, "g").members) == [a]
    run(scenario())


def test_a_member_switching_to_a_protocol_the_others_lack_is_refused() -> None:
    async def scenario() -> None:
        world = await World().start()
        generation, [a, b], _ = await stable_group(world, "g", 2)
        refused = world.join("g", b, protocols=[("roundrobin", b"")])
        assert (await result(refused)).error == E.inconsistent_group_protocol
        assert world.heartbeat("g", generation, a) == 0  # the group is untouched
        assert world.heartbeat("g", generation, b) == 0
    run(scenario())


def test_member_ids_fit_a_classic_string_whatever_the_client_id() -> None:
    for prefix in ("c" * 32767, "é" * 20000, "€" * 11000, "x" * 10):
        member_id = new_member_id(prefix)
        size = len(member_id.encode("utf-8"))
        assert size <= MAX_CLASSIC_STRING, (prefix[:1], size)
        # A prefix of the client id (whole characters), "-", a UUID.
        assert prefix.startswith(member_id[:-37]) and member_id[-37] == "-"
        assert uuid.UUID(member_id[-36:])
    assert new_member_id("client").startswith("client-")


def test_a_record_too_long_for_its_key_fails_the_write_with_a_kafka_error() -> None:
    async def scenario() -> None:
        world = await World().start()
        shard = world.shard("g")
        try:
            await world.coordinator.write(shard, [(ConsumerMemberKey("g", "m" * 40_000), None)])
        except GroupError as exc:
            assert exc.code == E.unknown_server_error and "40000 bytes" in exc.message
        else:
            raise AssertionError("the write of an unencodable key succeeded")
        # A commit naming such a topic gets the error per partition; nothing is kept.
        assert await commit(world, "g", offsets(("t" * 40_000, 0, 1), ("t", 0, 2))) == [
            E.unknown_server_error] * 2
        assert fetch(world, "g") == {}
        assert not list(world.log.read_batches(world.coordinator.partition_of("g")))
    run(scenario())


def test_offset_expiry_survives_a_key_it_cannot_write() -> None:
    async def scenario() -> None:
        world = await World().start()
        shard = world.shard("g")
        # As if loaded: an offset whose tombstone cannot be encoded, long expired.
        shard.offsets.replay(OffsetKey("g", "t" * 40_000, 0), OffsetValue(1, "", 0), 0)
        await world.advance(world.config.offsets_retention_ms + 1)
        assert await world.coordinator.expire_all() == 0
    run(scenario())


def test_a_too_long_group_id_is_refused_at_the_door() -> None:
    async def scenario() -> None:
        world = await World().start()
        try:
            world.coordinator.shard_of_group("g" * 40_000)
        except GroupError as exc:
            assert exc.code == E.invalid_group_id
        else:
            raise AssertionError("a 40,000-byte group id got a shard")
        assert world.coordinator.shard_of_group("g" * 32767) is not None
    run(scenario())
