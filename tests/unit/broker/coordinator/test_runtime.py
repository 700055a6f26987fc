"""The coordinator runtime with a toy shard: write then replay, transactional writes and end
markers (written and loaded back), unload during a write, leadership moves, the append error
table, and the real partition layer's checks for coordinator appends."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from moldau.broker.coordinator.errors import CoordinatorError
from moldau.broker.coordinator.log import (
    CoordinatorLogError,
    MemoryCoordinatorLog,
    records_batch,
)
from moldau.broker.coordinator.partition_log import PartitionCoordinatorLog
from moldau.broker.coordinator.runtime import CoordinatorRuntime
from moldau.broker.coordinator.shard import LoggedRecord
from moldau.broker.coordinator.timer import ManualTimer
from moldau.broker.metadata.channel import TopicSpec
from moldau.broker.metadata.image import MetadataImage
from moldau.broker.metadata.records import PartitionChangeRecord, PartitionRecord, TopicRecord
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.records.codec import decode_batch

TOPIC = "__toy_state"


class ToyShard:
    """Key -> value, with per-producer pending writes that a marker commits or drops."""

    def __init__(self, partition: int, epoch: int) -> None:
        self.partition = partition
        self.epoch = epoch
        self.data: dict[bytes, bytes | None] = {}
        self.pending: dict[int, list[LoggedRecord]] = {}
        self.ended: list[tuple[int, bool, int]] = []
        self.finished = False

    def replay(self, record: LoggedRecord) -> None:
        if record.key == b"bad":
            raise ValueError("unreadable toy record")
        if record.transactional:
            self.pending.setdefault(record.producer_id, []).append(record)
        else:
            self.data[record.key] = record.value

    def replay_end_txn(self, producer_id: int, commit: bool, offset: int) -> None:
        self.ended.append((producer_id, commit, offset))
        for record in self.pending.pop(producer_id, []):
            if commit:
                self.data[record.key] = record.value

    def finish_load(self, now_ms: int) -> None:
        self.finished = True


class Listener:
    def __init__(self) -> None:
        self.loaded: list[int] = []
        self.unloaded: list[int] = []

    def on_loaded(self, shard: ToyShard) -> None:
        assert shard.finished
        self.loaded.append(shard.partition)

    def on_unloaded(self, shard: ToyShard) -> None:
        self.unloaded.append(shard.partition)


class World:
    def __init__(self, partitions: int = 3, log: Any = None) -> None:
        self.image = MetadataImage()
        self.offset = 0
        self.topic_id = uuid.uuid4()
        self._replay(TopicRecord(TOPIC, self.topic_id))
        for p in range(partitions):
            self._replay(PartitionRecord(self.topic_id, p, [1, 2], [1, 2], 1))
        self.log = log if log is not None else MemoryCoordinatorLog()
        self.listener = Listener()
        self.runtime: CoordinatorRuntime[ToyShard] = CoordinatorRuntime(
            TOPIC, self.log, ManualTimer(), node_id=1, image=lambda: self.image,
            new_shard=ToyShard, listener=self.listener, default_partitions=partitions)

    def _replay(self, record: Any) -> None:
        self.offset += 1
        self.image.replay(record, self.offset)

    def move_leader(self, partition: int, leader: int) -> None:
        self._replay(PartitionChangeRecord(self.topic_id, partition, leader=leader))

    def restarted(self) -> World:
        world = World(len(self.image.topics_by_name[TOPIC].partitions), self.log)
        world.image = self.image
        return world


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def test_write_then_replay_and_a_reload_shows_the_same_state() -> None:
    async def scenario() -> None:
        world = World()
        await world.runtime.load(0)
        shard = world.runtime.shard(0)
        base = await world.runtime.write(shard, [(b"a", b"1"), (b"b", b"2")])
        assert base == 0
        # The caller replays after the write succeeded.
        for i, (k, v) in enumerate([(b"a", b"1"), (b"b", b"2")]):
            shard.replay(LoggedRecord(base + i, k, v))
        assert await world.runtime.write(shard, [(b"a", None)]) == 2
        shard.replay(LoggedRecord(2, b"a", None))
        again = world.restarted()
        await again.runtime.load(0)
        assert again.runtime.shard(0).data == shard.data == {b"a": None, b"b": b"2"}
        assert again.listener.loaded == [0]
    run(scenario())


def test_transactional_write_and_end_markers_are_written_and_loaded_back() -> None:
    async def scenario() -> None:
        world = World()
        await world.runtime.load(1)
        runtime = world.runtime
        shard = runtime.shard(1)
        base = await runtime.write(shard, [(b"k1", b"v1")], txn=(7, 3))
        header = decode_batch(world.log.partitions[1][0]).header
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, -1)
        assert header.is_transactional and not header.is_control
        shard.replay(LoggedRecord(base, b"k1", b"v1", 7, 3, True))
        await runtime.write(shard, [(b"k2", b"v2")], txn=(8, 0))
        shard.replay(LoggedRecord(1, b"k2", b"v2", 8, 0, True))
        assert shard.data == {}
        # Commit 7, abort 8: the marker is appended, then replayed into the shard.
        assert await runtime.write_end_marker(shard, 7, 3, 5, True) == 2
        assert await runtime.write_end_marker(shard, 8, 0, 5, False) == 3
        marker = decode_batch(world.log.partitions[1][2])
        assert marker.header.is_control and marker.header.is_transactional
        assert marker.header.producer_id == 7 and marker.header.base_sequence == -1
        assert marker.records[0].key == b"\x00\x00\x00\x01"  # version 0, COMMIT
        assert marker.records[0].value == b"\x00\x00\x00\x00\x00\x05"  # version 0, epoch 5
        assert shard.data == {b"k1": b"v1"} and shard.ended == [(7, True, 2), (8, False, 3)]
        # Loading replays control batches through replay_end_txn (not as records).
        again = world.restarted()
        await again.runtime.load(1)
        loaded = again.runtime.shard(1)
        assert loaded.data == {b"k1": b"v1"} and loaded.pending == {}
        assert loaded.ended == [(7, True, 2), (8, False, 3)]
    run(scenario())


def test_an_open_transaction_stays_pending_after_a_reload() -> None:
    async def scenario() -> None:
        world = World()
        await world.runtime.load(0)
        await world.runtime.write(world.runtime.shard(0), [(b"k", b"v")], txn=(9, 1))
        again = world.restarted()
        await again.runtime.load(0)
        shard = again.runtime.shard(0)
        assert shard.data == {} and [r.key for r in shard.pending[9]] == [b"k"]
        assert shard.pending[9][0] == LoggedRecord(0, b"k", b"v", 9, 1, True)
    run(scenario())


def test_an_unreadable_record_is_skipped_while_loading(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        world = World()
        await world.runtime.load(0)
        await world.runtime.write(world.runtime.shard(0), [(b"bad", b"x"), (b"ok", b"1")])
        again = world.restarted()
        await again.runtime.load(0)
        assert again.runtime.shard(0).data == {b"ok": b"1"}
    run(scenario())
    assert "skipping unreadable record at offset 0 of __toy_state-0" in caplog.text


class GatedLog(MemoryCoordinatorLog):
    """Appends wait for ``gate``."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.waiting = 0

    async def append(self, partition: int, batch: bytes, *,
                     verification_guard: object | None = None) -> int:
        self.waiting += 1
        await self.gate.wait()
        return await super().append(partition, batch, verification_guard=verification_guard)


