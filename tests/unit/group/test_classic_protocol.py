"""The classic rebalance protocol on a manual clock (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, timeouts, static membership)."""

from moldau.broker.group.classic import ClassicGroup, ClassicState
from moldau.broker.group.records import GroupKey, GroupValue, decode_key, decode_value
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.records.codec import decode_batch

from .helpers import World, cfg, result, run, settle


async def stable_group(world: World, group: str, n: int, **kwargs):
    """n members joined and synced; returns (generation, [member ids], leader)."""
    ids = [await world.join_member(group, client=f"c{i}", **kwargs) for i in range(n)]
    answers = [world.join(group, m, **kwargs) for m in ids]
    await world.advance(0)
    results = [await result(a) for a in answers]
    generation = results[0].generation_id
    leader = results[0].leader
    syncs = [world.sync(group, generation, m, {x: x.encode() for x in ids} if m == leader
                        else None) for m in ids]
    for s in syncs:
        assert (await result(s)).error == 0
    return generation, ids, leader


def group_of(world: World, group_id: str) -> ClassicGroup:
    group = world.shard(group_id).groups[group_id]
    assert isinstance(group, ClassicGroup)
    return group


def test_member_id_required_then_single_member_join() -> None:
    async def scenario() -> None:
        world = await World().start()
        first = world.join("g")
        assert first.error == E.member_id_required and first.member_id.startswith("client-")
        answer = world.join("g", first.member_id)
        joined = await result(answer, world, 1)
        assert joined.error == 0 and joined.generation_id == 1
        assert joined.leader == first.member_id
        assert joined.members == [(first.member_id, None, b"meta")]
        assert joined.protocol_name == "range" and joined.protocol_type == "consumer"
        assert group_of(world, "g").state == ClassicState.COMPLETING_REBALANCE
    run(scenario())


def test_join_without_member_id_below_v4_joins_directly() -> None:
    async def scenario() -> None:
        world = await World().start()
        joined = await result(world.join("g", version=3), world, 1)
        assert joined.error == 0 and joined.generation_id == 1 and joined.member_id
    run(scenario())


def test_initial_rebalance_delay_collects_members_into_one_generation() -> None:
    async def scenario() -> None:
        world = await World(cfg(initial_rebalance_delay_ms=3000)).start()
        a = await world.join_member("g")
        answer_a = world.join("g", a)
        await world.advance(1000)
        b = await world.join_member("g")
        answer_b = world.join("g", b)
        await world.advance(2500)  # t=3500: the delay was extended because b arrived
        assert not answer_a.done()
        await world.advance(3000)  # t=6500: no newcomer in the second window
        ra, rb = await result(answer_a), await result(answer_b)
        assert ra.generation_id == rb.generation_id == 1
        assert len(ra.members) == 2 and rb.members == []
    run(scenario())


def test_leader_assignment_reaches_every_member_and_is_stored() -> None:
    async def scenario() -> None:
        world = await World().start()
        ids = [await world.join_member("g", client=f"c{i}") for i in range(3)]
        answers = [world.join("g", m) for m in ids]
        await world.advance(0)
        results = [await result(a) for a in answers]
        leader = results[0].leader
        assert sum(1 for r in results if r.members) == 1
        followers = [m for m in ids if m != leader]
        parked = [world.sync("g", 1, m) for m in followers]
        assert not any(p.done() for p in parked)
        leader_sync = world.sync("g", 1, leader, {m: m.encode() for m in ids})
        assert (await result(leader_sync)).assignment == leader.encode()
        for m, p in zip(followers, parked, strict=True):
            assert (await result(p)).assignment == m.encode()
        group = group_of(world, "g")
        assert group.state == ClassicState.STABLE
        # The assignment is in __consumer_offsets as a GroupMetadata record.
        partition = world.coordinator.partition_of("g")
        records = [r for raw in world.log.read_batches(partition)
                   for r in decode_batch(raw).records]
        stored = [decode_value(decode_key(r.key), r.value) for r in records
                  if decode_key(r.key) == GroupKey("g")]
        assert isinstance(stored[-1], GroupValue) and stored[-1].generation == 1
        assert {m.member_id: m.assignment for m in stored[-1].members} == \
            {m: m.encode() for m in ids}
        # A SyncGroup in the stable group returns the member's assignment again.
        again = world.sync("g", 1, followers[0])
        assert again.assignment == followers[0].encode()
    run(scenario())


