"""A Partition's replication state over a real log in a tmp dir: the followers' progress it
keeps as leader, the high watermark over the ISR, and the follower side (append as the leader
wrote, high watermark = min(leader's, own log end)); the warning of a leader by unclean
election."""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path

import pytest

from moldau.broker.metadata.image import RECOVERING, PartitionState
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


def _follower_with(tmp_path: Path, name: str, records: int, leader_hw: int) -> Partition:
    """Broker 2 following broker 1 (epoch 1) with ``records`` records of its log, told a high
    watermark of ``leader_hw`` by the leader."""
    leader = partition(tmp_path, f"{name}-leader", 1)
    leader.apply_state(state(1, [1, 2]))
    batch = make_batch(records)
    leader.append_as_leader(batch, validate_batches(batch))
    follower = partition(tmp_path, name, 2)
    follower.apply_state(state(1, [1, 2]))
    data = leader.read(0, 1 << 20, False, True, up_to_log_end=True).records
    assert data
    follower.append_as_follower(bytes(data), leader_high_watermark=leader_hw)
    # the leader drops it from the ISR (its fetches stopped)
    follower.apply_state(PartitionState(0, [1, 2, 3], [1], 1, 1, 2))
    return follower


def _unclean(epoch: int) -> PartitionState:
    return PartitionState(0, [1, 2, 3], [2], 2, epoch, epoch + 1,
                          leader_recovery_state=RECOVERING)


def test_a_leader_by_unclean_election_logs_what_it_lacks(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Behind the previous leader's high watermark (it had heard of 10 with 4 records): the
    acknowledged records 4..9 are named lost."""
    follower = _follower_with(tmp_path, "behind", 4, 10)
    with caplog.at_level(logging.WARNING, "moldau.broker.partition"):
        follower.apply_state(_unclean(2))
    [warning] = [r.getMessage() for r in caplog.records]
    assert follower.is_leader
    assert "Unclean leader election of behind-0: broker 2 leads it from leader epoch 2" in warning
    assert "Its log ends at offset 4;" in warning
    assert "the last high watermark it had learned from the previous leader is 10" in warning
    assert "from offset 4 on are lost: at least offsets 4..9 of them had been acknowledged" \
        in warning


def test_an_unclean_leader_up_to_the_high_watermark_names_the_offset_it_starts_at(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    follower = _follower_with(tmp_path, "even", 4, 4)
    with caplog.at_level(logging.WARNING, "moldau.broker.partition"):
        follower.apply_state(_unclean(2))
    [warning] = [r.getMessage() for r in caplog.records]
    assert "Its log ends at offset 4;" in warning and "is 4." in warning
    assert "from offset 4 on are lost: none below that high watermark" in warning


def test_no_unclean_warning_for_a_clean_election_or_a_restart_into_recovering(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "moldau.broker.partition"):
        clean = _follower_with(tmp_path, "clean", 2, 2)
        clean.apply_state(PartitionState(0, [1, 2, 3], [2], 2, 2, 3))
        assert clean.is_leader
        # a broker that starts while its leadership is still RECOVERING saw no election
        restarted = partition(tmp_path, "restarted", 2)
        restarted.apply_state(_unclean(2))
        assert restarted.is_leader
    assert caplog.records == []
