"""A Partition's replication state over a real log in a tmp dir: the followers' progress it
keeps as leader, the high watermark over the ISR, and the follower side (append as the leader
wrote, high watermark = min(leader's, own log end))."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from moldau.broker.metadata.image import PartitionState
from moldau.broker.partition import Partition
from moldau.broker.purgatory import Purgatory
from moldau.protocol.records.batch import validate_batches

from ...storage.helpers import make_batch, open_log


def partition(tmp_path: Path, name: str, node_id: int) -> Partition:
    log = open_log(str(tmp_path / f"{name}-0"))
    return Partition(name, 0, uuid.uuid4(), log, node_id=node_id, purgatory=Purgatory(),
                     time_ms=lambda: 1000)


def state(leader: int, isr: list[int], epoch: int = 1,
          replicas: list[int] | None = None) -> PartitionState:
    return PartitionState(0, replicas or [1, 2, 3], isr, leader, epoch, epoch)


def test_the_leader_tracks_its_followers_and_the_high_watermark_waits_for_the_isr(
        tmp_path: Path) -> None:
    p = partition(tmp_path, "t", 1)
    p.apply_state(state(1, [1, 2, 3]))
    assert sorted(p.followers) == [2, 3]
    batch = make_batch(3)
    p.append_as_leader(batch, validate_batches(batch))
    assert (p.log.log_end_offset, p.high_watermark) == (3, 0)
    p.record_follower_fetch(2, 3, 0)
    assert p.high_watermark == 0  # broker 3 not heard from
    p.record_follower_fetch(3, 2, 0)
    assert p.high_watermark == 2
    p.record_follower_fetch(3, 3, 0)
    assert p.high_watermark == 3
    # Broker 3 leaves the ISR: it no longer holds the watermark back; a replica added
    # while leading gets a fresh record, a removed one loses its own.
    p.apply_state(state(1, [1, 2], replicas=[1, 2, 3, 4]))
    assert sorted(p.followers) == [2, 3, 4] and p.followers[4].log_end_offset == -1
    assert p.followers[2].log_end_offset == 3  # kept: same leader, same epoch
    # Losing leadership forgets the followers.
    p.apply_state(state(2, [1, 2], epoch=2))
    assert p.followers == {}


def test_a_follower_appends_as_the_leader_wrote_and_takes_the_leaders_high_watermark(
        tmp_path: Path) -> None:
    leader = partition(tmp_path, "l", 1)
    leader.apply_state(state(1, [1, 2]))
    batch = make_batch(4)
    leader.append_as_leader(batch, validate_batches(batch))
    follower = partition(tmp_path, "f", 2)
    follower.apply_state(state(1, [1, 2]))
    assert not follower.is_leader and follower.followers == {}
    data = leader.read(0, 1 << 20, False, True, up_to_log_end=True).records
    assert data  # past the leader's high watermark (0): a follower reads to the log end
    follower.append_as_follower(bytes(data), leader_high_watermark=10)
    assert follower.log.log_end_offset == 4
    assert follower.high_watermark == 4  # min(leader's, own log end)
    assert follower.log.latest_epoch() == 1  # the epoch the leader wrote, from the batch
    with pytest.raises(Exception, match="below the log end offset"):
        follower.append_as_follower(bytes(data), leader_high_watermark=4)


def test_a_smaller_isr_advances_the_high_watermark_and_wakes_waiting_produces(
        tmp_path: Path) -> None:
    async def main() -> None:
        p = partition(tmp_path, "s", 1)
        p.apply_state(state(1, [1, 2, 3]))
        batch = make_batch(2)
        p.append_as_leader(batch, validate_batches(batch))
        p.record_follower_fetch(2, 2, 0)  # broker 3 never fetches (dead)
        waiter = asyncio.ensure_future(p.purgatory.wait([p.key], 30))
        await asyncio.sleep(0)
        assert not waiter.done()
        # The controller drops broker 3 from the ISR (its registration ended).
        p.apply_state(state(1, [1, 2]))
        assert p.high_watermark == 2
        assert await asyncio.wait_for(waiter, 10)  # woken by the event, not the timeout

    asyncio.run(main())
