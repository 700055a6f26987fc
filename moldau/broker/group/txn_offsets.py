"""Offsets committed inside a transaction (TxnOffsetCommit, KIP-98 and KIP-447).

A transactional producer that consumed from a group commits the group's offsets through its
transaction: AddOffsetsToTxn adds the group's ``__consumer_offsets`` partition to the
transaction, then TxnOffsetCommit reaches this coordinator. The commit is

1. verified with the transaction coordinator (the :class:`TxnVerifier` seam, KIP-890 part 1):
   the partition must be in the producer's ongoing transaction, else INVALID_TXN_STATE;
2. validated against the group as Kafka's ``validateOffsetCommit(isTransactional=true)`` does:
   v3+ requests carry the generation, member id and group instance id (KIP-447), so a zombie
   of an older generation gets ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID;
   requests without them (v0-2, or generation -1 and no member) are accepted for any group,
   and an unknown group becomes a simple group; no REBALANCE_IN_PROGRESS;
3. written as one transactional batch (the producer's id and epoch: the partition refuses an
   older epoch with INVALID_PRODUCER_EPOCH; a verification guard taken before step 1 makes a
   write that would open a transaction after the verified one ended fail INVALID_TXN_STATE),
   then replayed as *pending* offsets.

Pending offsets are invisible: OffsetFetch keeps answering the last committed offsets, and with
``require_stable`` (v7+) answers UNSTABLE_OFFSET_COMMIT for a partition that has some (the
client retries). The transaction's end marker (WriteTxnMarkers to ``__consumer_offsets``,
:meth:`GroupCoordinator.write_end_marker`) commits them (they then count as committed at their
own record offsets, so a plain commit written after them still wins) or drops them. Expiry,
OffsetDelete and DeleteGroups leave pending offsets alone.

Verification failures reach the client as Kafka's coordinator answers them: PRODUCER_FENCED
becomes INVALID_PRODUCER_EPOCH; TRANSACTION_ABORTABLE is kept for v4 (which knows it) and is
INVALID_TXN_STATE before; a failure to reach or use the transaction coordinator is retriable:
COORDINATOR_LOAD_IN_PROGRESS (retry without a lookup) for NETWORK_EXCEPTION and a loading
coordinator, COORDINATOR_NOT_AVAILABLE (look up and retry) for the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ...protocol.errors import ErrorCode
from ..coordinator.locks import KeyLocks
from ..coordinator.runtime import CoordinatorRuntime
from .classic import ClassicGroup, ClassicState
from .commits import OffsetToCommit, check_classic_member, metadata_too_large
from .config import GroupConfig
from .errors import GroupError
from .partitioning import OFFSETS_TOPIC
from .records import Key, OffsetKey, OffsetValue, Value
from .shard import Group, GroupShard
from .timer import Timer

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

#: Verification answers a client retries (after a coordinator lookup).
_RETRIABLE = frozenset({
    ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
    ErrorCode.concurrent_transactions, ErrorCode.not_enough_replicas,
    ErrorCode.not_enough_replicas_after_append, ErrorCode.request_timed_out,
    ErrorCode.unknown_topic_or_partition, ErrorCode.not_leader_or_follower,
})
#: Verification answers a client retries without a lookup.
_RETRY_HERE = frozenset({ErrorCode.network_exception, ErrorCode.coordinator_load_in_progress})
#: The first TxnOffsetCommit version that knows TRANSACTION_ABORTABLE (KIP-890).
ABORTABLE_VERSION = 4


T = TypeVar("T")


class Coordinator(Protocol):
    """What transactional commits need of the group coordinator."""

    config: GroupConfig
    timer: Timer

    @property
    def locks(self) -> KeyLocks: ...

    @property
    def runtime(self) -> CoordinatorRuntime[GroupShard]: ...

    def check_loaded(self, shard: GroupShard) -> None: ...

    async def run(self, change: Coroutine[Any, Any, T]) -> T: ...

    async def write(self, shard: GroupShard, records: Sequence[tuple[Key, Value | None]], *,
                    commit: bool = False, txn: tuple[int, int] | None = None,
                    verification_guard: object | None = None) -> int: ...


class TxnVerifier(Protocol):
    """What TxnOffsetCommit needs of the transaction verifier (KIP-890 part 1, Kafka's
    ``AddPartitionsToTxnManager``): whether ``tps`` are in the ongoing transaction of
    ``transactional_id`` at ``producer_id``/``producer_epoch``; one error per partition."""

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     tps: Sequence[TopicPartition]) -> Mapping[TopicPartition, int]:
        ...


@dataclass(slots=True)
class TxnCommit:
    """One TxnOffsetCommit request, as the coordinator sees it."""

    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int
    member_id: str
    group_instance_id: str | None
    offsets: list[OffsetToCommit]
    version: int


def verification_error(code: int, version: int) -> ErrorCode:
    """What TxnOffsetCommit ``version`` answers for a verification that failed with ``code``."""
    error = ErrorCode(code)
    if error == ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    if error == ErrorCode.transaction_abortable and version < ABORTABLE_VERSION:
        return ErrorCode.invalid_txn_state
    if error in _RETRY_HERE:
        return ErrorCode.coordinator_load_in_progress
    if error in _RETRIABLE:
        return ErrorCode.coordinator_not_available
    return error


def validate_txn_commit(group: Group | None, generation: int, member_id: str,
                        instance_id: str | None) -> None:
    """Raise GroupError unless a transactional commit with this membership may commit for
    ``group`` (None: the group does not exist yet)."""
    identified = generation >= 0 or bool(member_id) or instance_id is not None
    if group is None:
        if identified:
            raise GroupError(ErrorCode.unknown_member_id,
                             f"member {member_id!r} is not in the group (it does not exist)")
        return
    if isinstance(group, ClassicGroup):
        if group.is_in(ClassicState.DEAD):
            raise GroupError(ErrorCode.coordinator_not_available)
        if generation < 0 and group.is_in(ClassicState.EMPTY):
            return
        if not identified:
            # Older requests carry no membership: accepted while the group has members too.
            return
        check_classic_member(group, generation, member_id, instance_id)
        return
    if generation < 0 and not group.members:
        return
    member = group.members.get(member_id)
    if member is None:
        raise GroupError(ErrorCode.unknown_member_id)
    if generation != member.member_epoch:
        # Kafka turns STALE_MEMBER_EPOCH into ILLEGAL_GENERATION for transactional commits.
        raise GroupError(ErrorCode.illegal_generation,
                         f"epoch {generation} is not the member's epoch {member.member_epoch}")


class TxnOffsetManager:
    """Transactional offset commits of the coordinator's groups."""

    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator
        self.config = coordinator.config
        self.timer = coordinator.timer

    async def commit(self, shard: GroupShard, request: TxnCommit,
                     verifier: TxnVerifier | None) -> list[int]:
        """Verify, validate, write and hold ``request``'s offsets as pending; returns one
        error code per offset (in order). ``verifier`` None (no transaction coordinator on
        this broker) answers COORDINATOR_NOT_AVAILABLE: nothing is written unverified."""
        count = len(request.offsets)
        tp = (OFFSETS_TOPIC, shard.partition)
        if verifier is None:
            log.warning("TxnOffsetCommit of group %s refused: no transaction verifier",
                        request.group_id)
            return [ErrorCode.coordinator_not_available] * count
        # The guard is taken before asking: a marker or an epoch bump meanwhile voids it.
        guard = self.coordinator.runtime.begin_verification(shard, request.producer_id)
        verified = await verifier.verify(request.transactional_id, request.producer_id,
                                         request.producer_epoch, [tp])
        failed = verified.get(tp, ErrorCode.none)
        if failed != ErrorCode.none:
            error = verification_error(failed, request.version)
            log.debug("TxnOffsetCommit of %s for group %s not verified: %s -> %s",
                      request.transactional_id, request.group_id, ErrorCode(failed).name,
                      error.name)
            return [error] * count
        return await self.coordinator.run(self._commit(shard, request, guard))

    async def _commit(self, shard: GroupShard, request: TxnCommit,
                      guard: object | None) -> list[int]:
        coordinator = self.coordinator
        group_id = request.group_id
        if coordinator.locks.busy(group_id):
            # A change of the group is being written: validate against what it leaves.
            await coordinator.locks.idle(group_id)
            coordinator.check_loaded(shard)
        group = shard.groups.get(group_id)
        try:
            validate_txn_commit(group, request.generation_id, request.member_id,
                                request.group_instance_id)
        except GroupError as exc:
            log.debug("TxnOffsetCommit v%d of group %s (generation %d, member %r) refused: %s",
                      request.version, group_id, request.generation_id, request.member_id,
                      exc.code.name)
            return [exc.code] * len(request.offsets)
        now = self.timer.now_ms()
        errors: list[int] = []
        records = []
        for entry in request.offsets:
            if metadata_too_large(entry.metadata, self.config.offset_metadata_max_bytes):
                errors.append(ErrorCode.offset_metadata_too_large)
                continue
            errors.append(ErrorCode.none)
            records.append((OffsetKey(group_id, entry.topic, entry.partition),
                            OffsetValue(entry.offset, entry.metadata or "", now,
                                        entry.leader_epoch, -1)))
        if not records:
            return errors
        pid = request.producer_id
        try:
            base = await coordinator.write(shard, records, commit=True,
                                           txn=(pid, request.producer_epoch),
                                           verification_guard=guard)
        except GroupError as exc:
            return [exc.code if e == ErrorCode.none else e for e in errors]
        for i, (key, value) in enumerate(records):
            shard.offsets.replay_pending(pid, key, value, base + i)
        if group is None and group_id not in shard.groups:
            # Kafka creates the simple group when the commit is accepted.
            shard.groups[group_id] = ClassicGroup(group_id, now)
        return errors
