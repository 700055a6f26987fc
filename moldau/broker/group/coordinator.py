"""The group coordinator: which groups this broker coordinates, loading them from
``__consumer_offsets``, and writing their records back.

A broker coordinates the groups whose ``__consumer_offsets`` partition it leads. When it becomes
leader of such a partition it loads it (replays every record into a :class:`GroupShard`);
requests for a group whose shard is still loading get COORDINATOR_LOAD_IN_PROGRESS, requests
for groups of partitions led elsewhere get NOT_COORDINATOR. The protocols live in their own
modules: :mod:`.classic_protocol`, :mod:`.consumer_ops`, :mod:`.offsets`, :mod:`.admin`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any, TypeVar

from ...protocol.errors import ErrorCode
from ...protocol.records.codec import decode_batch
from ..metadata.image import MetadataImage
from .admin import GroupAdmin
from .classic import ClassicGroup, ClassicState
from .classic_protocol import ClassicProtocol
from .config import GroupConfig
from .consumer_ops import ConsumerProtocol
from .errors import GroupError
from .locks import GroupLocks
from .offsets import OffsetManager
from .offsets_log import OffsetsLog, OffsetsLogError, records_batch
from .partitioning import OFFSETS_TOPIC, partition_for
from .records import Key, Value, decode_key, decode_value, encode_key, encode_value
from .shard import Group, GroupShard
from .timer import Timer
from .wire import MAX_CLASSIC_STRING, RecordFormatError, StringTooLong, fits_classic

log = logging.getLogger(__name__)

T = TypeVar("T")

# How Kafka maps a failed append to __consumer_offsets to what the group client sees.
_APPEND_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
    ErrorCode.invalid_fetch_size: ErrorCode.unknown_server_error,
}
# An offset commit too large for the log is the client's to fix (Kafka's storeOffsets).
_COMMIT_ERRORS = {
    ErrorCode.message_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.record_list_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.invalid_fetch_size: ErrorCode.invalid_commit_offset_size,
}


def append_error(code: int, *, commit: bool = False) -> ErrorCode:
    """The group-facing error for an append that failed with ``code`` (``commit``: the
    append held offset commits)."""
    error = ErrorCode(code)
    if commit and error in _COMMIT_ERRORS:
        return _COMMIT_ERRORS[error]
    return _APPEND_ERRORS.get(error, error)


class GroupCoordinator:
    """Groups and offsets of the ``__consumer_offsets`` partitions this broker leads."""

    def __init__(self, config: GroupConfig, offsets_log: OffsetsLog, timer: Timer, *,
                 node_id: int, image: Callable[[], MetadataImage],
                 fenced: Callable[[], bool] = lambda: False) -> None:
        self.config = config
        self.log = offsets_log
        self.timer = timer
        self.node_id = node_id
        self.image = image
        # Whether this broker is fenced (leads nothing, so coordinates nothing).
        self.fenced = fenced
        self.shards: dict[int, GroupShard] = {}
        self.loading: set[int] = set()
        self.tasks: set[asyncio.Task[Any]] = set()
        # The pending creation of __consumer_offsets that lookups join (group/service.py).
        self.offsets_topic_creation: asyncio.Task[Any] | None = None
        self.classic = ClassicProtocol(self)
        self.consumer = ConsumerProtocol(self)
        self.offsets = OffsetManager(self)
        self.admin = GroupAdmin(self)
        self.locks = GroupLocks()
        self.closed = False

    # --- placement ---------------------------------------------------------------------
    @property
    def num_partitions(self) -> int:
        """Partitions of ``__consumer_offsets`` (the real topic's, once it exists)."""
        topic = self.image().topics_by_name.get(OFFSETS_TOPIC)
        if topic is not None and topic.partitions:
            return len(topic.partitions)
        return self.config.offsets_topic_num_partitions

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def shard_of_group(self, group_id: str) -> GroupShard:
        """The loaded shard of ``group_id``; raises INVALID_GROUP_ID for a group id no record
        key can hold, NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS."""
        if len(group_id) > MAX_CLASSIC_STRING // 4 and not fits_classic(group_id):
            # Possible in flexible requests; such a group could never be written (Kafka's
            # write would fail later, with UNKNOWN_SERVER_ERROR): refuse it at the door.
            raise GroupError(ErrorCode.invalid_group_id,
                             f"group id of {len(group_id.encode())} bytes is longer than the "
                             f"{MAX_CLASSIC_STRING} bytes a __consumer_offsets key holds")
        partition = self.partition_of(group_id)
        shard = self.shards.get(partition)
        if shard is not None:
            return shard
        if partition in self.loading:
            raise GroupError(ErrorCode.coordinator_load_in_progress,
                             f"__consumer_offsets-{partition} is still loading")
        raise GroupError(ErrorCode.not_coordinator,
                         f"this broker does not lead __consumer_offsets-{partition}")

    def check_loaded(self, shard: GroupShard) -> None:
        """Raise NOT_COORDINATOR if ``shard`` was unloaded (e.g. while a request waited)."""
        if self.shards.get(shard.partition) is not shard:
            raise GroupError(ErrorCode.not_coordinator,
                             f"lost leadership of __consumer_offsets-{shard.partition}")

    def serves(self, group: Group) -> bool:
        """Whether this coordinator still serves ``group``: its shard is loaded and holds this
        very group (a timer's write that failed is retried then, and abandoned otherwise)."""
        shard = self.shards.get(self.partition_of(group.group_id))
        return shard is not None and shard.groups.get(group.group_id) is group

    def groups(self) -> Iterable[tuple[GroupShard, Group]]:
        for shard in list(self.shards.values()):
            for group in list(shard.groups.values()):
                yield shard, group

    # --- tasks -------------------------------------------------------------------------
    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``coro`` in the background; it is cancelled when the coordinator closes."""
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if isinstance(exc, GroupError):
            log.debug("group change answered %s: %s", exc.code.name, exc)
        elif exc is not None:
            log.error("group coordinator task failed", exc_info=exc)

    async def run(self, change: Coroutine[Any, Any, T]) -> T:
        """Run a request's change (plan, write, apply) to its end even if the request goes
        away meanwhile: a batch that reached the log must reach memory too. Its result or
        GroupError is the request's."""
        return await asyncio.shield(self.spawn(change))

    # --- writing -----------------------------------------------------------------------
    async def write(self, shard: GroupShard, records: Sequence[tuple[Key, Value | None]], *,
                    commit: bool = False) -> int:
        """Append ``records`` to the shard's partition as one batch; returns its base offset.

        Every change to a group goes through here *before* it is applied to memory, so memory
        never holds what the log does not (Kafka's CoordinatorRuntime writes, then the shard
        replays). Raises GroupError with the group-facing error (chained to the append's) when
        the append fails or the shard was unloaded meanwhile; ``commit`` selects the errors of
        an offset commit."""
        try:
            encoded = [(encode_key(k), None if v is None else encode_value(v))  # type: ignore[arg-type]
                       for k, v in records]
        except StringTooLong as exc:
            # A member id, instance id or protocol name too long for its record (flexible
            # requests allow them). Kafka's coordinator fails the write the same way and
            # answers UNKNOWN_SERVER_ERROR.
            log.warning("cannot write to __consumer_offsets-%d: %s", shard.partition, exc)
            raise GroupError(ErrorCode.unknown_server_error, str(exc)) from exc
        batch = records_batch(encoded, self.timer.now_ms())
        try:
            base = await self.log.append(shard.partition, batch)
        except OffsetsLogError as exc:
            raise GroupError(append_error(exc.code, commit=commit), str(exc)) from exc
        self.check_loaded(shard)
        return base

    # --- loading -----------------------------------------------------------------------
    async def load(self, partition: int) -> None:
        """Become coordinator of ``partition``: replay its records, then serve its groups."""
        if partition in self.shards or partition in self.loading:
            return
        self.loading.add(partition)
        started = self.timer.now_ms()
        shard = GroupShard(partition)
        records = 0
        try:
            for batches, raw in enumerate(self.log.read_batches(partition)):
                records += self._replay_batch(shard, raw)
                if batches % 64 == 63:
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
        for group in shard.groups.values():
            if isinstance(group, ClassicGroup):
                self.classic.start_loaded(group)
            else:
                self.consumer.start_loaded(shard, group)
        log.info("Loaded __consumer_offsets-%d: %d records, %d groups in %d ms", partition,
                 records, len(shard.groups), self.timer.now_ms() - started)

    @staticmethod
    def _replay_batch(shard: GroupShard, raw: bytes) -> int:
        try:
            decoded = decode_batch(raw)
        except (ValueError, IndexError) as exc:
            # One unreadable batch must not keep every group of the partition offline.
            log.warning("skipping an unreadable batch of __consumer_offsets-%d: %s",
                        shard.partition, exc)
            return 0
        if decoded.header.is_control:
            return 0
        count = 0
        for record in decoded.records:
            if record.key is None:
                continue
            try:
                key = decode_key(record.key)
                value = decode_value(key, record.value)
            except RecordFormatError as exc:
                log.warning("skipping unreadable record at offset %d of __consumer_offsets-%d:"
                            " %s", record.offset, shard.partition, exc)
                continue
            shard.replay(key, value, record.offset)
            count += 1
        return count

    def unload(self, partition: int) -> None:
        """Stop coordinating ``partition`` (leadership moved): parked requests get
        NOT_COORDINATOR and clients look the coordinator up again."""
        self.loading.discard(partition)
        shard = self.shards.pop(partition, None)
        if shard is None:
            return
        for group in shard.groups.values():
            self._shutdown_group(group, ErrorCode.not_coordinator)
        log.info("Unloaded __consumer_offsets-%d (%d groups)", partition, len(shard.groups))

    def _shutdown_group(self, group: Group, error: int) -> None:
        if isinstance(group, ClassicGroup):
            self.classic.shutdown_group(group, error)
        else:
            self.consumer.shutdown_group(group)

    def sync_leadership(self) -> None:
        """Load the partitions this broker now leads, unload the ones it lost (all of them
        while the broker is fenced)."""
        topic = self.image().topics_by_name.get(OFFSETS_TOPIC)
        led = set()
        if topic is not None and not self.fenced():
            led = {p for p, state in topic.partitions.items() if state.leader == self.node_id}
        for partition in sorted(led - set(self.shards) - self.loading):
            self.spawn(self.load(partition))
        for partition in (set(self.shards) | self.loading) - led:
            self.unload(partition)

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
        for partition in list(self.shards):
            self.unload(partition)
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
