"""The coordinator runtime: which partitions of a coordinator's topic this broker serves,
loading them into shards, writing changes, and the coordinator's background tasks.

A broker coordinates the keys (group ids, transactional ids) whose partition of the topic it
leads. When it becomes leader of such a partition it loads it (replays every record into a new
shard); requests for a key whose shard is still loading get COORDINATOR_LOAD_IN_PROGRESS,
requests for keys of partitions led elsewhere NOT_COORDINATOR. Every change is written before
it is applied (:meth:`CoordinatorRuntime.write`, then the caller replays), so memory never
holds what the log does not, and a restart (or the next leader) loads the same state.

Kafka's ``CoordinatorRuntime`` runs a partition's events one after the other on one thread;
here one asyncio loop runs everything and :class:`~.locks.KeyLocks` orders the changes of one
key, which is all the ordering the coordinators need.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ...protocol.errors import ErrorCode
from ...protocol.records.codec import decode_batch
from ...protocol.records.control import build_end_txn_marker, parse_end_txn_marker
from ..metadata.image import MetadataImage
from .errors import CoordinatorError, append_error
from .locks import KeyLocks
from .log import CoordinatorLog, CoordinatorLogError, records_batch
from .partitioning import partition_for
from .shard import LoggedRecord, S, ShardListener
from .timer import Timer

if TYPE_CHECKING:
    from ..replica_manager import ReplicaManager

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Batches replayed between two yields to the event loop while loading.
LOAD_YIELD_EVERY = 64


class CoordinatorRuntime(Generic[S]):
    """The loaded shards of ``topic`` on this broker, and how they are written."""

    def __init__(self, topic: str, log: CoordinatorLog, timer: Timer, *, node_id: int,
                 image: Callable[[], MetadataImage], new_shard: Callable[[int, int], S],
                 listener: ShardListener[S], default_partitions: int,
                 fenced: Callable[[], bool] = lambda: False) -> None:
        self.topic = topic
        self.log = log
        self.timer = timer
        self.node_id = node_id
        self.image = image
        self.new_shard = new_shard
        self.listener = listener
        #: Partitions of the topic before it exists (its ``*.num.partitions`` key).
        self.default_partitions = default_partitions
        # Whether this broker is fenced (leads nothing, so coordinates nothing).
        self.fenced = fenced
        self.shards: dict[int, S] = {}
        self.loading: set[int] = set()
        self.tasks: set[asyncio.Task[Any]] = set()
        self.locks = KeyLocks()
        # The pending creation of the topic that lookups join (coordinator/topic.py).
        self.topic_creation: asyncio.Task[Any] | None = None
        self.closed = False

    # --- placement ---------------------------------------------------------------------
    @property
    def num_partitions(self) -> int:
        """Partitions of the topic (the real topic's, once it exists)."""
        topic = self.image().topics_by_name.get(self.topic)
        if topic is not None and topic.partitions:
            return len(topic.partitions)
        return self.default_partitions

    def partition_of(self, key: str) -> int:
        """The partition of ``key`` (Kafka's placement)."""
        return partition_for(key, self.num_partitions)

    def shard(self, partition: int) -> S:
        """The loaded shard of ``partition``; raises COORDINATOR_LOAD_IN_PROGRESS while it
        loads and NOT_COORDINATOR when this broker does not lead it."""
        shard = self.shards.get(partition)
        if shard is not None:
            return shard
        if partition in self.loading:
            raise CoordinatorError(ErrorCode.coordinator_load_in_progress,
                                   f"{self.topic}-{partition} is still loading")
        raise CoordinatorError(ErrorCode.not_coordinator,
                               f"this broker does not lead {self.topic}-{partition}")

    def check_loaded(self, shard: S) -> None:
        """Raise NOT_COORDINATOR if ``shard`` was unloaded (e.g. while a request waited)."""
        if self.shards.get(shard.partition) is not shard:
            raise CoordinatorError(ErrorCode.not_coordinator,
                                   f"lost leadership of {self.topic}-{shard.partition}")

    # --- tasks -------------------------------------------------------------------------
    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``coro`` in the background; it is cancelled when the runtime closes."""
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if isinstance(exc, CoordinatorError):
            log.debug("%s change answered %s: %s", self.topic, exc.code.name, exc)
        elif exc is not None:
            log.error("%s coordinator task failed", self.topic, exc_info=exc)

    async def run(self, change: Coroutine[Any, Any, T]) -> T:
        """Run a request's change (plan, write, apply) to its end even if the request goes
        away meanwhile: a batch that reached the log must reach memory too. Its result or
        CoordinatorError is the request's."""
        return await asyncio.shield(self.spawn(change))

    # --- writing -----------------------------------------------------------------------
    async def write(self, shard: S, records: Sequence[tuple[bytes, bytes | None]], *,
                    txn: tuple[int, int] | None = None, commit: bool = False,
                    verification_guard: object | None = None) -> int:
        """Append ``records`` (encoded keys and values, None = tombstone) to the shard's
        partition as one batch; returns its base offset. The caller replays them after.

        With ``txn=(producer_id, producer_epoch)`` the batch is transactional (base sequence
        -1; the partition still checks the epoch: an older one fails INVALID_PRODUCER_EPOCH).
        Raises CoordinatorError with the client-facing error (chained to the append's) when
        the append fails or the shard was unloaded meanwhile; ``commit`` selects the errors
        of an offset commit. ``verification_guard``: see :meth:`begin_verification`."""
        pid, epoch = txn if txn is not None else (-1, -1)
        batch = records_batch(records, self.timer.now_ms(), producer_id=pid,
                              producer_epoch=epoch)
        base = await self._append(shard, batch, commit=commit, guard=verification_guard)
        self.check_loaded(shard)
        return base

    async def write_end_marker(self, shard: S, producer_id: int, producer_epoch: int,
                               coordinator_epoch: int, commit: bool) -> int:
        """End ``producer_id``'s transaction on the shard's partition (WriteTxnMarkers for a
        partition of this topic): append the COMMIT or ABORT marker, then replay it into the
        shard (pending records take effect or are dropped). Returns the marker's offset.

        Raises CoordinatorError: NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS (look the
        shard up with :meth:`shard`), INVALID_PRODUCER_EPOCH for an older producer epoch,
        TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch, and the mapped append
        errors."""
        batch = build_end_txn_marker(producer_id, producer_epoch, coordinator_epoch, commit,
                                     self.timer.now_ms())
        base = await self._append(shard, batch)
        self.check_loaded(shard)
        shard.replay_end_txn(producer_id, commit, base)
        return base

    def begin_verification(self, shard: S, producer_id: int) -> object | None:
        """The guard of a transactional write of ``producer_id`` to the shard's partition,
        taken *before* the transaction coordinator is asked (KIP-890): if the transaction
        ends (marker) or the epoch changes before the write, a write that would open a new
        transaction fails INVALID_TXN_STATE instead of leaving one no coordinator knows."""
        return self.log.begin_verification(shard.partition, producer_id)

    async def _append(self, shard: S, batch: bytes, *, commit: bool = False,
                      guard: object | None = None) -> int:
        self.check_loaded(shard)
        try:
            return await self.log.append(shard.partition, batch, verification_guard=guard)
        except CoordinatorLogError as exc:
            raise CoordinatorError(append_error(exc.code, commit=commit), str(exc)) from exc

    # --- loading -----------------------------------------------------------------------
    async def load(self, partition: int) -> None:
        """Become coordinator of ``partition``: replay its records, then serve them."""
        if partition in self.shards or partition in self.loading:
            return
        self.loading.add(partition)
        started = self.timer.now_ms()
        shard = self.new_shard(partition, self._leader_epoch(partition))
        records = 0
        try:
            for batches, raw in enumerate(self.log.read_batches(partition)):
                records += self._replay_batch(shard, raw)
                if batches % LOAD_YIELD_EVERY == LOAD_YIELD_EVERY - 1:
                    await asyncio.sleep(0)
                if partition not in self.loading:
                    return
        except Exception:
            self.loading.discard(partition)
            raise
        if partition not in self.loading:
            return
        self.loading.discard(partition)
        shard.finish_load(self.timer.now_ms())
        self.shards[partition] = shard
        self.listener.on_loaded(shard)
        log.info("Loaded %s-%d: %d records in %d ms", self.topic, partition, records,
                 self.timer.now_ms() - started)

    def _leader_epoch(self, partition: int) -> int:
        topic = self.image().topics_by_name.get(self.topic)
        state = topic.partitions.get(partition) if topic is not None else None
        return state.leader_epoch if state is not None else 0

    def _replay_batch(self, shard: S, raw: bytes) -> int:
        try:
            decoded = decode_batch(raw)
        except (ValueError, IndexError) as exc:
            # One unreadable batch must not keep every key of the partition offline.
            log.warning("skipping an unreadable batch of %s-%d: %s", self.topic,
                        shard.partition, exc)
            return 0
        header = decoded.header
        if header.is_control:
            if header.producer_id >= 0:
                marker = parse_end_txn_marker(raw)
                if marker is not None:
                    shard.replay_end_txn(header.producer_id, marker.is_commit,
                                         header.base_offset)
            return 0
        count = 0
        pid, epoch, txn = header.producer_id, header.producer_epoch, header.is_transactional
        for record in decoded.records:
            if record.key is None:
                continue
            try:
                shard.replay(LoggedRecord(record.offset, record.key, record.value, pid, epoch,
                                          txn))
            except ValueError as exc:
                log.warning("skipping unreadable record at offset %d of %s-%d: %s",
                            record.offset, self.topic, shard.partition, exc)
                continue
            count += 1
        return count

    def unload(self, partition: int) -> None:
        """Stop coordinating ``partition`` (leadership moved): the listener answers parked
        requests NOT_COORDINATOR and clients look the coordinator up again."""
        self.loading.discard(partition)
        shard = self.shards.pop(partition, None)
        if shard is None:
            return
        self.listener.on_unloaded(shard)
        log.info("Unloaded %s-%d", self.topic, partition)

    def sync_leadership(self) -> None:
        """Load the partitions this broker now leads, unload the ones it lost (all of them
        while the broker is fenced)."""
        topic = self.image().topics_by_name.get(self.topic)
        led = set()
        if topic is not None and not self.fenced():
            led = {p for p, state in topic.partitions.items() if state.leader == self.node_id}
        for partition in sorted(led - set(self.shards) - self.loading):
            self.spawn(self.load(partition))
        for partition in (set(self.shards) | self.loading) - led:
            self.unload(partition)

    def follow_fence(self, replicas: ReplicaManager) -> None:
        """Coordinate nothing while the broker is fenced: every shard is unloaded when the
        fence is set, and what the broker leads is loaded when it is lifted (metadata changes
        reach the runtime through the replica manager's leadership listeners)."""
        self.fenced = lambda: replicas.fenced
        replicas.leadership_listeners.append(self.sync_leadership)

    async def close(self) -> None:
        """Unload every shard and cancel the background tasks."""
        self.closed = True
        for partition in list(self.shards):
            self.unload(partition)
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
