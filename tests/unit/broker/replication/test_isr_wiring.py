"""The ISR manager wired to real partitions (real logs in a tmp dir) with a fake controller
channel: a follower's fetch that catches it up asks for it to join, the high watermark
respects the maximal ISR while that is pending, the answer is applied at once (and an older
image replayed later does not undo it), a refused stale change waits for new metadata, and a
change the controller could not take is retried with a back-off."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from pathlib import Path

from moldau.broker.metadata.image import PartitionState
from moldau.broker.metadata.isr_change import IsrChange, IsrChangeResult
from moldau.broker.partition import Partition
from moldau.broker.purgatory import Purgatory
from moldau.broker.replication.isr import IsrManager
from moldau.protocol.errors import ErrorCode
from moldau.protocol.records.batch import validate_batches

from ...storage.helpers import make_batch, open_log

LAG = 10_000


class FakeController:
    """Answers AlterPartition as told: a queue of error codes (none: accepted, the partition
    epoch bumped), and records what it was asked; ``gate`` holds the answer back."""

    def __init__(self, errors: Sequence[ErrorCode] = ()) -> None:
        self.errors = list(errors)
        self.asked: list[IsrChange] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def alter_partition(self, broker_id: int, changes: Sequence[IsrChange]
                              ) -> list[IsrChangeResult]:
        [change] = changes
        self.asked.append(change)
        await self.gate.wait()
        error = self.errors.pop(0) if self.errors else ErrorCode.none
        if error != ErrorCode.none:
            return [IsrChangeResult(change.topic_id, change.partition, error, "told to")]
        return [IsrChangeResult(change.topic_id, change.partition, ErrorCode.none, None,
                                broker_id, change.leader_epoch, change.new_isr,
                                change.partition_epoch + 1)]


def setup(tmp_path: Path, ctl: FakeController, now: list[int]
          ) -> tuple[Partition, IsrManager]:
    p = Partition("t", 0, uuid.uuid4(), open_log(str(tmp_path / "t-0")), node_id=1,
                  purgatory=Purgatory(), time_ms=lambda: now[0])

    def on_result(result: IsrChangeResult) -> None:
        if result.error == ErrorCode.none:
            p.apply_isr_result(result)

    manager = IsrManager(node_id=1, lag_ms=lambda: LAG, send=ctl.alter_partition,
                         leaders=lambda: [p] if p.is_leader else [],
                         time_ms=lambda: now[0], on_result=on_result, retry_backoff_ms=10)
    p.isr_hooks = manager
    return p, manager


def append(p: Partition, count: int) -> None:
    batch = make_batch(count)
    p.append_as_leader(batch, validate_batches(batch))


def test_shrink_then_expand_after_the_followers_fetch(tmp_path: Path) -> None:
    async def scenario() -> None:
        ctl = FakeController()
        now = [1_000_000]
        p, manager = setup(tmp_path, ctl, now)
        p.apply_state(PartitionState(0, [1, 2, 3], [1, 2, 3], 1, 5, 7))
        append(p, 3)
        p.record_follower_fetch(2, 3, 0)
        p.record_follower_fetch(3, 3, 0)
        assert p.high_watermark == 3
        append(p, 2)  # offsets 3, 4
        p.record_follower_fetch(2, 5, 0)
        now[0] += LAG + 1  # broker 3 has not fetched since
        [shrink] = manager.check_shrink()
        assert (shrink.new_isr, shrink.leader_epoch, shrink.partition_epoch) == ((1, 2), 5, 7)
        assert p.high_watermark == 3  # still held back by 3 until the controller agreed
        await manager.drain()
        # The answer is applied at once: ISR, partition epoch, and the high watermark.
        assert (p.isr, p.partition_epoch, p.high_watermark) == ([1, 2], 8, 5)
        # The watch then delivers the image from before the change: it does not undo it.
        p.apply_state(PartitionState(0, [1, 2, 3], [1, 2, 3], 1, 5, 7))
        assert (p.isr, p.partition_epoch) == ([1, 2], 8)

        # Broker 3 comes back: a fetch below the high watermark does not make it join...
        ctl.gate.clear()
        p.record_follower_fetch(3, 4, 0)
        assert manager.pending == {}
        # ...one reaching it does, and until the controller answers the high watermark
        # counts broker 3 (the maximal ISR): an append is not committed without it.
        p.record_follower_fetch(3, 5, 0)
        await asyncio.sleep(0)  # the request goes out
        assert ctl.asked[-1].new_isr == (1, 2, 3) and ctl.asked[-1].partition_epoch == 8
        assert p.maximal_isr() == [1, 2, 3]
        append(p, 1)
        p.record_follower_fetch(2, 6, 0)
        assert p.high_watermark == 5
        p.record_follower_fetch(3, 5, 0)  # a second fetch: still one change in flight
        assert len(ctl.asked) == 2
        ctl.gate.set()
        await manager.drain()
        assert (p.isr, p.partition_epoch) == ([1, 2, 3], 9)
        p.record_follower_fetch(3, 6, 0)
        assert p.high_watermark == 6

    asyncio.run(scenario())


def test_a_stale_refusal_waits_for_new_metadata(tmp_path: Path) -> None:
    async def scenario() -> None:
        ctl = FakeController([ErrorCode.invalid_update_version])
        now = [1_000_000]
        p, manager = setup(tmp_path, ctl, now)
        p.apply_state(PartitionState(0, [1, 2, 3], [1, 2, 3], 1, 5, 7))
        now[0] += LAG + 1
        manager.check_shrink()
        await manager.drain()
        assert (p.isr, len(ctl.asked)) == ([1, 2, 3], 1)
        # Nothing more is asked while the partition is at the epochs that were refused...
        assert manager.check_shrink() == []
        # ...and the metadata bringing the controller's state lets it decide again.
        p.apply_state(PartitionState(0, [1, 2, 3], [1, 3], 1, 5, 8))
        [change] = manager.check_shrink()
        assert (change.new_isr, change.partition_epoch) == ((1,), 8)
        await manager.drain()
        assert (p.isr, p.partition_epoch) == ([1], 9)

    asyncio.run(scenario())


def test_a_change_the_controller_could_not_take_is_retried(tmp_path: Path) -> None:
    async def scenario() -> None:
        ctl = FakeController([ErrorCode.not_controller, ErrorCode.request_timed_out])
        now = [1_000_000]
        p, manager = setup(tmp_path, ctl, now)
        p.apply_state(PartitionState(0, [1, 2, 3], [1, 2, 3], 1, 5, 7))
        now[0] += LAG + 1
        manager.check_shrink()
        await asyncio.wait_for(manager.drain(), 10)
        assert [c.new_isr for c in ctl.asked] == [(1,)] * 3
        assert (p.isr, p.partition_epoch) == ([1], 8)

    asyncio.run(scenario())


def test_a_retry_stops_once_the_partition_moved_on(tmp_path: Path) -> None:
    async def scenario() -> None:
        ctl = FakeController([ErrorCode.not_controller] * 100)
        now = [1_000_000]
        p, manager = setup(tmp_path, ctl, now)
        p.apply_state(PartitionState(0, [1, 2, 3], [1, 2, 3], 1, 5, 7))
        now[0] += LAG + 1
        manager.check_shrink()
        await asyncio.sleep(0.05)
        # Another broker became leader meanwhile: the change is dropped, not retried forever.
        p.apply_state(PartitionState(0, [1, 2, 3], [2, 3], 2, 6, 8))
        await asyncio.wait_for(manager.drain(), 10)
        assert manager.pending == {} and p.isr == [2, 3]

    asyncio.run(scenario())


def test_an_ineligible_replica_is_not_asked_for_at_every_fetch(tmp_path: Path) -> None:
    async def scenario() -> None:
        ctl = FakeController([ErrorCode.ineligible_replica])
        now = [1_000_000]
        p, manager = setup(tmp_path, ctl, now)
        p.apply_state(PartitionState(0, [1, 2, 3], [1, 2], 1, 5, 7))
        p.record_follower_fetch(3, 0, 0)  # caught up (empty log): asks, refused
        await manager.drain()
        assert len(ctl.asked) == 1 and p.isr == [1, 2]
        p.record_follower_fetch(3, 0, 0)
        await manager.drain()
        assert len(ctl.asked) == 1  # held back
        now[0] += 5000
        p.record_follower_fetch(3, 0, 0)
        await manager.drain()
        assert len(ctl.asked) == 2 and p.isr == [1, 2, 3]

    asyncio.run(scenario())
