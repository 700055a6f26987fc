"""What a partition leader knows about each follower: :class:`ReplicaProgress`, and the pure
rules over it (Kafka's ``Replica`` / ``ReplicaState`` and ``Partition.maybeIncrementLeaderHW``).

The leader learns a follower's log end offset from the offset of its fetches (a follower
fetches from its own log end), and when the follower was last *caught up*, with Kafka's rule
(:func:`record_fetch`): a fetch at or past the leader's log end offset means caught up now; a
fetch at or past the leader's log end offset *as it was at the follower's previous fetch* means
the follower had everything the leader had back then, so it was caught up as of that previous
fetch. A steady stream of produces therefore never makes a follower look lagging as long as
each of its fetches reaches what the leader had at its previous one.

The high watermark is the smallest log end offset over the ISR, the leader's own included
(:func:`high_watermark_candidate`); it never moves back on the leader (the caller keeps the
larger of the old one and the candidate). ISR shrink and expand (``replica.lag.time.max.ms``,
AlterPartition, :mod:`.isr`) use :func:`is_caught_up` and :func:`can_join_isr`, the one place
those rules live; they are pure and take the clock as an argument.

Everything here is stable API for the ISR work: add fields with defaults, don't rename.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

#: A log end offset the leader does not know yet (no fetch from the follower since this
#: broker became leader): Kafka's ``UnifiedLog.UnknownOffset``.
UNKNOWN_OFFSET = -1


@dataclass(slots=True)
class ReplicaProgress:
    """A follower's replication state as its leader sees it (times in ms, wall clock).

    ``log_end_offset`` is the fetch offset of the follower's last fetch (UNKNOWN_OFFSET before
    the first); ``last_fetch_leader_log_end_offset`` the leader's log end offset at that fetch;
    ``last_caught_up_time_ms`` the last time the follower had everything the leader had
    (0: never, as far as this leader knows)."""

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_time_ms: int = 0
    #: The high watermark the leader last sent this follower (-1: none yet); with
    #: ``replica.selector.class`` set a newer one is sent at once (:mod:`.read_replica`).
    last_sent_high_watermark: int = UNKNOWN_OFFSET


def new_leader_progress(broker_id: int, *, in_isr: bool, now_ms: int) -> ReplicaProgress:
    """A follower's progress when this broker becomes the leader (Kafka's
    ``resetReplicaState`` for a new leader): its log end offset is unknown until it fetches;
    an ISR member counts as caught up now (so it is not dropped before it could fetch), any
    other replica as never caught up."""
    return ReplicaProgress(broker_id, last_caught_up_time_ms=now_ms if in_isr else 0)


def record_fetch(progress: ReplicaProgress, *, fetch_offset: int, log_start_offset: int,
                 leader_log_end_offset: int, now_ms: int) -> None:
    """Update ``progress`` for a fetch from its follower at ``fetch_offset``, answered while
    the leader's log ended at ``leader_log_end_offset`` (Kafka's ``Replica.updateFetchState``).
    """
    if fetch_offset >= leader_log_end_offset:
        progress.last_caught_up_time_ms = max(progress.last_caught_up_time_ms, now_ms)
    elif fetch_offset >= progress.last_fetch_leader_log_end_offset >= 0:
        progress.last_caught_up_time_ms = max(progress.last_caught_up_time_ms,
                                              progress.last_fetch_time_ms)
    progress.last_fetch_leader_log_end_offset = leader_log_end_offset
    progress.last_fetch_time_ms = now_ms
    progress.log_end_offset = fetch_offset
    progress.log_start_offset = log_start_offset


def high_watermark_candidate(leader_log_end_offset: int, leader_id: int, isr: Iterable[int],
                             followers: Mapping[int, ReplicaProgress]) -> int:
    """The smallest log end offset over the ISR, the leader's own included. A member whose
    progress is unknown (no fetch yet, or no record at all) counts as UNKNOWN_OFFSET, so the
    candidate is below any real high watermark and the caller keeps the old one."""
    low = leader_log_end_offset
    for broker_id in isr:
        if broker_id == leader_id:
            continue
        progress = followers.get(broker_id)
        end = progress.log_end_offset if progress is not None else UNKNOWN_OFFSET
        if end < low:
            low = end
    return low


class FollowerProgress(Protocol):
    """What the ISR rules read of a follower's progress (a :class:`ReplicaProgress`)."""

    @property
    def log_end_offset(self) -> int: ...

    @property
    def last_caught_up_time_ms(self) -> int: ...


def is_caught_up(progress: FollowerProgress, *, leader_log_end_offset: int, now_ms: int,
                 max_lag_ms: int) -> bool:
    """Whether the follower may stay in the ISR (Kafka's ``Replica.isCaughtUp``): it has the
    leader's whole log, or it was caught up within the last ``max_lag_ms``
    (``replica.lag.time.max.ms``)."""
    return (progress.log_end_offset == leader_log_end_offset
            or now_ms - progress.last_caught_up_time_ms <= max_lag_ms)


def can_join_isr(progress: FollowerProgress, *, high_watermark: int,
                 leader_epoch_start_offset: int) -> bool:
    """Whether a follower outside the ISR may join it (Kafka's ``isFollowerInSync``): its log
    reaches the high watermark and the start of the leader's current epoch, so everything
    committed, and everything this leader wrote, is on it."""
    end = progress.log_end_offset
    return end != UNKNOWN_OFFSET and end >= high_watermark and end >= leader_epoch_start_offset
