"""What the log cleaner knows about transactions while it walks a range of the log (Kafka's
``CleanedTransactionMetadata``).

The aborted transactions overlapping the range come from the ``.txnindex`` files. Walking the
batches in offset order, an aborted transaction becomes "ongoing" at its first offset and ends
at its ABORT marker, so every transactional batch of its producer in between is aborted data:
the cleaner drops it and keeps it out of the offset map (an aborted write never shadows a
committed one). A marker may go only once no batch of its transaction is left: a marker whose
transaction still had batches in this pass is kept (and an ABORT marker's index entry is
written to the cleaned segment), one without gets a delete horizon and is removed by a pass
after it (KIP-534, as tombstones). Dropping a marker while data of its transaction remains
would make a reload see an open transaction and hold the last stable offset for good.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from moldau.protocol.records.batch import BatchHeader
from moldau.protocol.records.control import EndTxnMarker

from .txn_index import AbortedTxn


class CleanedTxns:
    """Transaction state of one walk over ``[start, end)``; feed it every batch in order."""

    def __init__(self, aborted: Iterable[AbortedTxn], start: int = 0, end: int = 2**63 - 1
                 ) -> None:
        self._pending = deque(sorted((t for t in aborted
                                      if t.last_offset >= start and t.first_offset < end),
                                     key=lambda t: t.first_offset))
        # producer id -> [its aborted transaction, last offset of a batch of it seen here]
        self._aborted: dict[int, list] = {}
        self._committed: set[int] = set()
        #: Entries for the cleaned segment's ``.txnindex`` (ABORT markers kept with data).
        self.kept_entries: list[AbortedTxn] = []

    def _consume_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0].first_offset <= offset:
            txn = pending.popleft()
            self._aborted.setdefault(txn.producer_id, [txn, None])

    def on_batch(self, header: BatchHeader) -> bool:
        """A data batch; True if it belongs to an aborted transaction."""
        last = header.base_offset + header.last_offset_delta
        self._consume_up_to(last)
        if not header.is_transactional:
            return False
        ongoing = self._aborted.get(header.producer_id)
        if ongoing is not None:
            ongoing[1] = last
            return True
        self._committed.add(header.producer_id)
        return False

    def on_marker(self, header: BatchHeader, marker: EndTxnMarker | None) -> bool:
        """A control batch (``marker`` decoded, None if empty or not a transaction marker);
        True if nothing of its transaction was seen in this walk, so it may go (after its
        delete horizon)."""
        self._consume_up_to(header.base_offset + header.last_offset_delta)
        if header.record_count == 0:
            return True  # emptied by an earlier pass
        if marker is None:
            return False  # another control type: kept
        pid = header.producer_id
        if marker.is_commit:
            if pid in self._committed:
                self._committed.discard(pid)
                return False
            return True
        ongoing = self._aborted.pop(pid, None)
        if ongoing is not None and ongoing[1] is not None:
            self.kept_entries.append(ongoing[0])
            return False
        return True
