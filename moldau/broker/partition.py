"""A partition replica on this broker: its log, leadership, high watermark and ISR.

A single node is a cluster of one: every partition has a leader epoch, a high watermark and an
ISR (just this broker) from the start, so replication adds followers without changing callers.
The high watermark is the smallest log end offset among ISR members (the leader's own
included; the followers' come from their fetches, :mod:`.replication.progress`); with an ISR
of one it follows the leader's log end offset on every append. It never moves back on a
leader. A follower sets its own from the leader's answers (:meth:`Partition.append_as_follower`
and :meth:`Partition.update_follower_high_watermark`).

A broker that becomes leader through an unclean election (the partition state says
``leader_recovery_state`` RECOVERING, KIP-704) logs a warning with what it knows of the loss:
where its log ends, and the last high watermark the previous leader had told it, below which
every record was acknowledged. The exact range is logged by each former replica that drops it
when it rejoins (:mod:`.replication.fetcher`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.records.batch import BatchHeader, iter_batches, validate_batches
from ..storage.log import AppendInfo, Log
from ..storage.producer_state import ORIGIN_CLIENT, ORIGIN_COORDINATOR
from .metadata.image import RECOVERING, PartitionState
from .metadata.isr_change import IsrChangeResult
from .purgatory import Purgatory
from .replication.progress import (
    ReplicaProgress,
    high_watermark_candidate,
    new_leader_progress,
    record_fetch,
)

logger = logging.getLogger(__name__)


class IsrHooks(Protocol):
    """What a led partition asks of the ISR manager (:class:`.replication.isr.IsrManager`)."""

    def maximal_isr(self, key: tuple[uuid.UUID, int], isr: Sequence[int]
                    ) -> Sequence[int]: ...

    def check_expand(self, partition: Any, replica: int) -> Any: ...


@dataclass(slots=True)
class PartitionRead:
    error: ErrorCode
    records: bytes | memoryview | None
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]] | None


class Partition:
    """One topic-partition hosted here."""

    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, log: Log, *, node_id: int,
                 purgatory: Purgatory, time_ms: Callable[[], int]) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.node_id = node_id
        self.purgatory = purgatory
        self.time_ms = time_ms
        self.key = (topic, index)
        self.leader = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.isr: list[int] = []
        self.replicas: list[int] = []
        self.topic_config: dict[str, Any] = {}
        # From topic_config, read on every produce: (message.timestamp.before.max.ms,
        # message.timestamp.after.max.ms, min.insync.replicas, compression.type).
        self.produce_limits: tuple[int, int, int, str] = (2**63 - 1, 2**63 - 1, 1, "producer")
        # Leader with an ISR of just this broker: the high watermark follows every append.
        self._sole_leader = False
        # As leader: what each other replica has fetched (reset when this broker becomes
        # leader; empty while it follows).
        self.followers: dict[int, ReplicaProgress] = {}
        # The broker is fenced (its registration lapsed): it leads nothing, whatever the image
        # says, until the replica manager lifts the fence.
        self.fenced = False
        # The ISR manager of a broker of a cluster (None: a single node, whose ISR is itself).
        self.isr_hooks: IsrHooks | None = None
        # The log end offset when this broker became leader of the current epoch (Kafka's
        # leaderEpochStartOffsetOpt): a follower joins the ISR only once it reaches it.
        self.epoch_start_offset = 0
        # As follower: the high watermark the leader last answered (-1: none heard since this
        # broker started), which may be past this log's end.
        self.leader_high_watermark = -1

    def set_topic_config(self, config: dict[str, Any]) -> None:
        """The topic's effective configs (``produce_limits`` follows)."""
        self.topic_config = config
        self.produce_limits = (
            config.get("message.timestamp.before.max.ms", 2**63 - 1),
            config.get("message.timestamp.after.max.ms", 2**63 - 1),
            config.get("min.insync.replicas", 1),
            config.get("compression.type", "producer"),
        )

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def is_leader(self) -> bool:
        return self.leader == self.node_id and not self.fenced

    @property
    def partition(self) -> int:
        """The partition index (the ISR manager's name for it)."""
        return self.index

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def maximal_isr(self) -> Sequence[int]:
        """The ISR the high watermark respects: the ISR plus a replica whose joining the
        controller has not answered yet (Kafka's PendingExpandIsr maximal ISR)."""
        hooks = self.isr_hooks
        if hooks is None:
            return self.isr
        return hooks.maximal_isr((self.topic_id, self.index), self.isr)

    def apply_state(self, state: PartitionState) -> None:
        """Take the leader/ISR/epoch the metadata image says this partition has."""
        was_leader = self.is_leader
        if (state.leader == self.leader and state.leader_epoch == self.leader_epoch
                and state.partition_epoch < self.partition_epoch):
            # An image older than the ISR change this leader already applied from the
            # controller's answer (the ZooKeeper watch lags it): keep the newer state.
            return
        became_leader = state.leader == self.node_id and not self.fenced and (
            not was_leader or state.leader_epoch != self.leader_epoch
        )
        if (became_leader and state.leader_recovery_state == RECOVERING
                and 0 <= self.leader_epoch < state.leader_epoch):
            # Seen happening (not a restart into a state that is still RECOVERING).
            self._warn_unclean_leadership(state.leader_epoch)
        self.leader, self.isr, self.replicas = state.leader, list(state.isr), list(state.replicas)
        self.partition_epoch = state.partition_epoch
        self.leader_epoch = state.leader_epoch
        self._sole_leader = self.is_leader and self.isr == [self.node_id]
        if became_leader:
            self._start_leader_epoch()
            self._reset_followers()
        elif self.is_leader:
            self._sync_followers()
        if not self.is_leader:
            self.followers = {}
        if was_leader and not self.is_leader:
            # Parked acks=all produces and long-poll fetches re-check and answer
            # NOT_LEADER_OR_FOLLOWER now rather than at their timeout.
            self.purgatory.notify(self.key)
        if self._maybe_advance_high_watermark():
            # A smaller ISR (a dead follower dropped) commits what the others have: the
            # acks=all produces waiting for it are answered now, not at their timeout.
            self.purgatory.notify(self.key)

    def _warn_unclean_leadership(self, leader_epoch: int) -> None:
        """The loss, as far as this broker can know it, when it leads after an unclean
        election: the previous leader's records from this log's end on are gone; those below
        the last high watermark it heard of were acknowledged."""
        log_end = self.log.log_end_offset
        heard = max(self.leader_high_watermark, self.log.high_watermark)
        if heard > log_end:
            acknowledged = (f"at least offsets {log_end}..{heard - 1} of them had been "
                            f"acknowledged (they were below that high watermark)")
        else:
            acknowledged = ("none below that high watermark, but records acknowledged "
                            "after it (acks=1, or before this broker heard of a higher high "
                            "watermark) may be among them")
        logger.warning(
            "Unclean leader election of %s-%d: broker %d leads it from leader epoch %d "
            "without having been in sync (leader_recovery_state RECOVERING). Its log ends at "
            "offset %d; the last high watermark it had learned from the previous leader is "
            "%d. Records the previous leader had from offset %d on are lost: %s. A former "
            "replica that rejoins logs the exact range it drops.", self.topic, self.index,
            self.node_id, leader_epoch, log_end, heard, log_end, acknowledged)

    def _start_leader_epoch(self) -> None:
        log = self.log
        log.assign_epoch_start_offset(self.leader_epoch)
        entries = log.epoch_cache.entries
        self.epoch_start_offset = (entries[-1][1] if entries and entries[-1][0]
                                   == self.leader_epoch else log.log_end_offset)

    def apply_isr_result(self, result: IsrChangeResult) -> None:
        """Take the ISR and partition epoch the controller answered an ISR change of this
        leader with (the image learns them with the metadata replay, later); an answer for
        another leader epoch or an older partition epoch is ignored."""
        if (not self.is_leader or result.leader_epoch != self.leader_epoch
                or result.partition_epoch <= self.partition_epoch):
            return
        self.isr = list(result.isr)
        self.partition_epoch = result.partition_epoch
        self._sole_leader = self.isr == [self.node_id]
        # A smaller ISR may commit more; waiting acks=all produces also re-check
        # min.insync.replicas against the new ISR (NOT_ENOUGH_REPLICAS_AFTER_APPEND).
        self._maybe_advance_high_watermark()
        self.purgatory.notify(self.key)

    def _reset_followers(self) -> None:
        now = self.time_ms()
        self.followers = {r: new_leader_progress(r, in_isr=r in self.isr, now_ms=now)
                          for r in self.replicas if r != self.node_id}

    def _sync_followers(self) -> None:
        """Replicas added while leading get a fresh record; removed ones lose theirs."""
        now = self.time_ms()
        self.followers = {r: self.followers.get(r) or new_leader_progress(
                              r, in_isr=r in self.isr, now_ms=now)
                          for r in self.replicas if r != self.node_id}

    def set_fenced(self, fenced: bool) -> None:
        """Stop (``fenced``) or resume leading the partition as its last applied state says
        (the epoch it leads in may have moved on while fenced: its start is recorded now)."""
        if fenced == self.fenced:
            return
        was_leader = self.is_leader
        self.fenced = fenced
        self._sole_leader = self.is_leader and self.isr == [self.node_id]
        if was_leader and not self.is_leader:
            self.purgatory.notify(self.key)
        elif self.is_leader:
            self._start_leader_epoch()
            self._reset_followers()
            if self._maybe_advance_high_watermark():
                self.purgatory.notify(self.key)

    def check_leader_epoch(self, requested: int) -> ErrorCode:
        if requested < 0 or requested == self.leader_epoch:
            return ErrorCode.none
        if requested < self.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        return ErrorCode.unknown_leader_epoch

    # --- writes --------------------------------------------------------------------------
    def append_as_leader(self, buf: bytes | bytearray | memoryview,
                         headers: list[BatchHeader], *, origin: str = ORIGIN_CLIENT,
                         verification_guard: object | None = None) -> AppendInfo:
        """Append validated batches; raises KafkaError for producer-state errors.

        ``origin`` is "client" or "coordinator" (no sequence checks, control batches allowed);
        ``verification_guard`` is the token of :meth:`Log.begin_verification` a transactional
        produce verified with the coordinator (KIP-890)."""
        if self.leader != self.node_id:
            raise KafkaError(
                ErrorCode.not_leader_or_follower,
                f"Broker {self.node_id} is not the leader of {self.topic}-{self.index}",
            )
        log = self.log
        append_time = (self.time_ms() if log.config.message_timestamp_type == "LogAppendTime"
                       else None)
        info = log.append(buf, headers, self.leader_epoch, append_time, origin,
                          verification_guard=verification_guard)
        if not info.duplicate:
            self._maybe_advance_high_watermark()
            self.purgatory.notify(self.key)
        return info

    def append_control(self, batch: bytes | bytearray) -> AppendInfo:
        """Append one control batch (a COMMIT/ABORT marker) as leader, from the transaction
        coordinator: epoch checks apply (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED,
        raised as KafkaError), sequence checks do not. Wakes the purgatory: read_committed
        long polls may now read further, acks=all waiters re-check."""
        if not self.is_leader:
            raise KafkaError(
                ErrorCode.not_leader_or_follower,
                f"Broker {self.node_id} is not the leader of {self.topic}-{self.index}",
            )
        return self.append_as_leader(bytearray(batch), validate_batches(batch),
                                     origin=ORIGIN_COORDINATOR)

    def _maybe_advance_high_watermark(self) -> bool:
        """As leader, move the high watermark up to the smallest log end offset over the ISR;
        True if it moved (the caller wakes the purgatory)."""
        log = self.log
        if self._sole_leader and (self.isr_hooks is None or len(self.maximal_isr()) == 1):
            # An ISR of just this leader (and no replica joining): every append commits.
            candidate = log.log_end_offset
        elif self.is_leader:
            candidate = high_watermark_candidate(log.log_end_offset, self.node_id,
                                                 self.maximal_isr(), self.followers)
        else:
            return False
        if candidate > log.high_watermark:
            log.update_high_watermark(candidate)
            return True
        return False

    # --- replication: leader side ----------------------------------------------------------
    def is_follower_replica(self, broker_id: int) -> bool:
        """Whether ``broker_id`` is one of this partition's replicas other than this broker
        (a fetch from it is served up to the log end offset)."""
        return broker_id != self.node_id and broker_id in self.replicas

    def record_follower_fetch(self, broker_id: int, fetch_offset: int,
                              log_start_offset: int) -> None:
        """A fetch from follower ``broker_id`` at ``fetch_offset``: update its progress and
        the high watermark; a high watermark that moved wakes acks=all produces and
        consumers' long polls."""
        progress = self.followers.get(broker_id)
        if progress is None or fetch_offset > self.log.log_end_offset:
            # Past the end (a diverged log, answered OFFSET_OUT_OF_RANGE): that offset says
            # nothing about what the follower has of this log, as in Kafka, which records
            # only fetches that read.
            return
        record_fetch(progress, fetch_offset=fetch_offset, log_start_offset=log_start_offset,
                     leader_log_end_offset=self.log.log_end_offset, now_ms=self.time_ms())
        if self._maybe_advance_high_watermark():
            self.purgatory.notify(self.key)
        if self.isr_hooks is not None and broker_id not in self.isr:
            self.isr_hooks.check_expand(self, broker_id)

    # --- replication: follower side --------------------------------------------------------
    def append_as_follower(self, buf: bytes | bytearray, leader_high_watermark: int
                           ) -> AppendInfo | None:
        """Append batches fetched from the leader as they are (offsets and epochs the leader
        gave them), then take the leader's high watermark as far as this log reaches."""
        info = self.log.append_as_follower(buf) if buf else None
        self.update_follower_high_watermark(leader_high_watermark)
        return info

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        """Follower: high watermark = min(leader's, own log end offset). A move wakes the
        long polls of consumers reading from this follower (KIP-392)."""
        self.leader_high_watermark = leader_high_watermark
        log = self.log
        target = min(leader_high_watermark, log.log_end_offset)
        if target > log.high_watermark:
            log.update_high_watermark(target)
            self.purgatory.notify(self.key)

    @property
    def last_stable_offset(self) -> int:
        first_unstable = self.log.first_unstable_offset()
        if first_unstable is None:
            return self.high_watermark
        return min(first_unstable, self.high_watermark)

    # --- reads ---------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, committed: bool, min_one: bool, *,
             up_to_log_end: bool = False) -> PartitionRead:
        """Whole batches from ``offset``: up to the last stable offset (``committed``, with the
        aborted transactions of the range), the high watermark (consumers), or the log end
        offset (``up_to_log_end``: followers)."""
        if up_to_log_end:
            limit = self.log.log_end_offset
        else:
            limit = self.last_stable_offset if committed else self.high_watermark
        start = self.log.log_start_offset
        if offset < start or offset > self.log.log_end_offset:
            return PartitionRead(ErrorCode.offset_out_of_range, None, self.high_watermark,
                                 self.last_stable_offset, start, None)
        data = self.log.read(offset, max_bytes, limit, min_one).records
        aborted: list[tuple[int, int]] | None = None
        if committed:
            # The aborted transactions overlapping what is returned (up to the end of its last
            # batch; the LSO when nothing is), so the consumer can drop their records. The
            # batches are walked only when some transaction up to the LSO was aborted.
            aborted = self.log.collect_aborted(offset, limit)
            if aborted and data:
                upper = limit
                for _pos, header in iter_batches(data):
                    upper = header.next_offset
                aborted = [a for a in aborted if a[1] < upper]
        return PartitionRead(ErrorCode.none, data, self.high_watermark,
                             self.last_stable_offset, start, aborted)
