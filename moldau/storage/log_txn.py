"""Transactions on a partition log: the aborted transaction index, the first unstable offset
and KIP-890 verification guards.

A mixin of :class:`moldau.storage.log.Log`, split out to keep files small; every method takes
the log's lock like the rest of ``Log``. An ABORT marker appended to the log adds an entry to
the ``.txnindex`` of the segment active at that moment (:mod:`.txn_index`), with the last
stable offset the partition has once that transaction is complete, which is what lets
:meth:`LogTransactions.collect_aborted` stop early. COMMIT markers leave no entry.
"""

from __future__ import annotations

import threading
from bisect import bisect_right

from .errors import KafkaStorageError
from .producer_state import CompletedTxn, ProducerStateManager, VerificationGuard
from .segment import Segment
from .txn_index import AbortedTxn


class LogTransactions:
    """What read_committed fetches and transactional produces need of a log."""

    # Attributes provided by Log.__init__.
    topic: str
    partition: int
    producer_state: ProducerStateManager
    log_start_offset: int
    offline: bool
    _lock: threading.RLock
    _segments: list[Segment]
    _bases: list[int]

    def _complete_txns(self, completed: list[CompletedTxn]) -> None:
        """COMMIT/ABORT markers were appended (producer state already closed their
        transactions): index the aborted ones in the active segment."""
        seg = self._segments[-1]
        ps = self.producer_state
        for txn in completed:
            if not txn.is_aborted:
                continue
            entry = AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset,
                               ps.last_stable_offset(txn))
            try:
                seg.txn_index.append(entry)
            except OSError as exc:
                # The marker is in the log but its index entry is not: the log goes offline
                # and recovery at the next start rebuilds the index from the markers.
                self.offline = True
                raise KafkaStorageError(
                    f"writing the aborted transaction index {seg.txn_index.path} failed: "
                    f"{exc}; restart the broker once the disk is healthy") from exc

    def collect_aborted(self, start: int, upper: int) -> list[tuple[int, int]]:
        """``(producer id, first offset)`` of the aborted transactions overlapping
        ``[start, upper)``, for a read_committed fetch from ``start`` that returned records
        below ``upper`` (Kafka's collectAbortedTransactions)."""
        with self._lock:
            segments = self._segments[max(bisect_right(self._bases, start) - 1, 0):]
            out: list[tuple[int, int]] = []
            for seg in segments:
                found, complete = seg.txn_index.collect(start, upper)
                out.extend((t.producer_id, t.first_offset) for t in found)
                if complete:
                    break
            return out

    def aborted_txns(self, start: int, end: int) -> list[AbortedTxn]:
        """Whole index entries overlapping ``[start, end)`` (the cleaner's view)."""
        with self._lock:
            out: list[AbortedTxn] = []
            for seg in self._segments:
                out.extend(t for t in seg.txn_index.entries
                           if t.last_offset >= start and t.first_offset < end)
            return out

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest transaction that is open or whose marker is not yet
        below the high watermark (LSO = min(HW, this)), never below the log start offset
        (retention or DeleteRecords may have removed the start of an open transaction; Kafka
        clamps the same way). Read on every fetch without the log's lock, as before
        transactions: only the event loop's appends change it."""
        first = self.producer_state.first_unstable_offset()
        return first if first is None or first >= self.log_start_offset else self.log_start_offset

    def begin_verification(self, producer_id: int) -> VerificationGuard:
        """Start KIP-890 verification of ``producer_id``'s first transactional write here;
        pass the guard to ``append(verification_guard=)`` once the coordinator confirmed."""
        with self._lock:
            return self.producer_state.begin_verification(producer_id)

    def verification_guard(self, producer_id: int) -> VerificationGuard | None:
        """The guard of ``producer_id``'s verification in flight, if any."""
        with self._lock:
            return self.producer_state.verification_guard(producer_id)

    def has_ongoing_txn(self, producer_id: int) -> bool:
        """Whether ``producer_id`` has an open transaction on this partition (a produce then
        needs no verification)."""
        with self._lock:
            return producer_id in self.producer_state.ongoing_txns