def test_heartbeat_errors() -> None:
    async def scenario() -> None:
        world = await World().start()
        generation, ids, _ = await stable_group(world, "g", 2)
        assert world.heartbeat("g", generation, ids[0]) == E.none
        assert world.heartbeat("g", generation, "nobody") == E.unknown_member_id
        assert world.heartbeat("g", generation + 5, ids[0]) == E.illegal_generation
        assert world.heartbeat("unknown-group", 1, "x") == E.unknown_member_id
        world.coordinator.classic.leave(world.shard("g"), "g", [(ids[1], None)])
        assert world.heartbeat("g", generation, ids[0]) == E.rebalance_in_progress
    run(scenario())


def test_leave_rebalances_remaining_members() -> None:
    async def scenario() -> None:
        world = await World().start()
        generation, ids, _ = await stable_group(world, "g", 3)
        top, errors = world.coordinator.classic.leave(world.shard("g"), "g",
                                                       [(ids[2], None), ("ghost", None)])
        assert top == 0 and errors == [E.none, E.unknown_member_id]
        assert group_of(world, "g").state == ClassicState.PREPARING_REBALANCE
        a, b = world.join("g", ids[0]), world.join("g", ids[1])
        ra, rb = await result(a), await result(b)
        assert ra.generation_id == rb.generation_id == generation + 1
        assert {m for m, _, _ in (ra.members or rb.members)} == set(ids[:2])
    run(scenario())


def test_last_member_leaving_empties_the_group() -> None:
    async def scenario() -> None:
        world = await World().start()
        generation, ids, _ = await stable_group(world, "g", 1)
        world.coordinator.classic.leave(world.shard("g"), "g", [(ids[0], None)])
        await settle()
        group = group_of(world, "g")
        assert group.state == ClassicState.EMPTY and group.generation_id == generation + 1
    run(scenario())


def test_session_timeout_removes_a_silent_member() -> None:
    async def scenario() -> None:
        world = await World().start()
        generation, ids, _ = await stable_group(world, "g", 2, session=6000)
        for _ in range(4):
            await world.advance(2000)
            assert world.heartbeat("g", generation, ids[0]) in (E.none,
                                                                E.rebalance_in_progress)
        group = group_of(world, "g")
        assert ids[1] not in group.members
        assert world.heartbeat("g", generation, ids[0]) == E.rebalance_in_progress
        rejoined = await result(world.join("g", ids[0], session=6000))
        assert rejoined.generation_id == generation + 1 and len(rejoined.members) == 1
    run(scenario())


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    async def scenario() -> None:
        world = await World().start()
        generation, ids, _ = await stable_group(world, "g", 2, rebalance=5000)
        newcomer = await world.join_member("g")
        new_answer = world.join("g", newcomer, rebalance=5000)
        old_answer = world.join("g", ids[0], rebalance=5000)
        # ids[1] keeps heartbeating but never rejoins.
        for _ in range(3):
            await world.advance(2000)
            world.heartbeat("g", generation, ids[1])
        r_new, r_old = await result(new_answer), await result(old_answer)
        assert r_new.generation_id == r_old.generation_id == generation + 1
        assert ids[1] not in group_of(world, "g").members
        assert world.heartbeat("g", generation + 1, ids[1]) == E.unknown_member_id
    run(scenario())


def test_static_member_restart_keeps_assignment_without_rebalance() -> None:
    async def scenario() -> None:
        world = await World().start()
        a = await result(world.join("g", instance="i-a"), world, 1)
        b_answer = world.join("g", instance="i-b")
        a2 = world.join("g", a.member_id, instance="i-a")
        ra, rb = await result(a2), await result(b_answer)
        generation = ra.generation_id
        leader = ra.leader
        members = [ra.member_id, rb.member_id]
        syncs = [world.sync("g", generation, m, {x: x.encode() for x in members}
                            if m == leader else None, instance=i)
                 for m, i in zip(members, ["i-a", "i-b"], strict=True)]
        for s in syncs:
            await result(s)
        # Instance i-b restarts: no member id, same instance id.
        restarted = await result(world.join("g", instance="i-b"))
        assert restarted.error == 0 and restarted.generation_id == generation
        assert restarted.member_id != rb.member_id
        assert restarted.leader == leader  # the old leader id: no assignment to redo
        group = group_of(world, "g")
        assert group.state == ClassicState.STABLE
        assert group.members[restarted.member_id].assignment == rb.member_id.encode()
        # The old incarnation is fenced.
        assert world.heartbeat("g", generation, rb.member_id, "i-b") == E.fenced_instance_id
        assert world.heartbeat("g", generation, restarted.member_id, "i-b") == E.none
        # A static member can be removed by instance id alone.
        _top, errors = world.coordinator.classic.leave(world.shard("g"), "g", [("", "i-b")])
        assert errors == [E.none]
        assert restarted.member_id not in group.members
    run(scenario())


