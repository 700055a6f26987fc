"""Offsets committed inside a transaction (TxnOffsetCommit on the group coordinator): pending
until the end marker, visible on commit, dropped on abort, the same after a reload;
OffsetFetch ``require_stable`` answers UNSTABLE_OFFSET_COMMIT while pending; verification
answers and group validation (KIP-447). The transaction verifier is a fake here (the real one
is the transaction coordinator's); the coordinator, its log and its replay are real."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import pytest

from moldau.broker.group.errors import GroupError
from moldau.broker.group.offsets import OffsetToCommit
from moldau.broker.group.offsets_log import MemoryOffsetsLog
from moldau.broker.group.partitioning import OFFSETS_TOPIC
from moldau.broker.group.txn_offsets import TxnCommit, verification_error
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.records.codec import decode_batch

from .helpers import World, reloaded, run, settle
from .test_classic_protocol import stable_group

PID, EPOCH = 4000, 2


class FakeVerifier:
    """Answers ``answer`` for every partition and records what it was asked."""

    def __init__(self, answer: int = E.none) -> None:
        self.answer = answer
        self.asked: list[tuple[str, int, int, list[tuple[str, int]]]] = []

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     tps: Sequence[tuple[str, int]]) -> Mapping[tuple[str, int], int]:
        self.asked.append((transactional_id, producer_id, producer_epoch, list(tps)))
        return {tp: self.answer for tp in tps}


def txn(group: str = "g", offsets: dict[tuple[str, int], int] | None = None, *,
        pid: int = PID, epoch: int = EPOCH, generation: int = -1, member: str = "",
        instance: str | None = None, version: int = 3, metadata: str = "") -> TxnCommit:
    entries = [OffsetToCommit(t, p, o, -1, metadata)
               for (t, p), o in (offsets or {("t", 0): 10}).items()]
    return TxnCommit("tx", group, pid, epoch, generation, member, instance, entries, version)


async def commit(world: World, request: TxnCommit,
                 verifier: FakeVerifier | None = None) -> list[int]:
    shard = world.shard(request.group_id)
    return await world.coordinator.txn_offsets.commit(
        shard, request, verifier if verifier is not None else FakeVerifier())


def fetched(world: World, group: str = "g", *, stable: bool = False) -> dict[tuple[str, int],
                                                                               tuple[int, int]]:
    """(offset, error) per partition of topic t (partitions 0 and 1)."""
    shard = world.shard(group)
    answer = world.coordinator.offsets.fetch(shard, group, [("t", [0, 1])],
                                             require_stable=stable)
    return {(t, p): (f.offset, f.error) for t, entries in answer for p, f in entries}


async def end(world: World, group: str, commit_: bool, *, pid: int = PID, epoch: int = EPOCH,
              coordinator_epoch: int = 0) -> int:
    partition = world.coordinator.partition_of(group)
    return await world.coordinator.write_end_marker(partition, pid, epoch, coordinator_epoch,
                                                    commit_)


def test_offsets_of_a_transaction_are_visible_only_once_it_commits() -> None:
    async def scenario() -> None:
        world = await World().start()
        verifier = FakeVerifier()
        assert await commit(world, txn(offsets={("t", 0): 10, ("t", 1): 11}), verifier) == [0, 0]
        partition = world.coordinator.partition_of("g")
        assert verifier.asked == [("tx", PID, EPOCH, [(OFFSETS_TOPIC, partition)])]
        # The batch is the producer's transactional batch.
        header = decode_batch(world.log.partitions[partition][-1]).header
        assert (header.producer_id, header.producer_epoch, header.is_transactional) == (
            PID, EPOCH, True)
        assert fetched(world) == {("t", 0): (-1, 0), ("t", 1): (-1, 0)}
        assert fetched(world, stable=True) == {("t", 0): (-1, E.unstable_offset_commit),
                                               ("t", 1): (-1, E.unstable_offset_commit)}
        await end(world, "g", True)
        assert fetched(world) == fetched(world, stable=True) == {("t", 0): (10, 0),
                                                                 ("t", 1): (11, 0)}
        assert world.shard("g").offsets.pending == {}
        again = await reloaded(world)
        assert fetched(again, stable=True) == {("t", 0): (10, 0), ("t", 1): (11, 0)}
        assert "g" in again.shard("g").groups
    run(scenario())


def test_offsets_of_an_aborted_transaction_are_dropped() -> None:
    async def scenario() -> None:
        world = await World().start()
        await world.coordinator.offsets.commit(world.shard("g"), "g", -1, "", None,
                                               [OffsetToCommit("t", 0, 5, -1, "")], version=8)
        assert await commit(world, txn(offsets={("t", 0): 10})) == [0]
        await end(world, "g", False)
        assert fetched(world, stable=True) == {("t", 0): (5, 0), ("t", 1): (-1, 0)}
        again = await reloaded(world)
        assert fetched(again, stable=True) == {("t", 0): (5, 0), ("t", 1): (-1, 0)}
    run(scenario())


def test_an_open_transaction_is_still_pending_after_a_reload_and_ends_there() -> None:
    async def scenario() -> None:
        world = await World().start()
        await commit(world, txn(offsets={("t", 1): 7}))
        again = await reloaded(world)
        assert fetched(again, stable=True)[("t", 1)] == (-1, E.unstable_offset_commit)
        assert fetched(again)[("t", 1)] == (-1, 0)
        await end(again, "g", True)
        assert fetched(again, stable=True)[("t", 1)] == (7, 0)
    run(scenario())


def test_a_plain_commit_written_after_the_transactional_one_wins() -> None:
    async def scenario() -> None:
        world = await World().start()
        await commit(world, txn(offsets={("t", 0): 10}))
        await world.coordinator.offsets.commit(world.shard("g"), "g", -1, "", None,
                                               [OffsetToCommit("t", 0, 20, -1, "")], version=8)
        await end(world, "g", True)
        assert fetched(world)[("t", 0)] == (20, 0)
        assert fetched(await reloaded(world))[("t", 0)] == (20, 0)
    run(scenario())


def test_two_producers_pending_on_one_partition_end_independently() -> None:
    async def scenario() -> None:
        world = await World().start()
        await commit(world, txn(offsets={("t", 0): 10}, pid=1))
        await commit(world, txn(offsets={("t", 0): 12}, pid=2))
        await end(world, "g", False, pid=1)
        assert fetched(world, stable=True)[("t", 0)] == (-1, E.unstable_offset_commit)
        await end(world, "g", True, pid=2)
        assert fetched(world, stable=True)[("t", 0)] == (12, 0)
    run(scenario())


@pytest.mark.parametrize(("answer", "version", "expected"), [
    (E.invalid_txn_state, 3, E.invalid_txn_state),
    (E.producer_fenced, 3, E.invalid_producer_epoch),
    (E.invalid_producer_epoch, 0, E.invalid_producer_epoch),
    (E.transaction_abortable, 3, E.invalid_txn_state),
    (E.transaction_abortable, 4, E.transaction_abortable),
    (E.not_coordinator, 3, E.coordinator_not_available),
    (E.concurrent_transactions, 3, E.coordinator_not_available),
    (E.coordinator_load_in_progress, 3, E.coordinator_load_in_progress),
    (E.network_exception, 4, E.coordinator_load_in_progress),
])
def test_a_commit_that_fails_verification_writes_nothing(answer: int, version: int,
                                                         expected: int) -> None:
    assert verification_error(answer, version) == expected

    async def scenario() -> None:
        world = await World().start()
        partition = world.coordinator.partition_of("g")
        errors = await commit(world, txn(version=version), FakeVerifier(answer))
        assert errors == [expected]
        assert world.log.partitions.get(partition, []) == []
        assert world.shard("g").offsets.pending == {}
    run(scenario())


def test_without_a_verifier_nothing_is_written() -> None:
    async def scenario() -> None:
        world = await World().start()
        shard = world.shard("g")
        errors = await world.coordinator.txn_offsets.commit(shard, txn(), None)
        assert errors == [E.coordinator_not_available]
        assert world.log.partitions.get(shard.partition, []) == []
    run(scenario())


def test_kip447_membership_is_checked_for_v3_and_ignored_without_it() -> None:
    async def scenario() -> None:
        world = await World().start()
        generation, ids, _ = await stable_group(world, "g", 2)
        member = ids[0]
        assert await commit(world, txn(generation=generation + 1, member=member)) == [
            E.illegal_generation]
        assert await commit(world, txn(generation=generation, member="nobody")) == [
            E.unknown_member_id]
        # A zombie of the previous generation is refused, the current member commits.
        assert await commit(world, txn(generation=generation, member=member)) == [0]
        # v0-2 carry no membership (aiokafka): accepted while the group has members.
        assert await commit(world, txn(version=0, pid=PID + 1)) == [0]
        # A too-long metadata string fails its partition only.
        long = "x" * (world.config.offset_metadata_max_bytes + 1)
        mixed = txn(offsets={("t", 0): 1}, metadata=long, pid=PID + 2)
        assert await commit(world, mixed) == [E.offset_metadata_too_large]
    run(scenario())


def test_an_unknown_group_with_a_member_is_refused_and_a_simple_one_is_created() -> None:
    async def scenario() -> None:
        world = await World().start()
        assert await commit(world, txn("new", generation=3, member="m")) == [
            E.unknown_member_id]
        assert "new" not in world.shard("new").groups
        assert await commit(world, txn("new")) == [0]
        assert "new" in world.shard("new").groups
    run(scenario())


def test_deleting_the_group_leaves_pending_offsets_that_a_commit_brings_back() -> None:
    async def scenario() -> None:
        world = await World().start()
        await commit(world, txn(offsets={("t", 0): 10}))
        shard = world.shard("g")
        assert await world.coordinator.admin.delete(shard, "g") == E.none
        assert world.shard("g").offsets.has_pending("g", "t", 0)
        await end(world, "g", True)
        assert fetched(world)[("t", 0)] == (10, 0) and "g" in world.shard("g").groups
    run(scenario())


def test_an_end_marker_for_a_partition_not_led_here_is_refused() -> None:
    async def scenario() -> None:
        world = await World().start()
        partition = world.coordinator.partition_of("g")
        world.coordinator.unload(partition)
        with pytest.raises(GroupError) as raised:
            await end(world, "g", True)
        assert raised.value.code == E.not_coordinator
    run(scenario())


class FirstAppendWaits(MemoryOffsetsLog):
    """The first append lands in the log, then waits for ``release`` (its high-watermark
    wait); later appends return at once."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.appends = 0

    async def append(self, partition: int, batch: bytes, *,
                     verification_guard: object | None = None) -> int:
        base = await super().append(partition, batch, verification_guard=verification_guard)
        self.appends += 1
        if self.appends == 1:
            await self.release.wait()
        return base


@pytest.mark.parametrize("committed", [True, False])
def test_a_marker_replayed_before_its_offsets_still_decides_them(committed: bool) -> None:
    async def scenario() -> None:
        world = await World(log=FirstAppendWaits()).start()
        pending = asyncio.ensure_future(commit(world, txn(offsets={("t", 0): 10})))
        await settle()
        assert world.log.appends == 1
        await end(world, "g", committed)  # written after the offsets, replayed first
        world.log.release.set()
        assert await pending == [0]
        assert not world.shard("g").offsets.has_pending("g", "t", 0)
        expected = (10, 0) if committed else (-1, 0)
        assert fetched(world, stable=True)[("t", 0)] == expected
        assert fetched(await reloaded(world), stable=True)[("t", 0)] == expected
    run(scenario())
