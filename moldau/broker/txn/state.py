"""Transaction states and the metadata the coordinator keeps per transactional id.

Mirrors Kafka's ``TransactionState`` (ids as written in ``__transaction_state``, names as
DescribeTransactions and ListTransactions show them) and ``TransactionMetadata``. Metadata is
immutable: every change is a new value computed by :mod:`.transitions`, written to the log,
then put into the shard.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

#: Epochs at or above this are exhausted: the next bump rotates to a new producer id
#: (Kafka's ``TransactionMetadata.isEpochExhausted``: ``Short.MAX_VALUE - 1``).
EXHAUSTED_EPOCH = 32766
MAX_EPOCH = 32767
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


class TxnState(enum.IntEnum):
    """Kafka's transaction states with the ids of the ``TransactionStatus`` field."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7  # in memory only, never written

    @property
    def display(self) -> str:
        """The name Kafka's admin APIs use (``CompleteCommit``)."""
        return _DISPLAY[self]

    @classmethod
    def from_display(cls, name: str) -> TxnState | None:
        """The state called ``name`` by the admin APIs, or None when there is none."""
        return _BY_DISPLAY.get(name)

    @property
    def is_prepare(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def is_idle(self) -> bool:
        """No transaction is open or being finished (Empty, CompleteCommit, CompleteAbort)."""
        return self is TxnState.EMPTY or self.is_complete


_DISPLAY = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_DISPLAY = {name: state for state, name in _DISPLAY.items()}

_S = TxnState
#: Which states each state may be entered from (Kafka's ``validPreviousStates``, TV1).
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


def is_epoch_exhausted(epoch: int) -> bool:
    """Whether bumping ``epoch`` once more would leave no room for a fencing bump."""
    return epoch >= EXHAUSTED_EPOCH


TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    """What the coordinator knows of one transactional id (Kafka's ``TransactionMetadata``).

    ``last_producer_id`` is the id before a rotation (an exhausted epoch), so a producer that
    missed the answer can still recover with it; ``last_producer_epoch`` is the epoch before
    the last bump, kept in memory only (a retried InitProducerId gets the same answer) and -1
    after a load.
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = field(default_factory=frozenset)
    start_ms: int = -1
    last_update_ms: int = -1
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH

    def to(self, state: TxnState, **changes: object) -> TxnMetadata:
        """This metadata moved to ``state`` (with ``changes``); raises ValueError for a move
        Kafka does not allow, which would be a coordinator bug."""
        if self.state not in VALID_PREVIOUS[state]:
            raise ValueError(f"transactional id {self.transactional_id!r}: illegal move "
                             f"from {self.state.display} to {state.display}")
        return replace(self, state=state, **changes)  # type: ignore[arg-type]

    def topics(self) -> dict[str, list[int]]:
        """The partitions grouped by topic, sorted (as records and admin answers list them)."""
        out: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            out.setdefault(topic, []).append(partition)
        return out
