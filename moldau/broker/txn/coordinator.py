"""The transaction coordinator: one method per transaction API, on the coordinator runtime.

A broker coordinates the transactional ids whose ``__transaction_state`` partition it leads
(placement as groups: ``abs(javaHash(id)) % partitions``). Every request runs under its id's
key lock (Kafka's "pending state": a second request waits, then sees the new state): plan
(:mod:`.transitions`, pure) → write the record to the partition (acks=-1, the ISR) → keep the
planned metadata in the shard → for PrepareCommit / PrepareAbort hand the markers to the
:class:`~.channel.TxnMarkerChannel` → answer. EndTxn is answered once Prepare* is written,
before the markers, as Kafka does; the channel calls :meth:`TransactionCoordinator.complete`
when every partition has its marker, which writes CompleteCommit / CompleteAbort.

A shard that is loaded (this broker became the partition's leader, at a new leader epoch =
coordinator epoch) hands every Prepare* transaction to the channel again at that epoch: how a
new coordinator finishes what the old one prepared (design §6.4, §7.5).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from ...protocol.errors import ErrorCode, KafkaError
from ..coordinator.errors import CoordinatorError
from ..coordinator.log import CoordinatorLog
from ..coordinator.runtime import CoordinatorRuntime
from ..coordinator.timer import Timer
from ..group.wire import MAX_CLASSIC_STRING, fits_classic
from ..metadata.image import MetadataImage
from .channel import PendingMarkers
from .config import TxnConfig
from .errors import TxnError
from .records import TXN_STATE_TOPIC, encode_key, encode_value
from .shard import TxnShard
from .state import TopicPartition, TxnMetadata, TxnState
from .transitions import (
    Plan,
    needs_new_producer_id,
    plan_add_partitions,
    plan_complete,
    plan_end,
    plan_init,
    plan_verify,
)

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"


class MarkerSink(Protocol):
    """What the coordinator needs of the marker channel (``txn/channel.py``)."""

    complete: Any

    def enqueue(self, pending: PendingMarkers) -> None: ...

    def remove_partition(self, coord_partition: int) -> None: ...


class TransactionCoordinator:
    """Transactions of the ``__transaction_state`` partitions this broker leads."""

    def __init__(self, config: TxnConfig, log_: CoordinatorLog, timer: Timer, *,
                 node_id: int, image: Callable[[], MetadataImage],
                 new_producer_id: Callable[[], Awaitable[int]],
                 markers: MarkerSink | None = None,
                 fenced: Callable[[], bool] = lambda: False) -> None:
        self.config = config
        self.timer = timer
        self.image = image
        self.new_producer_id = new_producer_id
        self.runtime: CoordinatorRuntime[TxnShard] = CoordinatorRuntime(
            TXN_STATE_TOPIC, log_, timer, node_id=node_id, image=image, new_shard=TxnShard,
            listener=self, default_partitions=config.num_partitions, fenced=fenced)
        self.markers = markers
        if markers is not None:
            markers.complete = self.complete

    # --- shard listener -------------------------------------------------------------------
    def on_loaded(self, shard: TxnShard) -> None:
        """Finish what a previous coordinator prepared: markers at this shard's epoch."""
        for meta in shard.prepared():
            log.info("transactional id %s was %s when %s-%d was loaded: writing its markers "
                     "at coordinator epoch %d", meta.transactional_id, meta.state.display,
                     TXN_STATE_TOPIC, shard.partition, shard.epoch)
            self._send_markers(shard, meta)

    def on_unloaded(self, shard: TxnShard) -> None:
        if self.markers is not None:
            self.markers.remove_partition(shard.partition)

    # --- placement ------------------------------------------------------------------------
    def partition_of(self, transactional_id: str) -> int:
        return self.runtime.partition_of(transactional_id)

    def shard_of(self, transactional_id: str) -> TxnShard:
        """The loaded shard of ``transactional_id``; TxnError NOT_COORDINATOR,
        COORDINATOR_LOAD_IN_PROGRESS, or INVALID_REQUEST for an id no record key holds."""
        if len(transactional_id) > MAX_CLASSIC_STRING // 4 and not fits_classic(transactional_id):
            # Possible in flexible requests; such an id could never be written (its record
            # key is a classic string): refuse it at the door.
            raise TxnError(ErrorCode.invalid_request,
                           f"transactional id of {len(transactional_id.encode())} bytes is "
                           f"longer than the {MAX_CLASSIC_STRING} bytes a "
                           f"{TXN_STATE_TOPIC} key holds")
        try:
            return self.runtime.shard(self.partition_of(transactional_id))
        except CoordinatorError as exc:
            raise TxnError(exc.code, exc.message) from exc

    def shards(self) -> list[TxnShard]:
        return list(self.runtime.shards.values())

    def sync_leadership(self) -> None:
        self.runtime.sync_leadership()

    # --- the APIs -------------------------------------------------------------------------
    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> tuple[int, int]:
        """InitProducerId with a transactional id: (producer id, epoch); TxnError otherwise
        (CONCURRENT_TRANSACTIONS while an open transaction of the id is being aborted)."""
        if not transactional_id:
            raise TxnError(ErrorCode.invalid_request, "the transactional id is empty")
        return await self.runtime.run(self._init(transactional_id, timeout_ms, expected))

    async def _init(self, txn_id: str, timeout_ms: int,
                    expected: tuple[int, int] | None) -> tuple[int, int]:
        shard = self.shard_of(txn_id)
        async with self.runtime.locks.hold(txn_id):
            self._check_loaded(shard)
            cur = shard.txns.get(txn_id)
            new_pid = None
            if needs_new_producer_id(cur, expected):
                try:
                    new_pid = await self.new_producer_id()
                except KafkaError as exc:
                    raise TxnError(ErrorCode.coordinator_load_in_progress,
                                   f"no producer id available yet: {exc}") from exc
            plan = plan_init(cur, txn_id, timeout_ms, max_timeout_ms=self.config.max_timeout_ms,
                             expected=expected, new_pid=new_pid, now=self.timer.now_ms())
            await self._apply(shard, txn_id, plan)
        if plan.error:
            raise TxnError(plan.error, f"the open transaction of {txn_id!r} is being aborted "
                                       f"to fence its previous producer; retry")
        assert plan.write is not None
        return plan.write.producer_id, plan.write.producer_epoch

    async def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                             tps: Iterable[TopicPartition]) -> None:
        """AddPartitionsToTxn (clients): TxnError for the whole request on failure."""
        wanted = frozenset(tps)
        await self.runtime.run(self.change(transactional_id, lambda cur: plan_add_partitions(
            cur, transactional_id, producer_id, epoch, wanted, now=self.timer.now_ms())))

    async def add_offsets(self, transactional_id: str, producer_id: int, epoch: int,
                          group_partition: int) -> None:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the
        transaction (its marker makes the offsets visible or drops them)."""
        await self.add_partitions(transactional_id, producer_id, epoch,
                                  [(OFFSETS_TOPIC, group_partition)])

    async def end_txn(self, transactional_id: str, producer_id: int, epoch: int,
                      commit: bool) -> None:
        """EndTxn: Prepare* is written (markers follow) or the retry finds it done."""
        await self.runtime.run(self.change(transactional_id, lambda cur: plan_end(
            cur, transactional_id, producer_id, epoch, commit, now=self.timer.now_ms())))

    async def verify(self, transactional_id: str, producer_id: int, epoch: int,
                     tps: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """Whether the open transaction holds each of ``tps`` (KIP-890 verification, for
        the TxnVerifier): NONE or INVALID_TXN_STATE per partition, or one error for all
        (NOT_COORDINATOR, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS, ...)."""
        wanted = list(tps)
        try:
            shard = self.shard_of(transactional_id)
            # A change being written (EndTxn's Prepare*) is Kafka's pending state: wait it out.
            await self.runtime.locks.idle(transactional_id)
            self._check_loaded(shard)
            return plan_verify(shard.txns.get(transactional_id), transactional_id,
                               producer_id, epoch, wanted)
        except TxnError as exc:
            return dict.fromkeys(wanted, exc.code)

    async def complete(self, transactional_id: str, producer_id: int, epoch: int,
                       commit: bool, coordinator_epoch: int) -> ErrorCode:
        """Every marker of a prepared transaction is written: write Complete*. NONE, or
        NOT_COORDINATOR when this coordinator no longer owns the transaction at that epoch
        (the next one re-sends), or COORDINATOR_NOT_AVAILABLE to be retried."""
        shard = self.runtime.shards.get(self.partition_of(transactional_id))
        if shard is None or shard.epoch != coordinator_epoch:
            return ErrorCode.not_coordinator
        try:
            await self.runtime.run(self.change(
                transactional_id,
                lambda cur: plan_complete(cur, producer_id, epoch, commit,
                                          now=self.timer.now_ms()),
                shard=shard))
        except TxnError as exc:
            if exc.code in (ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress):
                return ErrorCode.not_coordinator
            log.warning("completing the transaction of %s failed (%s); retrying",
                        transactional_id, exc)
            return ErrorCode.coordinator_not_available
        return ErrorCode.none

    # --- plumbing -------------------------------------------------------------------------
    async def change(self, txn_id: str, plan_of: Callable[[TxnMetadata | None], Plan], *,
                      shard: TxnShard | None = None) -> Plan:
        """Plan (``plan_of(current)``) and apply a change of ``txn_id`` under its key lock
        (maintenance uses it too); raises the plan's error (after writing, if it wrote)."""
        shard = shard or self.shard_of(txn_id)
        async with self.runtime.locks.hold(txn_id):
            self._check_loaded(shard)
            plan = plan_of(shard.txns.get(txn_id))
            await self._apply(shard, txn_id, plan)
        if plan.error:
            raise TxnError(plan.error)
        return plan

    def _check_loaded(self, shard: TxnShard) -> None:
        try:
            self.runtime.check_loaded(shard)
        except CoordinatorError as exc:
            raise TxnError(exc.code, exc.message) from exc

    async def _apply(self, shard: TxnShard, txn_id: str, plan: Plan) -> None:
        """Write ``plan`` (nothing, a record or a tombstone), then keep it in the shard and
        send the markers of a Prepare*."""
        if plan.write is None and not plan.tombstone:
            return
        value = None if plan.write is None else encode_value(plan.write)
        try:
            await self.runtime.write(shard, [(encode_key(txn_id), value)])
        except CoordinatorError as exc:
            raise TxnError(exc.code, exc.message) from exc
        if plan.write is None:
            shard.remove(txn_id)
            return
        shard.apply(plan.write)
        if plan.markers:
            self._send_markers(shard, plan.write)

    def _send_markers(self, shard: TxnShard, meta: TxnMetadata) -> None:
        commit = meta.state is TxnState.PREPARE_COMMIT
        pending = PendingMarkers(meta.transactional_id, shard.partition, shard.epoch,
                                 meta.producer_id, meta.producer_epoch, commit,
                                 meta.partitions)
        if self.markers is None:
            log.error("no marker channel: transaction %s stays %s", meta.transactional_id,
                      meta.state.display)
            return
        self.markers.enqueue(pending)

    async def close(self) -> None:
        await self.runtime.close()

