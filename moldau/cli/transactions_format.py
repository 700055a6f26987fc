"""Tables of ``moldau transactions`` (kafka-transactions.sh's columns) and the pure rule of
``find-hanging``, kept apart from the I/O so they are unit-tested on their own."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from moldau.client.admin_txn import ProducerState, TransactionDescription, TransactionListing
from moldau.client.types import TopicPartition

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = (
    "CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
    "TopicPartitions",
)
PRODUCER_HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                    "LastTimestamp", "CurrentTransactionStartOffset")
HANGING_HEADERS = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                   "StartOffset", "LastTimestamp", "Duration(min)")
# States in which a coordinator still owns a transaction (Kafka's TransactionState.isActive).
ACTIVE_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Kafka's ``prettyPrintTable``: every cell padded to its column's width, then a tab."""
    cells = [[str(v) for v in headers]] + [[str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "".join(
        "".join(c.ljust(w) + "\t" for c, w in zip(r, widths, strict=True)) + "\n"
        for r in cells)


def _none(value: int) -> str:
    return "None" if value < 0 else str(value)


def list_rows(listings: Iterable[TransactionListing]) -> list[tuple[object, ...]]:
    return [(t.transactional_id, t.coordinator_id, t.producer_id, t.state) for t in listings]


def describe_row(d: TransactionDescription, now_ms: int) -> tuple[object, ...]:
    duration = now_ms - d.start_time_ms if d.start_time_ms >= 0 else -1
    return (d.coordinator_id, d.transactional_id, d.producer_id, d.producer_epoch, d.state,
            d.timeout_ms, _none(d.start_time_ms), _none(duration),
            ",".join(str(tp) for tp in d.topic_partitions))


def producer_rows(states: Iterable[ProducerState]) -> list[tuple[object, ...]]:
    return [(s.producer_id, s.producer_epoch, _none(s.coordinator_epoch), s.last_sequence,
             s.last_timestamp, _none(s.current_txn_start_offset)) for s in states]


@dataclass(frozen=True, slots=True)
class OpenTxn:
    """A transaction a partition leader holds open (from DescribeProducers)."""

    tp: TopicPartition
    producer: ProducerState


def open_transactions(producers: Mapping[TopicPartition, Sequence[ProducerState]],
                      now_ms: int, max_timeout_ms: int) -> list[OpenTxn]:
    """Open transactions whose producer has written nothing for longer than the largest
    transaction timeout: only those can be hanging (a live one would have been aborted)."""
    return [OpenTxn(tp, p) for tp, states in sorted(producers.items()) for p in states
            if p.current_txn_start_offset >= 0 and now_ms - p.last_timestamp > max_timeout_ms]


def hanging(candidates: Iterable[OpenTxn],
            described: Iterable[TransactionDescription]) -> list[OpenTxn]:
    """Candidates no coordinator accounts for: none of the described transactions is active
    with the same producer id and epoch and holds the partition."""
    covered = {(d.producer_id, d.producer_epoch, tp) for d in described
               if d.state in ACTIVE_STATES for tp in d.topic_partitions}
    return [c for c in candidates
            if (c.producer.producer_id, c.producer.producer_epoch, c.tp) not in covered]


def hanging_rows(txns: Iterable[OpenTxn], now_ms: int) -> list[tuple[object, ...]]:
    return [(t.tp.topic, t.tp.partition, t.producer.producer_id, t.producer.producer_epoch,
             _none(t.producer.coordinator_epoch), t.producer.current_txn_start_offset,
             t.producer.last_timestamp, (now_ms - t.producer.last_timestamp) // 60000)
            for t in txns]