def test_unload_during_a_write_answers_not_coordinator() -> None:
    async def scenario() -> None:
        world = World(log=GatedLog())
        await world.runtime.load(0)
        shard = world.runtime.shard(0)
        write = asyncio.ensure_future(world.runtime.write(shard, [(b"a", b"1")]))
        marker = asyncio.ensure_future(world.runtime.write_end_marker(shard, 1, 0, 0, True))
        await settle()
        assert world.log.waiting == 2
        world.runtime.unload(0)
        world.log.gate.set()
        for pending in (write, marker):
            with pytest.raises(CoordinatorError) as raised:
                await pending
            assert raised.value.code == E.not_coordinator
        assert shard.ended == [], "a marker of an unloaded shard is not replayed"
        assert world.listener.unloaded == [0]
        with pytest.raises(CoordinatorError) as raised:
            world.runtime.shard(0)
        assert raised.value.code == E.not_coordinator
    run(scenario())


def test_leadership_moves_load_and_unload_shards_at_the_leader_epoch() -> None:
    async def scenario() -> None:
        world = World(partitions=3)
        runtime = world.runtime
        for i in range(200):  # enough batches that the load yields to the loop
            await world.log.append(0, records_batch([(b"k", str(i).encode())], 0))
        world.move_leader(2, 2)
        runtime.sync_leadership()
        await asyncio.sleep(0)
        assert runtime.loading == {0}
        with pytest.raises(CoordinatorError) as raised:
            runtime.shard(0)
        assert raised.value.code == E.coordinator_load_in_progress
        await settle()
        assert runtime.shard(0).data == {b"k": b"199"}
        assert sorted(runtime.shards) == [0, 1] and sorted(world.listener.loaded) == [0, 1]
        assert runtime.shard(0).epoch == 0
        # Partition 0 moves away and 2 comes back (with a bumped leader epoch).
        world.move_leader(0, 2)
        world.move_leader(2, 1)
        runtime.sync_leadership()
        await settle()
        assert sorted(runtime.shards) == [1, 2] and world.listener.unloaded == [0]
        assert runtime.shard(2).epoch == 2
        # A fenced broker coordinates nothing.
        runtime.fenced = lambda: True
        runtime.sync_leadership()
        assert runtime.shards == {} and sorted(world.listener.unloaded) == [0, 1, 2]
        await runtime.close()
    run(scenario())