def test_group_max_size() -> None:
    async def scenario() -> None:
        world = await World(cfg(max_size=2)).start()
        await stable_group(world, "g", 2)
        third = world.join("g")
        assert third.error == E.group_max_size_reached
    run(scenario())


def test_invalid_session_timeout_and_group_id() -> None:
    async def scenario() -> None:
        world = await World(cfg(max_session_timeout_ms=20_000)).start()
        assert world.join("g", session=500).error == E.invalid_session_timeout
        assert world.join("g", session=30_000).error == E.invalid_session_timeout
        assert world.join("").error == E.invalid_group_id
        assert world.join("g2", "not-a-member").error == E.unknown_member_id
        assert "g" not in world.shard("g").groups  # nothing left behind
    run(scenario())


def test_inconsistent_protocols_are_rejected() -> None:
    async def scenario() -> None:
        world = await World().start()
        await stable_group(world, "g", 1)
        assert world.join("g", protocol_type="connect").error == E.inconsistent_group_protocol
        assert world.join("g", protocols=[("roundrobin", b"")]).error == \
            E.inconsistent_group_protocol
    run(scenario())


def test_protocol_selection_by_votes() -> None:
    async def scenario() -> None:
        world = await World(cfg(initial_rebalance_delay_ms=100)).start()
        answers = []
        for prefs in (["roundrobin", "range"], ["range", "roundrobin"], ["range"]):
            member = await world.join_member("g", protocols=[(p, b"") for p in prefs])
            answers.append(world.join("g", member, protocols=[(p, b"") for p in prefs]))
        await world.advance(200)
        chosen = {(await result(a)).protocol_name for a in answers}
        assert chosen == {"range"}
    run(scenario())


def test_sync_group_v5_protocol_checks() -> None:
    async def scenario() -> None:
        world = await World().start()
        joined = await result(world.join("g", await world.join_member("g")), world, 1)
        bad_type = world.sync("g", 1, joined.member_id, protocol_type="connect")
        assert bad_type.error == E.inconsistent_group_protocol
        bad_name = world.sync("g", 1, joined.member_id, protocol_type="consumer",
                              protocol_name="roundrobin")
        assert bad_name.error == E.inconsistent_group_protocol
        good = await result(world.sync("g", 1, joined.member_id, {joined.member_id: b"x"},
                                       protocol_type="consumer", protocol_name="range"))
        assert good.error == 0 and good.protocol_name == "range"
        assert world.sync("g", 7, joined.member_id).error == E.illegal_generation
        assert world.sync("g", 1, "ghost").error == E.unknown_member_id
    run(scenario())


def test_member_that_never_syncs_is_removed_after_rebalance_timeout() -> None:
    async def scenario() -> None:
        world = await World().start()
        ids = [await world.join_member("g", rebalance=4000) for _ in range(2)]
        answers = [world.join("g", m, rebalance=4000) for m in ids]
        await world.advance(0)
        results = [await result(a) for a in answers]
        leader = results[0].leader
        follower = next(m for m in ids if m != leader)
        await result(world.sync("g", 1, leader, {m: b"x" for m in ids}))
        for _ in range(3):
            await world.advance(1500)
            world.heartbeat("g", 1, leader)
            world.heartbeat("g", 1, follower)  # alive, but never sends SyncGroup
        group = group_of(world, "g")
        assert follower not in group.members
        assert group.state == ClassicState.PREPARING_REBALANCE
    run(scenario())


def test_pending_member_that_never_returns_expires() -> None:
    async def scenario() -> None:
        world = await World().start()
        generation, ids, _ = await stable_group(world, "g", 1, session=5000)
        pending = world.join("g", session=5000)
        assert pending.error == E.member_id_required
        rejoin = world.join("g", ids[0], protocols=[("range", b"changed")], session=5000)
        await world.advance(1000)
        assert not rejoin.done()  # waits for the pending member
        await world.advance(5000)
        done = await result(rejoin)
        assert done.generation_id == generation + 1 and len(done.members) == 1
    run(scenario())


def test_group_metadata_survives_restart() -> None:
    async def scenario() -> None:
        world = await World().start()
        generation, ids, leader = await stable_group(world, "g", 2, session=6000)
        later = await world.restarted().start()
        group = group_of(later, "g")
        assert group.state == ClassicState.STABLE and group.generation_id == generation
        assert group.leader_id == leader
        assert {m: x.assignment for m, x in group.members.items()} == \
            {m: m.encode() for m in ids}
        # One member keeps heartbeating against the new coordinator; the other is gone.
        for _ in range(4):
            await later.advance(2000)
            later.heartbeat("g", generation, ids[0])
        assert set(group.members) == {ids[0]}
        assert group.state == ClassicState.PREPARING_REBALANCE
    run(scenario())
