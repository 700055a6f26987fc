"""The group coordinator: the groups of the ``__consumer_offsets`` partitions this broker
leads, on the coordinator runtime.

Loading, unloading, writing and background tasks are the runtime's
(:class:`moldau.broker.coordinator.runtime.CoordinatorRuntime`, shared with the transaction
coordinator): a broker coordinates the groups whose partition it leads, requests for a group
whose shard is still loading get COORDINATOR_LOAD_IN_PROGRESS, requests for groups of
partitions led elsewhere NOT_COORDINATOR. This class is the runtime's listener (timers start
when a shard is loaded, parked requests are answered when it goes) and the entry to the
protocols, which live in their own modules: :mod:`.classic_protocol`, :mod:`.consumer_ops`,
:mod:`.offsets`, :mod:`.txn_offsets`, :mod:`.admin`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any, TypeVar

from ...protocol.errors import ErrorCode
from ..coordinator.errors import append_error
from ..coordinator.runtime import CoordinatorRuntime
from ..coordinator.shard import ShardListener
from ..metadata.image import MetadataImage
from .admin import GroupAdmin
from .classic import ClassicGroup, ClassicState
from .classic_protocol import ClassicProtocol
from .config import GroupConfig
from .consumer_ops import ConsumerProtocol
from .errors import GroupError
from .locks import GroupLocks
from .offsets import OffsetManager
from .offsets_log import OffsetsLog
from .partitioning import OFFSETS_TOPIC
from .records import Key, Value, encode_key, encode_value
from .shard import Group, GroupShard
from .timer import Timer
from .txn_offsets import TxnOffsetManager
from .wire import MAX_CLASSIC_STRING, StringTooLong, fits_classic

log = logging.getLogger(__name__)

T = TypeVar("T")

__all__ = ["GroupCoordinator", "append_error"]


class GroupCoordinator(ShardListener[GroupShard]):
    """Groups and offsets of the ``__consumer_offsets`` partitions this broker leads."""

    def __init__(self, config: GroupConfig, offsets_log: OffsetsLog, timer: Timer, *,
                 node_id: int, image: Callable[[], MetadataImage],
                 fenced: Callable[[], bool] = lambda: False) -> None:
        self.config = config
        self.log = offsets_log
        self.timer = timer
        self.node_id = node_id
        self.image = image
        self.runtime: CoordinatorRuntime[GroupShard] = CoordinatorRuntime(
            OFFSETS_TOPIC, offsets_log, timer, node_id=node_id, image=image,
            new_shard=lambda p, epoch: GroupShard(p, epoch, timer.now_ms), listener=self,
            default_partitions=config.offsets_topic_num_partitions, fenced=fenced)
        self.classic = ClassicProtocol(self)
        self.consumer = ConsumerProtocol(self)
        self.offsets = OffsetManager(self)
        self.txn_offsets = TxnOffsetManager(self)
        self.admin = GroupAdmin(self)
        self.closed = False

    # --- the runtime's, under the names the protocols use --------------------------------
    @property
    def shards(self) -> dict[int, GroupShard]:
        return self.runtime.shards

    @property
    def loading(self) -> set[int]:
        return self.runtime.loading

    @property
    def tasks(self) -> set[asyncio.Task[Any]]:
        return self.runtime.tasks

    @property
    def locks(self) -> GroupLocks:
        return self.runtime.locks

    @property
    def fenced(self) -> Callable[[], bool]:
        return self.runtime.fenced

    @fenced.setter
    def fenced(self, fenced: Callable[[], bool]) -> None:
        self.runtime.fenced = fenced

    @property
    def num_partitions(self) -> int:
        """Partitions of ``__consumer_offsets`` (the real topic's, once it exists)."""
        return self.runtime.num_partitions

    def partition_of(self, group_id: str) -> int:
        return self.runtime.partition_of(group_id)

    def shard_of_group(self, group_id: str) -> GroupShard:
        """The loaded shard of ``group_id``; raises INVALID_GROUP_ID for a group id no record
        key can hold, NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS."""
        if len(group_id) > MAX_CLASSIC_STRING // 4 and not fits_classic(group_id):
            # Possible in flexible requests; such a group could never be written (Kafka's
            # write would fail later, with UNKNOWN_SERVER_ERROR): refuse it at the door.
            raise GroupError(ErrorCode.invalid_group_id,
                             f"group id of {len(group_id.encode())} bytes is longer than the "
                             f"{MAX_CLASSIC_STRING} bytes a __consumer_offsets key holds")
        return self.runtime.shard(self.partition_of(group_id))

    def check_loaded(self, shard: GroupShard) -> None:
        """Raise NOT_COORDINATOR if ``shard`` was unloaded (e.g. while a request waited)."""
        self.runtime.check_loaded(shard)

    def serves(self, group: Group) -> bool:
        """Whether this coordinator still serves ``group``: its shard is loaded and holds this
        very group (a timer's write that failed is retried then, and abandoned otherwise)."""
        shard = self.shards.get(self.partition_of(group.group_id))
        return shard is not None and shard.groups.get(group.group_id) is group

    def groups(self) -> Iterable[tuple[GroupShard, Group]]:
        for shard in list(self.shards.values()):
            for group in list(shard.groups.values()):
                yield shard, group

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``coro`` in the background; it is cancelled when the coordinator closes."""
        return self.runtime.spawn(coro)

    async def run(self, change: Coroutine[Any, Any, T]) -> T:
        """Run a request's change to its end even if the request goes away meanwhile."""
        return await self.runtime.run(change)

    async def load(self, partition: int) -> None:
        """Become coordinator of ``partition``: replay its records, then serve its groups."""
        await self.runtime.load(partition)

    def unload(self, partition: int) -> None:
        """Stop coordinating ``partition`` (leadership moved)."""
        self.runtime.unload(partition)

    def sync_leadership(self) -> None:
        """Load the partitions this broker now leads, unload the ones it lost."""
        self.runtime.sync_leadership()

    # --- writing -----------------------------------------------------------------------
    async def write(self, shard: GroupShard, records: Sequence[tuple[Key, Value | None]], *,
                    commit: bool = False, txn: tuple[int, int] | None = None,
                    verification_guard: object | None = None) -> int:
        """Append ``records`` to the shard's partition as one batch; returns its base offset.

        Every change to a group goes through here *before* it is applied to memory, so memory
        never holds what the log does not. Raises GroupError with the group-facing error
        (chained to the append's) when the append fails or the shard was unloaded meanwhile;
        ``commit`` selects the errors of an offset commit, ``txn=(producer_id, epoch)`` writes
        a transactional batch (TxnOffsetCommit, with the ``verification_guard`` of
        ``runtime.begin_verification``)."""
        try:
            encoded = [(encode_key(k), None if v is None else encode_value(v))  # type: ignore[arg-type]
                       for k, v in records]
        except StringTooLong as exc:
            # A member id, instance id or protocol name too long for its record (flexible
            # requests allow them). Kafka's coordinator fails the write the same way and
            # answers UNKNOWN_SERVER_ERROR.
            log.warning("cannot write to __consumer_offsets-%d: %s", shard.partition, exc)
            raise GroupError(ErrorCode.unknown_server_error, str(exc)) from exc
        return await self.runtime.write(shard, encoded, commit=commit, txn=txn,
                                        verification_guard=verification_guard)

    async def write_end_marker(self, partition: int, producer_id: int, producer_epoch: int,
                               coordinator_epoch: int, commit: bool) -> int:
        """End ``producer_id``'s transaction on ``__consumer_offsets-partition`` (the marker
        writer's path for this topic): its pending offsets become visible on commit and are
        dropped on abort. Raises GroupError: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
        INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, mapped append errors."""
        shard = self.runtime.shard(partition)
        return await self.runtime.write_end_marker(shard, producer_id, producer_epoch,
                                                   coordinator_epoch, commit)

    # --- the runtime's listener --------------------------------------------------------
    def on_loaded(self, shard: GroupShard) -> None:
        """Start the timers of the loaded groups."""
        for group in shard.groups.values():
            if isinstance(group, ClassicGroup):
                self.classic.start_loaded(group)
            else:
                self.consumer.start_loaded(shard, group)
        log.info("__consumer_offsets-%d holds %d groups", shard.partition, len(shard.groups))

    def on_unloaded(self, shard: GroupShard) -> None:
        """Parked requests of the shard's groups get NOT_COORDINATOR."""
        for group in shard.groups.values():
            self._shutdown_group(group, ErrorCode.not_coordinator)

    def _shutdown_group(self, group: Group, error: int) -> None:
        if isinstance(group, ClassicGroup):
            self.classic.shutdown_group(group, error)
        else:
            self.consumer.shutdown_group(group)
    # --- group lifecycle ---------------------------------------------------------------
    def is_idle(self, group: Group) -> bool:
        """An empty group with nothing in flight (may be deleted)."""
        if isinstance(group, ClassicGroup):
            return group.is_in(ClassicState.EMPTY) and not group.members \
                and not group.pending_members
        return group.is_empty

    def maybe_forget_group(self, shard: GroupShard, group: Group) -> None:
        """Drop a group that a failed request created and that holds nothing."""
        if (isinstance(group, ClassicGroup) and self.is_idle(group)
                and group.generation_id == 0 and not shard.offsets.has_offsets(group.group_id)
                and shard.groups.get(group.group_id) is group):
            del shard.groups[group.group_id]

    def remove_group(self, shard: GroupShard, group: Group) -> None:
        """Forget a group whose tombstones are written (DeleteGroups, expiry, a change of
        protocol). Offsets committed while the tombstones were written outlive it in a simple
        group, which is also what loading the log gives."""
        if shard.groups.get(group.group_id) is group:
            del shard.groups[group.group_id]
        self._shutdown_group(group, ErrorCode.coordinator_not_available)
        if isinstance(group, ClassicGroup):
            group.transition(ClassicState.DEAD, self.timer.now_ms())
        if shard.offsets.has_offsets(group.group_id) and group.group_id not in shard.groups:
            shard.groups[group.group_id] = ClassicGroup(group.group_id, self.timer.now_ms())

    # --- periodic expiry ---------------------------------------------------------------
    def start_expiry(self) -> None:
        """Expire old offsets every ``offsets.retention.check.interval.ms``."""
        self.timer.schedule(("expire-offsets",), self.config.offsets_retention_check_interval_ms,
                            self._expiry_tick)

    def _expiry_tick(self) -> None:
        if self.closed:
            return
        self.spawn(self.expire_all())
        self.start_expiry()

    async def expire_all(self) -> int:
        total = 0
        for shard in list(self.shards.values()):
            total += await self.offsets.expire(shard)
        return total

    async def close(self) -> None:
        self.closed = True
        self.timer.cancel(("expire-offsets",))
        await self.runtime.close()
