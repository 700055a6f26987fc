"""The persistence seam of a coordinator: appending to and reading back its partitions.

The runtime builds record batches itself (each coordinator's key/value layout, e.g.
:mod:`moldau.broker.group.records`) and hands them to a :class:`CoordinatorLog`. In the broker
the log is the partition layer (the adapter lives in :mod:`.partition_log`: appends of
``origin="coordinator"``, which skip the sequence checks of a client's idempotent produce but
keep the producer-epoch checks); unit tests use :class:`MemoryCoordinatorLog`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

from ...protocol.records.batch import read_header
from ...protocol.records.codec import Header, build_batch


class CoordinatorLogError(Exception):
    """An append to a coordinator's partition failed; carries the Kafka error to report."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message or f"append failed with error {code}")
        self.code = code


class CoordinatorLog(Protocol):
    """What a coordinator needs from the partitions of its topic."""

    async def append(self, partition: int, batch: bytes, *,
                     verification_guard: object | None = None) -> int:
        """Append one record batch (data or control) as leader, with coordinator origin;
        return its base offset.

        Must complete only once the batch is as durable as an acks=all produce would make it
        (committed to the ISR). Raises :class:`CoordinatorLogError` on failure; with a
        ``verification_guard`` (of :meth:`begin_verification`) a transactional batch that
        opens its producer's transaction fails INVALID_TXN_STATE when the guard went stale
        (an end marker or a new epoch came in between, KIP-890).
        """
        ...

    def begin_verification(self, partition: int, producer_id: int) -> object | None:
        """Start verifying ``producer_id``'s transactional write to ``partition`` (before
        asking the transaction coordinator); None when the partition keeps no producer
        state here."""
        ...

    def read_batches(self, partition: int) -> Iterator[bytes]:
        """Every batch of ``partition`` from the log start, each as its exact bytes."""
        ...


def records_batch(
    records: Iterable[tuple[bytes, bytes | None]], timestamp_ms: int, *,
    producer_id: int = -1, producer_epoch: int = -1,
) -> bytes:
    """A RecordBatch v2 of ``(key, value)`` records (value None = tombstone), uncompressed.

    With a ``producer_id`` the batch is transactional (that producer's and epoch's, base
    sequence -1: coordinator appends carry no sequence numbers, as Kafka's)."""
    no_headers: list[Header] = []
    return build_batch(((key, value, no_headers, timestamp_ms) for key, value in records),
                       producer_id=producer_id, producer_epoch=producer_epoch,
                       transactional=producer_id >= 0)


class MemoryCoordinatorLog:
    """An in-memory :class:`CoordinatorLog` (tests, and brokers without a partition layer).

    It keeps no producer state: epoch checks happen in the partition layer only."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[bytes]] = {}
        self.next_offset: dict[int, int] = {}
        self.fail_with: int | None = None

    async def append(self, partition: int, batch: bytes, *,
                     verification_guard: object | None = None) -> int:
        if self.fail_with is not None:
            raise CoordinatorLogError(self.fail_with, "injected failure")
        base = self.next_offset.get(partition, 0)
        header = read_header(batch, 0)
        # Patch the base offset in place as the log would (bytes 0-7 are not under the CRC).
        patched = base.to_bytes(8, "big", signed=True) + batch[8:]
        self.partitions.setdefault(partition, []).append(patched)
        self.next_offset[partition] = base + header.record_count
        return base

    def read_batches(self, partition: int) -> Iterator[bytes]:
        yield from self.partitions.get(partition, [])

    def begin_verification(self, partition: int, producer_id: int) -> object | None:
        return None