def test_append_errors_map_to_what_clients_see() -> None:
    async def scenario() -> None:
        world = World()
        await world.runtime.load(0)
        shard = world.runtime.shard(0)
        cases = [(E.not_enough_replicas, False, E.coordinator_not_available),
                 (E.not_leader_or_follower, False, E.not_coordinator),
                 (E.message_too_large, False, E.unknown_server_error),
                 (E.message_too_large, True, E.invalid_commit_offset_size),
                 (E.invalid_producer_epoch, False, E.invalid_producer_epoch),
                 (E.transaction_coordinator_fenced, False, E.transaction_coordinator_fenced)]
        for failure, commit, answer in cases:
            world.log.fail_with = failure
            with pytest.raises(CoordinatorError) as raised:
                await world.runtime.write(shard, [(b"a", b"1")], commit=commit)
            assert raised.value.code == answer, failure
            assert isinstance(raised.value.__cause__, CoordinatorLogError)
    run(scenario())


def test_the_partition_layer_keeps_epoch_checks_and_skips_sequence_checks(
        tmp_path: Path) -> None:
    from ..handlers.fakes import fake_node

    async def scenario() -> None:
        node = await fake_node(tmp_path, groups=False)
        try:
            result = (await node.controller.create_topics(
                [TopicSpec("__consumer_offsets", 1, 1, configs={"cleanup.policy": "compact"})]))[0]
            assert result.error == E.none
            log = PartitionCoordinatorLog(node.replica_manager, "__consumer_offsets")
            runtime: CoordinatorRuntime[ToyShard] = CoordinatorRuntime(
                "__consumer_offsets", log, node.timer, node_id=1, image=lambda: node.image,
                new_shard=ToyShard, listener=Listener(), default_partitions=1)
            await runtime.load(0)
            shard = runtime.shard(0)
            # Two transactional batches of one producer, both with base sequence -1.
            assert await runtime.write(shard, [(b"a", b"1")], txn=(5, 1)) == 0
            assert await runtime.write(shard, [(b"b", b"2")], txn=(5, 1)) == 1
            with pytest.raises(CoordinatorError) as raised:
                await runtime.write(shard, [(b"c", b"3")], txn=(5, 0))
            assert raised.value.code == E.invalid_producer_epoch
            assert await runtime.write_end_marker(shard, 5, 1, 4, True) == 2
            with pytest.raises(CoordinatorError) as raised:
                await runtime.write_end_marker(shard, 5, 1, 3, False)
            assert raised.value.code == E.transaction_coordinator_fenced
            with pytest.raises(CoordinatorError) as raised:
                await runtime.write_end_marker(shard, 5, 0, 4, False)
            assert raised.value.code == E.invalid_producer_epoch
            # The partition's producer state saw the transaction end: nothing is unstable.
            partition = node.replica_manager.partitions[("__consumer_offsets", 0)]
            assert partition.log.producer_state.ongoing_txns == {}
            # Loading reads it all back through the partition layer.
            runtime.unload(0)
            await runtime.load(0)
            loaded = runtime.shard(0)
            assert loaded.data == {b"a": b"1", b"b": b"2"} and loaded.ended == [(5, True, 2)]
            # KIP-890: a verification guard taken before a marker ended the transaction
            # cannot open a new one; a fresh guard can.
            stale = runtime.begin_verification(loaded, 6)
            assert stale is not None
            await runtime.write_end_marker(loaded, 6, 0, 4, False)
            with pytest.raises(CoordinatorError) as raised:
                await runtime.write(loaded, [(b"d", b"4")], txn=(6, 0), verification_guard=stale)
            assert raised.value.code == E.invalid_txn_state
            fresh = runtime.begin_verification(loaded, 6)
            assert await runtime.write(loaded, [(b"d", b"4")], txn=(6, 0),
                                       verification_guard=fresh) == 4
            await runtime.close()
        finally:
            await node.close()
    run(scenario())
