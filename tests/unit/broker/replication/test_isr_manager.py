"""The leader's ISR decisions (pure) and the ISR manager against a real controller: an
out-of-sync follower is asked out through AlterPartition, a caught-up one in, one change per
partition in flight, and a refused (stale) change leaves the ISR alone."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from moldau.broker.metadata.controller import Controller
from moldau.broker.metadata.image import MetadataImage
from moldau.broker.metadata.isr_change import IsrChange, IsrChangeResult
from moldau.broker.metadata.records import (
    ControllerChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from moldau.broker.replication.isr import IsrManager, to_shrink
from moldau.broker.replication.progress import can_join_isr
from moldau.protocol.errors import ErrorCode
from moldau.testing.metadata_store import ListStore

T = uuid.UUID(int=7)
LAG = 10_000


@dataclass
class Progress:
    log_end_offset: int
    last_caught_up_time_ms: int


def test_to_shrink() -> None:
    now = 100_000
    followers = {2: Progress(50, now - LAG - 1),  # behind for too long
                 3: Progress(50, now - LAG),      # behind, but within the lag
                 4: Progress(80, 0)}               # at the leader's log end: in sync
    assert to_shrink([1, 2, 3, 4], followers, now, LAG, leader_id=1,
                     leader_log_end_offset=80) == [2]
    # a member never seen fetching is out; the leader itself never is
    assert to_shrink([5, 1], {}, now, LAG, leader_id=1, leader_log_end_offset=80) == [5]
    assert to_shrink([1], {}, now, LAG, leader_id=1, leader_log_end_offset=80) == []


def test_can_join_isr_as_the_manager_uses_it() -> None:
    assert can_join_isr(Progress(100, 0), high_watermark=100, leader_epoch_start_offset=90)
    assert not can_join_isr(Progress(99, 0), high_watermark=100, leader_epoch_start_offset=90)
    # the high watermark is reached but not the start of the leader's epoch
    assert not can_join_isr(Progress(100, 0), high_watermark=80, leader_epoch_start_offset=120)
    assert not can_join_isr(Progress(-1, 0), high_watermark=-5, leader_epoch_start_offset=-5)


@dataclass
class Led:
    """A led partition whose ISR and epochs follow the image, as the leader's would."""

    image: MetadataImage
    log_end_offset: int = 100
    high_watermark: int = 100
    epoch_start_offset: int = 0
    followers: dict[int, Progress] = field(default_factory=dict)
    topic_id: uuid.UUID = T
    partition: int = 0

    @property
    def _state(self):  # type: ignore[no-untyped-def]
        return self.image.topics_by_id[T].partitions[0]

    @property
    def leader_epoch(self) -> int:
        return self._state.leader_epoch

    @property
    def partition_epoch(self) -> int:
        return self._state.partition_epoch

    @property
    def isr(self) -> Sequence[int]:
        return tuple(self._state.isr)


def controller() -> Controller:
    image = MetadataImage()
    for record in [ControllerChangeRecord(1, 1), TopicRecord("t", T),
                   PartitionRecord(T, 0, [1, 2, 3], [1, 2, 3], 1),
                   *(RegisterBrokerRecord(b, uuid.uuid4()) for b in (1, 2, 3))]:
        image.replay(record)
    return Controller(image, ListStore(), default_partitions=lambda: 1,
                      default_replication_factor=lambda: 1)


def test_the_manager_shrinks_and_expands_through_the_controller() -> None:
    async def scenario() -> None:
        ctl = controller()
        now = [1_000_000]
        led = Led(ctl.image, followers={2: Progress(100, now[0]), 3: Progress(40, 0)})
        results: list[IsrChangeResult] = []
        manager = IsrManager(node_id=1, lag_ms=lambda: LAG, send=ctl.alter_partition,
                             leaders=lambda: [led], time_ms=lambda: now[0],
                             on_result=results.append)
        [asked] = manager.check_shrink()
        assert asked.new_isr == (1, 2)
        assert list(manager.maximal_isr((T, 0), led.isr)) == [1, 2, 3]  # not yet committed
        assert manager.check_shrink() == []  # one change in flight per partition
        await manager.drain()
        assert (led.isr, led.partition_epoch) == ((1, 2), 1)
        assert results[-1].error == ErrorCode.none and results[-1].isr == (1, 2)
        # replica 3 catches up: it joins
        led.followers[3] = Progress(100, now[0])
        assert manager.check_expand(led, 2) is None  # already a member
        change = manager.check_expand(led, 3)
        assert change is not None and change.new_isr == (1, 2, 3)
        assert manager.maximal_isr((T, 0), led.isr) == [1, 2, 3]
        await manager.drain()
        assert (led.isr, led.partition_epoch) == ((1, 2, 3), 2)
        assert manager.pending == {}

    asyncio.run(scenario())


def test_a_stale_change_is_refused_and_dropped() -> None:
    async def scenario() -> None:
        ctl = controller()
        led = Led(ctl.image, followers={2: Progress(100, 0), 3: Progress(40, 0)})
        stale: list[IsrChangeResult] = []

        async def send(broker_id: int, changes: Sequence[IsrChange]) -> list[IsrChangeResult]:
            # Meanwhile the controller changed the ISR (e.g. a broker died).
            await ctl.alter_partition(1, [IsrChange(T, 0, 0, 0, (1, 3))])
            return await ctl.alter_partition(broker_id, changes)

        manager = IsrManager(node_id=1, lag_ms=lambda: LAG, send=send,
                             leaders=lambda: [led], time_ms=lambda: 10**9,
                             on_result=stale.append)
        manager.check_shrink()
        await manager.drain()
        assert stale[0].error == ErrorCode.invalid_update_version
        assert (led.isr, led.partition_epoch) == ((1, 3), 1)
        assert manager.pending == {}

    asyncio.run(scenario())


def test_what_is_remembered_of_a_partition_goes_when_it_is_no_longer_led() -> None:
    async def scenario() -> None:
        ctl = controller()
        led = Led(ctl.image, followers={2: Progress(100, 0), 3: Progress(40, 0)})
        leading = [led]

        async def refuse(broker_id: int,
                         changes: Sequence[IsrChange]) -> list[IsrChangeResult]:
            return [IsrChangeResult(c.topic_id, c.partition, ErrorCode.invalid_update_version,
                                    "stale") for c in changes]

        manager = IsrManager(node_id=1, lag_ms=lambda: LAG, send=refuse,
                             leaders=lambda: leading, time_ms=lambda: 10**9)
        manager.check_shrink()
        await manager.drain()
        assert (T, 0) in manager.stale
        manager.hold_until[(T, 0)] = 10**10
        manager.check_shrink()  # still led: both kept
        assert (T, 0) in manager.stale and (T, 0) in manager.hold_until
        leading.clear()  # the topic was deleted (or its leadership moved)
        manager.check_shrink()
        assert manager.stale == {} and manager.hold_until == {}

    asyncio.run(scenario())
