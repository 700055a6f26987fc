"""Partition reassignment (KIP-455): the pure rules (:mod:`moldau.broker.metadata.reassignment`)
and the controller's operations over them, with an in-memory store (no ZooKeeper here; the
ZooKeeper layout of the state is checked in tests/unit/broker/zk/test_reassignment_layout.py
and the whole move on real brokers in tests/cluster/test_reassignment.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

from moldau.broker.metadata.controller import Controller
from moldau.broker.metadata.image import MetadataImage, PartitionState
from moldau.broker.metadata.isr_change import IsrChange
from moldau.broker.metadata.reassignment import (
    OngoingReassignment,
    ReassignmentRequest,
    complete_reassignment,
    list_reassignments,
    start_reassignment,
)
from moldau.broker.metadata.records import (
    BrokerEndpoint,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    TopicRecord,
)
from moldau.protocol.errors import ErrorCode, KafkaError

T = uuid.UUID("11111111-2222-3333-4444-555555555555")
ALL = {1, 2, 3, 4, 5}


def state(replicas: list[int], isr: list[int] | None = None, leader: int | None = None,
          adding: list[int] | None = None, removing: list[int] | None = None) -> PartitionState:
    return PartitionState(0, replicas, list(replicas if isr is None else isr),
                          replicas[0] if leader is None else leader, 0, 0, adding or [],
                          removing or [])


def test_start_puts_the_target_first_then_the_replicas_that_go() -> None:
    change = start_reassignment(T, 0, state([1, 2, 3]), [2, 3, 4], ALL)
    assert change == PartitionChangeRecord(T, 0, replicas=[2, 3, 4, 1], adding_replicas=[4],
                                           removing_replicas=[1])


def test_the_current_replicas_as_target_change_nothing() -> None:
    assert start_reassignment(T, 0, state([1, 2, 3]), [1, 2, 3], ALL) is None


def test_a_new_target_starts_over_from_the_original_replicas() -> None:
    # moving {1,2,3} to {2,3,4}, 4 not caught up; now to {2,3,5}: 4 goes at once
    moving = state([2, 3, 4, 1], isr=[1, 2, 3], adding=[4], removing=[1])
    change = start_reassignment(T, 0, moving, [2, 3, 5], ALL)
    assert change == PartitionChangeRecord(T, 0, replicas=[2, 3, 5, 1], adding_replicas=[5],
                                           removing_replicas=[1])
    # 4 had joined the ISR: it leaves it too
    joined = state([2, 3, 4, 1], isr=[1, 2, 3, 4], adding=[4], removing=[1])
    change = start_reassignment(T, 0, joined, [2, 3, 5], ALL)
    assert isinstance(change, PartitionChangeRecord) and change.isr == [1, 2, 3]


def test_a_target_that_drops_every_in_sync_replica_is_refused() -> None:
    # 1 died and 4 (being added) was elected uncleanly: only 4 holds the data now
    moving = state([2, 3, 4, 1], isr=[4], leader=4, adding=[4], removing=[1])
    refused = start_reassignment(T, 0, moving, [2, 3, 5], ALL)
    assert isinstance(refused, tuple) and refused[0] == ErrorCode.invalid_replica_assignment
    assert "include one of them" in str(refused[1])


def test_cancel_goes_back_to_the_original_replicas_or_is_refused() -> None:
    moving = state([2, 3, 4, 1], isr=[1, 2, 3], adding=[4], removing=[1])
    # 4, being added, goes at once (Kafka stops the replicas a new target leaves out)
    assert start_reassignment(T, 0, moving, None, ALL) == PartitionChangeRecord(
        T, 0, replicas=[2, 3, 1], adding_replicas=[], removing_replicas=[])
    refused = start_reassignment(T, 0, state([1, 2, 3]), None, ALL)
    assert isinstance(refused, tuple) and refused[0] == ErrorCode.no_reassignment_in_progress


def test_completion_waits_for_every_target_replica_in_the_isr() -> None:
    moving = state([2, 3, 4, 1], isr=[1, 2, 3], leader=1, adding=[4], removing=[1])
    assert complete_reassignment(T, 0, moving, ALL) is None
    caught_up = state([2, 3, 4, 1], isr=[1, 2, 3, 4], leader=1, adding=[4], removing=[1])
    # the old leader 1 goes: the first target replica in the ISR leads
    assert complete_reassignment(T, 0, caught_up, ALL) == PartitionChangeRecord(
        T, 0, leader=2, isr=[2, 3, 4], replicas=[2, 3, 4], adding_replicas=[],
        removing_replicas=[])
    # a leader that stays keeps leading; an ineligible (dead, shutting down) one is skipped
    stays = state([2, 3, 4, 1], isr=[1, 2, 3, 4], leader=3, adding=[4], removing=[1])
    record = complete_reassignment(T, 0, stays, ALL)
    assert record is not None and record.leader is None
    record = complete_reassignment(T, 0, caught_up, {3, 4})
    assert record is not None and record.leader == 3
    assert complete_reassignment(T, 0, caught_up, {1}) is None  # no target replica can lead
    assert complete_reassignment(T, 0, state([1, 2]), ALL) is None


def _image() -> MetadataImage:
    image = MetadataImage()
    image.replay(TopicRecord("t", T))
    image.replay(PartitionRecord(T, 0, [1, 2, 3], [1, 2, 3], 1))
    image.replay(PartitionRecord(T, 1, [2, 3, 1], [2, 3, 1], 2, adding_replicas=[],
                                 removing_replicas=[]))
    image.replay(PartitionChangeRecord(T, 1, replicas=[3, 4, 2, 1], adding_replicas=[4],
                                       removing_replicas=[2, 1]))
    return image


def test_listing_shows_partitions_in_progress_only() -> None:
    image = _image()
    moving = OngoingReassignment("t", 1, (3, 4, 2, 1), (4,), (2, 1))
    assert list_reassignments(image, None) == [moving]
    assert list_reassignments(image, [("t", [0, 1, 9]), ("nope", [0])]) == [moving]
    assert image.topics_by_name["t"].partitions[1].target_replicas == [3, 4]


class Store:
    def __init__(self) -> None:
        self.batches: list[list[MetadataRecord]] = []
        self.failures = 0  # appends to refuse, as a store that lost ZooKeeper does

    async def append(self, records: Sequence[MetadataRecord]) -> int:
        if self.failures:
            self.failures -= 1
            raise KafkaError(ErrorCode.unknown_server_error, "ZooKeeper is unreachable")
        self.batches.append(list(records))
        return sum(len(b) for b in self.batches) - 1


async def _controller(brokers: int = 4) -> tuple[Controller, Store]:
    store = Store()
    controller = Controller(MetadataImage(), store, default_partitions=lambda: 1,
                            default_replication_factor=lambda: 3)
    for b in range(1, brokers + 1):
        await controller.register_broker(b, [BrokerEndpoint("PLAINTEXT", "h", 9000 + b)], None)
    await controller.commit([TopicRecord("t", T),
                             PartitionRecord(T, 0, [1, 2, 3], [1, 2, 3], 1)])
    return controller, store


def test_the_controller_moves_a_partition_when_the_new_replica_joins_the_isr() -> None:
    async def run() -> None:
        controller, store = await _controller()
        outcomes = await controller.alter_partition_reassignments([
            ReassignmentRequest("t", 0, (2, 3, 4)),
            ReassignmentRequest("t", 7, (1,)),
            ReassignmentRequest("nope", 0, (1,)),
            ReassignmentRequest("t", 0, (2, 3, 4)),
        ])
        assert [code for code, _ in outcomes] == [
            ErrorCode.none, ErrorCode.unknown_topic_or_partition,
            ErrorCode.unknown_topic_or_partition, ErrorCode.invalid_request]
        [ongoing] = await controller.list_partition_reassignments()
        assert ongoing == OngoingReassignment("t", 0, (2, 3, 4, 1), (4,), (1,))
        # the leader adds 4 to the ISR: the same controller operation completes the move
        p = controller.image.topics_by_id[T].partitions[0]
        [answer] = await controller.alter_partition(1, [IsrChange(
            T, 0, p.leader_epoch, p.partition_epoch, (1, 2, 3, 4))])
        assert answer.error == ErrorCode.none and answer.isr == (1, 2, 3, 4)
        p = controller.image.topics_by_id[T].partitions[0]
        assert (p.replicas, p.isr, p.leader, p.reassigning) == ([2, 3, 4], [2, 3, 4], 2, False)
        assert p.leader_epoch == 1
        assert await controller.list_partition_reassignments() == []
        assert store.batches[-1] == [PartitionChangeRecord(
            T, 0, leader=2, isr=[2, 3, 4], replicas=[2, 3, 4], adding_replicas=[],
            removing_replicas=[])]

    asyncio.run(run())


def test_the_controller_refuses_bad_targets_and_completes_shrinks_at_once() -> None:
    async def run() -> None:
        controller, _store = await _controller()
        for bad in ((), (2, 2)):
            [(code, _)] = await controller.alter_partition_reassignments([
                ReassignmentRequest("t", 0, bad)])
            assert code == ErrorCode.invalid_replica_assignment
        [(code, message)] = await controller.alter_partition_reassignments([
            ReassignmentRequest("t", 0, (2, 9))])
        assert code == ErrorCode.invalid_replica_assignment
        assert message is not None and "[9]" in message and "not alive" in message
        [(code, _)] = await controller.alter_partition_reassignments([
            ReassignmentRequest("t", 0, None)])
        assert code == ErrorCode.no_reassignment_in_progress
        # {1,2,3} -> {2,3}: the target is in the ISR already, so it completes at once
        assert await controller.alter_partition_reassignments([
            ReassignmentRequest("t", 0, (2, 3))]) == [(ErrorCode.none, None)]
        p = controller.image.topics_by_id[T].partitions[0]
        assert (p.replicas, p.isr, p.leader, p.reassigning) == ([2, 3], [2, 3], 2, False)

    asyncio.run(run())


def test_cancel_puts_back_the_in_sync_original_replicas_at_once() -> None:
    async def run() -> None:
        controller, _store = await _controller()
        await controller.alter_partition_reassignments([ReassignmentRequest("t", 0, (2, 3, 4))])
        assert await controller.alter_partition_reassignments([
            ReassignmentRequest("t", 0, None)]) == [(ErrorCode.none, None)]
        p = controller.image.topics_by_id[T].partitions[0]
        assert (sorted(p.replicas), p.leader, p.reassigning) == ([1, 2, 3], 1, False)

    asyncio.run(run())


def test_records_carry_the_move_and_old_records_still_decode() -> None:
    from moldau.broker.metadata.records import decode_record

    plain = PartitionRecord(T, 0, [1, 2], [1, 2], 1)
    # no reassignment: the encoding is what it was before reassignments existed
    assert b"adding" not in plain.encode()
    old = (b'{"type":"PartitionRecord","v":0,"topic_id":"' + str(T).encode()
           + b'","partition_id":0,"replicas":[1,2],"isr":[1,2],"leader":1,'
           b'"leader_epoch":0,"partition_epoch":0}')
    assert decode_record(old) == plain
    for record in (PartitionRecord(T, 0, [1, 2], [1], 1, 0, 0, [2], []),
                   PartitionChangeRecord(T, 0, isr=[1]),
                   PartitionChangeRecord(T, 0, adding_replicas=[], removing_replicas=[])):
        assert decode_record(record.encode()) == record


def test_a_completion_the_store_refused_is_tried_again(monkeypatch) -> None:
    monkeypatch.setattr("moldau.broker.metadata.reassignment_control.COMPLETION_RETRY_S", 0.05)

    async def run() -> None:
        controller, store = await _controller()
        await controller.alter_partition_reassignments([ReassignmentRequest("t", 0, (2, 3, 4))])
        p = controller.image.topics_by_id[T].partitions[0]
        # the ISR change is written; the completion that follows is refused once
        real_append = store.append

        async def append(records: Sequence[MetadataRecord]) -> int:
            if any(getattr(r, "adding_replicas", None) == [] for r in records):
                store.failures, append.failed = 1, True  # type: ignore[attr-defined]
                store.append = real_append  # type: ignore[method-assign]
            return await real_append(records)

        store.append = append  # type: ignore[method-assign]
        await controller.alter_partition(1, [IsrChange(
            T, 0, p.leader_epoch, p.partition_epoch, (1, 2, 3, 4))])
        assert controller.image.topics_by_id[T].partitions[0].reassigning
        for _ in range(100):
            if not controller.image.topics_by_id[T].partitions[0].reassigning:
                break
            await asyncio.sleep(0.02)
        p = controller.image.topics_by_id[T].partitions[0]
        assert (p.replicas, p.leader, p.reassigning) == ([2, 3, 4], 2, False)

    asyncio.run(run())
