"""What the coordinator runtime asks of a shard (the state of one partition of a coordinator's
topic) and of the coordinator that owns the shards (Kafka's ``CoordinatorShard``).

A shard changes only through replay: while loading, of every record of its partition in log
order; at run time, of the records a request just wrote (the coordinator replays them after
:meth:`CoordinatorRuntime.write` returned). Records of a transaction (offsets committed through
TxnOffsetCommit) carry their producer id and are pending until the transaction's end marker,
which reaches the shard as :meth:`CoordinatorShard.replay_end_txn`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeVar


@dataclass(frozen=True, slots=True)
class LoggedRecord:
    """One record of a coordinator's partition as replay sees it."""

    offset: int
    key: bytes
    value: bytes | None
    #: -1 unless the record was written by a producer (inside a transaction).
    producer_id: int = -1
    producer_epoch: int = -1
    transactional: bool = False


class CoordinatorShard(Protocol):
    """The state of one partition of a coordinator's topic."""

    #: The partition it holds.
    partition: int
    #: The partition's leader epoch when the shard was loaded: Kafka's "coordinator epoch",
    #: which fences markers and writes of a coordinator that lost the partition.
    epoch: int

    def replay(self, record: LoggedRecord) -> None:
        """Apply one record read back from the log (skip it, logging why, if unreadable:
        raise ValueError and the runtime logs and skips it)."""
        ...

    def replay_end_txn(self, producer_id: int, commit: bool, offset: int) -> None:
        """Apply the end of ``producer_id``'s transaction (its marker sits at ``offset``):
        its pending records take effect on commit and are dropped on abort."""
        ...

    def finish_load(self, now_ms: int) -> None:
        """Every record is replayed: build what only the whole log tells."""
        ...


S = TypeVar("S", bound=CoordinatorShard)
S_contra = TypeVar("S_contra", bound=CoordinatorShard, contravariant=True)


class ShardListener(Protocol[S_contra]):
    """What a coordinator does when one of its shards comes or goes (groups: start timers,
    answer parked requests NOT_COORDINATOR; transactions: re-send the markers of prepared
    transactions, drop the shard's marker queues)."""

    def on_loaded(self, shard: S_contra) -> None:
        """``shard`` is loaded and serves requests from now on."""
        ...

    def on_unloaded(self, shard: S_contra) -> None:
        """``shard`` no longer serves requests (leadership moved, or the node stops)."""
        ...
