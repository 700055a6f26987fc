"""The transaction coordinator on the real coordinator runtime with an in-memory log: the
request flow (write, then keep), markers handed to the channel and completion, fencing by a
second producer, timed-out transactions, expiry, a reload that finishes prepared
transactions at the new coordinator epoch, and the admin answers."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from typing import Any

import pytest

from moldau.broker.coordinator.log import MemoryCoordinatorLog
from moldau.broker.coordinator.timer import ManualTimer
from moldau.broker.metadata.image import MetadataImage
from moldau.broker.metadata.records import PartitionChangeRecord, PartitionRecord, TopicRecord
from moldau.broker.txn.admin import describe, list_transactions
from moldau.broker.txn.channel import PendingMarkers
from moldau.broker.txn.config import TxnConfig
from moldau.broker.txn.coordinator import TransactionCoordinator
from moldau.broker.txn.errors import TxnError
from moldau.broker.txn.maintenance import abort_timed_out, expire_ids
from moldau.broker.txn.records import TXN_STATE_TOPIC
from moldau.broker.txn.state import TxnState
from moldau.protocol.errors import ErrorCode as E

PARTS = 3
TP = ("out", 0)


class Sink:
    """Records what the coordinator enqueues; completes on demand like the channel."""

    def __init__(self) -> None:
        self.complete: Any = None
        self.queued: list[PendingMarkers] = []
        self.removed: list[int] = []

    def enqueue(self, pending: PendingMarkers) -> None:
        self.queued.append(pending)

    def remove_partition(self, coord_partition: int) -> None:
        self.removed.append(coord_partition)

    async def finish_all(self) -> list[E]:
        done, self.queued = self.queued, []
        return [await self.complete(p.txn_id, p.pid, p.epoch, p.commit, p.coord_epoch)
                for p in done]


class World:
    def __init__(self, log: MemoryCoordinatorLog | None = None,
                 image: MetadataImage | None = None) -> None:
        self.offset = 1000
        if image is None:
            image = MetadataImage()
            self.topic_id = uuid.uuid4()
            self._replay(image, TopicRecord(TXN_STATE_TOPIC, self.topic_id))
            for p in range(PARTS):
                self._replay(image, PartitionRecord(self.topic_id, p, [1], [1], 1))
        self.image = image
        self.log = log or MemoryCoordinatorLog()
        self.timer = ManualTimer()
        self.sink = Sink()
        pids = itertools.count(5000)

        async def new_pid() -> int:
            return next(pids)

        self.coord = TransactionCoordinator(
            TxnConfig(num_partitions=PARTS, max_timeout_ms=900_000, id_expiration_ms=10_000),
            self.log, self.timer, node_id=1, image=lambda: self.image, new_producer_id=new_pid,
            markers=self.sink)

    def _replay(self, image: MetadataImage, record: Any) -> None:
        self.offset += 1
        image.replay(record, self.offset)

    async def load(self) -> None:
        for p in range(PARTS):
            await self.coord.runtime.load(p)

    def meta(self, txn_id: str):
        return self.coord.shard_of(txn_id).txns[txn_id]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def code(aw: Any) -> E:
    with pytest.raises(TxnError) as info:
        await aw
    return info.value.code


def test_commit_flow_and_reload() -> None:
    async def scenario() -> None:
        w = World()
        await w.load()
        pid, epoch = await w.coord.init_producer_id("app", 60_000, None)
        assert (pid, epoch) == (5000, 0)
        await w.coord.add_partitions("app", pid, epoch, [TP])
        await w.coord.add_offsets("app", pid, epoch, 7)
        assert w.meta("app").state is TxnState.ONGOING
        assert await w.coord.verify("app", pid, epoch, [TP, ("x", 1)]) == {
            TP: E.none, ("x", 1): E.invalid_txn_state}
        await w.coord.end_txn("app", pid, epoch, True)
        assert w.meta("app").state is TxnState.PREPARE_COMMIT
        [pending] = w.sink.queued
        assert pending.commit and pending.tps == frozenset({TP, ("__consumer_offsets", 7)})
        assert pending.coord_epoch == 0
        # a retried EndTxn while the markers are out: CONCURRENT_TRANSACTIONS
        assert await code(w.coord.end_txn("app", pid, epoch, True)) == E.concurrent_transactions
        assert await w.sink.finish_all() == [E.none]
        assert w.meta("app").state is TxnState.COMPLETE_COMMIT
        await w.coord.end_txn("app", pid, epoch, True)          # retry after completion: NONE
        # everything was written before it was kept: a reload sees the same
        again = World(w.log, w.image)
        await again.load()
        assert again.meta("app").state is TxnState.COMPLETE_COMMIT
        assert (again.meta("app").producer_id, again.meta("app").producer_epoch) == (5000, 0)
        assert again.sink.queued == []
    run(scenario())


def test_second_producer_fences_the_first() -> None:
    async def scenario() -> None:
        w = World()
        await w.load()
        pid, e0 = await w.coord.init_producer_id("app", 60_000, None)
        await w.coord.add_partitions("app", pid, e0, [TP])
        # the second instance: the open transaction is aborted at a bumped epoch first
        assert await code(w.coord.init_producer_id("app", 60_000, None)) \
            == E.concurrent_transactions
        [abort] = w.sink.queued
        assert not abort.commit and abort.epoch == e0 + 1
        assert await code(w.coord.init_producer_id("app", 60_000, None)) \
            == E.concurrent_transactions                       # markers still out
        await w.sink.finish_all()
        pid2, e2 = await w.coord.init_producer_id("app", 60_000, None)
        assert (pid2, e2) == (pid, e0 + 2)
        # the zombie is fenced everywhere
        assert await code(w.coord.add_partitions("app", pid, e0, [TP])) == E.producer_fenced
        assert await code(w.coord.end_txn("app", pid, e0, True)) == E.producer_fenced
        assert await w.coord.verify("app", pid, e0, [TP]) == {TP: E.producer_fenced}
    run(scenario())


def test_timed_out_transaction_is_aborted_and_producer_fenced() -> None:
    async def scenario() -> None:
        w = World()
        await w.load()
        pid, epoch = await w.coord.init_producer_id("slow", 3000, None)
        await w.coord.add_partitions("slow", pid, epoch, [TP])
        w.timer.advance(2000)
        assert await abort_timed_out(w.coord) == 0
        w.timer.advance(1500)
        assert await abort_timed_out(w.coord) == 1
        meta = w.meta("slow")
        assert (meta.state, meta.producer_epoch) == (TxnState.PREPARE_ABORT, epoch + 1)
        [abort] = w.sink.queued
        assert (abort.commit, abort.epoch, abort.tps) == (False, epoch + 1, frozenset({TP}))
        await w.sink.finish_all()
        entry = describe(w.coord, "slow")
        assert (entry["transaction_state"], entry["producer_epoch"]) == ("CompleteAbort", 1)
        assert await code(w.coord.end_txn("slow", pid, epoch, True)) == E.producer_fenced
    run(scenario())


def test_reload_resends_prepared_markers_at_the_new_epoch_and_old_completion_is_refused() -> None:
    async def scenario() -> None:
        w = World()
        await w.load()
        pid, epoch = await w.coord.init_producer_id("app", 60_000, None)
        await w.coord.add_partitions("app", pid, epoch, [TP])
        await w.coord.end_txn("app", pid, epoch, True)
        [old] = w.sink.queued
        # leadership of the partition moves away and back (leader epoch bumps twice)
        part = w.coord.partition_of("app")
        w._replay(w.image, PartitionChangeRecord(w.topic_id, part, leader=2))
        w.coord.sync_leadership()
        assert part in w.sink.removed
        w._replay(w.image, PartitionChangeRecord(w.topic_id, part, leader=1))
        new = World(w.log, w.image)
        await new.load()
        [again] = new.sink.queued
        assert again.coord_epoch > old.coord_epoch and again.commit
        # the old coordinator's completion is refused; the new one's completes
        assert await new.sink.complete("app", pid, epoch, True, old.coord_epoch) \
            == E.not_coordinator
        assert await new.sink.finish_all() == [E.none]
        assert new.meta("app").state is TxnState.COMPLETE_COMMIT
    run(scenario())


def test_expiry_and_admin() -> None:
    async def scenario() -> None:
        w = World()
        await w.load()
        await w.coord.init_producer_id("idle", 60_000, None)
        pid, epoch = await w.coord.init_producer_id("busy", 60_000, None)
        await w.coord.add_partitions("busy", pid, epoch, [TP, ("out", 1)])
        listing = list_transactions(w.coord)
        assert sorted(t[0] for t in listing.transactions) == ["busy", "idle"]
        listing = list_transactions(w.coord, states=["Ongoing", "Nope"])
        assert listing.transactions == [("busy", pid, "Ongoing")]
        assert listing.unknown_state_filters == ["Nope"]
        assert list_transactions(w.coord, states=["Nope"]).transactions == []
        assert list_transactions(w.coord, pattern="b.*").transactions == [("busy", pid, "Ongoing")]
        assert list_transactions(w.coord, pattern="(").error == E.invalid_request
        w.timer.advance(5)
        # as Kafka: the duration is now - start, so an id with no transaction (start -1) passes
        assert sorted(t[0] for t in list_transactions(w.coord, duration_ms=1).transactions) \
            == ["busy", "idle"]
        assert [t[0] for t in list_transactions(w.coord, duration_ms=10).transactions] == ["idle"]
        entry = describe(w.coord, "busy")
        assert entry["topics"] == [{"topic": "out", "partitions": [0, 1]}]
        assert describe(w.coord, "nobody")["error_code"] == E.transactional_id_not_found
        assert describe(w.coord, "idle")["transaction_start_time_ms"] == -1   # none, as Kafka
        assert describe(w.coord, "nobody")["transaction_start_time_ms"] == 0  # Kafka's default
        assert describe(w.coord, "")["error_code"] == E.invalid_request
        w.timer.advance(10_000)
        assert await expire_ids(w.coord) == 1                 # the open one stays
        assert describe(w.coord, "idle")["error_code"] == E.transactional_id_not_found
        again = World(w.log, w.image)
        await again.load()
        assert describe(again.coord, "idle")["error_code"] == E.transactional_id_not_found
        assert describe(again.coord, "busy")["transaction_state"] == "Ongoing"
    run(scenario())


def test_not_coordinator_and_bad_timeout() -> None:
    async def scenario() -> None:
        w = World()
        assert await code(w.coord.init_producer_id("app", 60_000, None)) == E.not_coordinator
        await w.load()
        assert await code(w.coord.init_producer_id("app", 10**9, None)) \
            == E.invalid_transaction_timeout
        assert await code(w.coord.init_producer_id("", 1000, None)) == E.invalid_request
        # longer than a classic string (possible in flexible requests): refused at the door
        assert await code(w.coord.init_producer_id("x" * 40_000, 1000, None)) \
            == E.invalid_request
        assert describe(w.coord, "x" * 40_000)["error_code"] == E.invalid_request
    run(scenario())


def test_verify_waits_for_a_change_being_written() -> None:
    """Kafka's pending state: a verification that arrives while EndTxn's PrepareCommit is
    being written sees the new state (CONCURRENT_TRANSACTIONS), not the old Ongoing."""
    async def scenario() -> None:
        w = World()
        await w.load()
        pid, epoch = await w.coord.init_producer_id("app", 60_000, None)
        await w.coord.add_partitions("app", pid, epoch, [TP])
        gate = asyncio.Event()
        append = w.log.append

        async def slow_append(partition: int, batch: bytes, **kw: Any) -> int:
            await gate.wait()
            return await append(partition, batch, **kw)

        w.log.append = slow_append  # type: ignore[method-assign]
        end = asyncio.ensure_future(w.coord.end_txn("app", pid, epoch, True))
        await asyncio.sleep(0)
        check = asyncio.ensure_future(w.coord.verify("app", pid, epoch, [TP]))
        await asyncio.sleep(0.01)
        assert not check.done()
        gate.set()
        await end
        assert await check == {TP: E.concurrent_transactions}
    run(scenario())
